//! The oracle's integration tests, one binary: each file a module (findings, host view,
//! properties, vectors).

mod oracle_findings;
mod oracle_host_view;
mod oracle_properties;
mod oracle_vectors;
