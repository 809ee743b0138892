//! The reporter's integration tests, one binary: each file a module (bad input, end to end,
//! hostile servers, pool faults, properties, snapshots, vectors); `support` is what they share.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod support;

mod bad_input;
mod e2e;
mod hostile_server;
mod pool_faults;
mod properties;
mod snapshots;
mod vectors;
