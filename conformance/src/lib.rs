//! wirecheck: runs provisioning agents against scenarios on the fake wireserver and judges what
//! they did.
//!
//! The runner library behind the `wirecheck` command line (crate `wirecheck`, `cli/`): it plans,
//! runs, judges and reports progress as events ([`progress`]); it draws nothing, and the results
//! it builds are the `wirecheck-results` crate's model.
//!
//! Code map: [`agent`] (profiles and command templates), [`build_info`] (which build this is:
//! version and commit), [`scenario`] (scenario files), [`bounds`] (the largest numbers those
//! files may give), [`catalog`] (the check ids, a leaf),
//! [`disposition`] (what becomes of a case: run, skipped and why, harness error),
//! [`checks`] (the judges), [`observe`] (what a run produced, and the profile's reading of
//! each answer), [`runner`] (planning, parallel execution, artifacts), [`exec`] (agent
//! processes), [`netns`] (the private network namespace of proxy agents), [`containment`] (whether agents can be contained here), [`timeline`],
//! [`select`] (case globs, partitions), [`embedded`] (the built-in suite and profiles),
//! [`snapshot`] (regression snapshots), [`tools`] (`kvp dump`, `report parse`, `vectors
//! check`), [`prop`] (`wirecheck prop`: generated inputs, shrunk failures).
//!
//! The conformance crate never depends on the `reporter` crate: the bundled reporter is run as
//! an external process, like any agent (DESIGN.md, "the oracle is independent").

// Unit tests read top to bottom as the story they check; the length rule is for the code.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod agent;
pub mod bounds;
pub mod build_info;
pub mod catalog;
pub mod checks;
pub mod containment;
pub mod diag;
pub mod disposition;
pub mod embedded;
pub mod exec;
pub mod lifetime;
pub mod netns;
pub mod obligations;
pub mod observe;
pub mod progress;
pub mod prop;
pub mod renamed;
pub mod runner;
pub mod scenario;
pub mod select;
pub mod snapshot;
pub mod timeline;
pub mod tools;
