//! The command line's integration tests, one binary: each file a module, each running the
//! `wirecheck` binary as a user would; `runner_support`, `release_support` and `results_support`
//! are what they share. Four suites are binaries of their own, because they load the machine on
//! purpose and judge verdicts under that load: `runner_budget` (CPU hogs), `runner_limits` (fork
//! and memory bombs), `runner_trust` (the XML bomber and slow starters) and `snapshots` (spinners);
//! beside other tests their load would reach those tests and others' load would reach them.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod release_support;
#[path = "../../results/tests/results_support/mod.rs"]
mod results_support;
mod runner_support;

mod ci_action;
mod hostile_input;
mod kvp_host_view;
mod prop;
mod release;
mod results_ci_example;
mod results_console;
mod results_html_browser;
mod results_merge;
mod runner_cli;
mod runner_containment;
mod runner_e2e;
mod runner_faults;
mod runner_guest;
mod runner_lifetime;
mod runner_newcomer;
mod runner_real_agents;
mod runner_sandbox;
