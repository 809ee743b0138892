//! What the workspace's test suites share, written once: the built binaries ([`binaries`]),
//! raw HTTP exchanges, async or blocking ([`http`]), a loopback port nothing answers on
//! ([`net`]), `fake-wireserver sandbox` runs with what they leave in `--out` ([`sandbox`]), and
//! the processes a test started, found in `/proc` by a marker ([`procs`]), and a folder served
//! over loopback HTTP as a release location ([`files`]; the bench uses it too).
//!
//! It depends on no crate of the workspace (the reporter's tests use it too, and the oracle
//! rule forbids a path between them and the judge): journal lines are read into whatever type
//! the caller names.

pub mod binaries;
pub mod files;
pub mod http;
pub mod net;
pub mod procs;
pub mod sandbox;
