//! The reporter's integration tests, one binary: each file a module (bad input, end to end,
//! hostile servers, pool faults, properties, snapshots, vectors); `support` is what they share.

mod support;

mod bad_input;
mod e2e;
mod hostile_server;
mod pool_faults;
mod properties;
mod snapshots;
mod vectors;
