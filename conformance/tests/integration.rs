//! The runner library's integration tests, one binary: each file a module (plans, the tools:
//! kvp dump, report parse, vectors check).

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod runner_plans;
mod tools_kvp;
mod tools_report;
mod tools_vectors;
