//! What the fake's integration tests share beyond the workspace's test support: its folders and
//! requests. The raw exchange (exact bytes out, how the connection ended) is
//! `wirecheck_test_support::http`, named here so each suite says `common::exchange`.
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub use wirecheck_test_support::http::{
    Outcome, Response, exchange, exchange_blocking, get, post, read_outcome, request, response,
};

/// `testdata/vectors` of the workspace.
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors")
}

/// `scenarios/examples` of the workspace.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/examples")
}

/// A goal state GET as cloud-init sends it.
pub fn goalstate_get() -> Vec<u8> {
    get(
        "/machine/?comp=goalstate",
        "168.63.129.16",
        &[
            ("x-ms-agent-name", "WALinuxAgent"),
            ("x-ms-version", "2012-11-30"),
        ],
    )
}

/// The start of a long text, for assertion messages.
pub fn clip(text: &str) -> String {
    text.chars().take(2000).collect()
}
