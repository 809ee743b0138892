//! The workspace's member crates, as the root `Cargo.toml` lists them: the crates the source
//! checks (`file_circles.rs`, `test_binaries.rs`) walk.

use std::path::PathBuf;

use wirecheck_e2e::repo_root;

/// Each member's folder and its path as `Cargo.toml` spells it (`conformance/agents/...`).
pub fn workspace_members() -> Vec<(String, PathBuf)> {
    let root = repo_root();
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let name = m.as_str().unwrap().to_owned();
            let dir = root.join(&name);
            (name, dir)
        })
        .collect()
}
