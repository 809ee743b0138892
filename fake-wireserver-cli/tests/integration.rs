//! The fake binary's integration tests, one binary: each file a module (the admin API's security,
//! the sandbox); `common` is the fake's test support, shared. `binary` is a binary of its own:
//! it raises this process's descriptor limit and holds over a thousand connections, load that
//! would reach the tests beside it.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

#[path = "../../fake-wireserver/tests/common/mod.rs"]
mod common;

mod admin_security;
mod guest;
mod sandbox;
