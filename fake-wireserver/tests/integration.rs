//! The fake's integration tests, one binary: each file a module; `common` is what they share.
//! Three suites are binaries of their own: `fd_exhaustion` lowers this process's descriptor limit
//! and takes every descriptor left, `hostile_input` raises it and holds a thousand connections,
//! `bounded_work` times a neighbour's answers while bombers load the machine; beside other tests
//! they would fail them or be disturbed by them.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod common;

mod admin_journal;
mod api_validation;
mod defaults;
mod expectations;
mod faults;
mod imds_rate_limit;
mod robustness;
mod rust_api;
mod scenario_files;
mod smoke;
mod vectors;
mod wala;
