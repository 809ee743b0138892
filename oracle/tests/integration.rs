//! The oracle's integration tests, one binary: each file a module (findings, host view,
//! properties, vectors).

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod oracle_findings;
mod oracle_host_view;
mod oracle_properties;
mod oracle_vectors;
