//! The release files of this build, as `scripts/release.sh --bin-dir` writes them from the
//! binaries the test command built (`cargo build --workspace --bins`): named and laid out as a
//! release, in seconds rather than a release build's minutes.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use conformance::build_info::VERSION;

/// This machine's release target.
pub fn target() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x86_64-unknown-linux-gnu",
        "aarch64" => "aarch64-unknown-linux-gnu",
        other => panic!("no release target for {other}"),
    }
}

/// `wirecheck-<version>-<target>`: the archive's name without `.tar.gz`, and its one folder.
pub fn archive_stem() -> String {
    format!("wirecheck-{VERSION}-{}", target())
}

/// The release files of the workspace binaries, written by scripts/release.sh once per test
/// executable (about 15 s: stripping and compressing) into
/// `target/<profile>/release-files/<executable>/`, emptied first. Read only: a test that
/// changes a file copies it first.
pub fn release_files() -> &'static Path {
    static DIST: OnceLock<PathBuf> = OnceLock::new();
    DIST.get_or_init(|| {
        let bins = wirecheck_test_support::binaries::profile_dir();
        for name in ["wirecheck", "fake-wireserver", "provision-report"] {
            wirecheck_test_support::binaries::workspace_binary(name);
        }
        let exe = std::env::current_exe().expect("current test executable");
        let out = bins
            .join("release-files")
            .join(exe.file_name().expect("executable name"));
        if out.exists() {
            std::fs::remove_dir_all(&out).expect("remove the last run's release files");
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let status = Command::new("bash")
            .arg(root.join("scripts/release.sh"))
            .arg("--bin-dir")
            .arg(&bins)
            .arg(&out)
            .status()
            .expect("run scripts/release.sh");
        assert!(status.success(), "scripts/release.sh --bin-dir: {status}");
        out
    })
}

/// `program` run in `dir`, its status, stdout and stderr as one text for assertion messages.
pub fn run_in(dir: &Path, program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}
