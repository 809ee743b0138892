//! The workspace's binaries, as `cargo build --workspace --bins` left them next to the test
//! executable (the README's test command, scripts/test-all.sh, builds them first).

use std::path::PathBuf;

/// `target/<profile>/`: the folder holding the binaries this test executable was built with
/// (the test executable itself lives in its `deps/` subfolder).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    let deps = exe.parent().expect("deps folder");
    deps.parent().expect("profile folder").to_path_buf()
}

/// The workspace binary `name`; a missing one fails the test, saying how to build it.
pub fn workspace_binary(name: &str) -> PathBuf {
    let path = profile_dir().join(name);
    assert!(
        path.is_file(),
        "{} not found: build the workspace binaries first (`cargo build --workspace --bins`, \
         as scripts/test-all.sh does)",
        path.display()
    );
    path
}
