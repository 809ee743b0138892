//! The runner library's integration tests, one binary: each file a module (plans, the tools:
//! kvp dump, report parse, vectors check).

mod runner_plans;
mod tools_kvp;
mod tools_report;
mod tools_vectors;
