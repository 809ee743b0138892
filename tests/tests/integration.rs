//! The whole-system tests, one binary: each file a module (the real agents end to end and their
//! snapshots, the crate seams, file circles, the docs' links and citations). Seven suites are
//! binaries of their own: `agent_time` compares verdicts at two clock speeds, one run at a time,
//! and the `reliability_*` suites kill, bomb and race the binaries in loops; beside other tests
//! their load would reach those tests and others' load would reach them.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod afterburn;
mod agent_snapshots;
mod cloud_init;
mod cloud_init_25;
mod cloud_init_26;
mod cloud_init_boot;
mod crate_seams;
mod doc_links;
mod file_circles;
mod libazureinit;
mod protocol_citations;
mod test_binaries;
mod walinuxagent;
mod walinuxagent_2_16;
mod workspace_members;
