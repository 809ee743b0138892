//! The release files (`scripts/release.sh`): the archive for this machine, unpacked into an empty
//! folder, runs the whole default suite from another empty folder (embedded scenarios, the
//! bundled reporter beside it, nothing of the checkout) and passes; the checksum files verify;
//! the .deb holds the same build; `cargo binstall`'s metadata points at the archive; every
//! binary names its exact build (version and commit), and so does results.json; the one-line
//! install docs/ci.md leads with works (against a loopback server).
//!
//! The files are made from the test command's own debug build (`release.sh --bin-dir`); a
//! release build itself is the release workflow's (.github/workflows/release.yml).

use crate::release_support;

use std::path::Path;
use std::process::Command;

use conformance::build_info::{COMMIT, VERSION};
use release_support::{archive_stem, release_files, run_in, target};

fn deb_arch() -> &'static str {
    match target() {
        "x86_64-unknown-linux-gnu" => "amd64",
        _ => "arm64",
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The unpacked archive's `wirecheck` run in `cwd` with nothing of the checkout around it (a
/// bare PATH, no other variables); its output, and stdout and stderr as one text.
fn archive_wirecheck(folder: &Path, cwd: &Path, args: &[&str]) -> (std::process::Output, String) {
    let out = Command::new(folder.join("wirecheck"))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", cwd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, said)
}

/// The results.json a run in `cwd` wrote.
fn results_in(cwd: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(cwd.join("wirecheck-results/results.json")).unwrap(),
    )
    .unwrap()
}

#[test]
fn the_archive_runs_the_suite_from_an_empty_folder_and_the_checksums_verify() {
    let work = tempfile::tempdir().unwrap();
    let dist = release_files();
    let stem = archive_stem();
    let deb = format!("wirecheck_{VERSION}-1_{}.deb", deb_arch());
    let mut expected = vec![
        format!("{stem}.tar.gz"),
        format!("{stem}.tar.gz.sha256"),
        deb.clone(),
        format!("{deb}.sha256"),
    ];
    expected.sort();
    assert_eq!(files_in(dist), expected);

    // `sha256sum -c` accepts each checksum file, and each names its file.
    for sum in [format!("{stem}.tar.gz.sha256"), format!("{deb}.sha256")] {
        let (ok, text) = run_in(dist, "sha256sum", &["-c", &sum]);
        assert!(ok, "sha256sum -c {sum}: {text}");
        let named = sum.trim_end_matches(".sha256");
        assert_eq!(text.trim(), format!("{named}: OK"));
    }

    // Unpacked into an empty folder: one folder, the three binaries, the licence, the README.
    let unpacked = work.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let archive = dist.join(format!("{stem}.tar.gz"));
    let (ok, text) = run_in(&unpacked, "tar", &["-xzf", archive.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert_eq!(files_in(&unpacked), std::slice::from_ref(&stem));
    let folder = unpacked.join(&stem);
    assert_eq!(
        files_in(&folder),
        [
            "LICENSE",
            "README.md",
            "fake-wireserver",
            "libwirecheck_agent_clock.so",
            "provision-report",
            "wirecheck"
        ]
    );
    let license = std::fs::read_to_string(folder.join("LICENSE")).unwrap();
    assert!(license.starts_with("MIT License"), "{license}");
    let readme = std::fs::read_to_string(folder.join("README.md")).unwrap();
    assert!(
        readme.starts_with(&format!("# wirecheck {VERSION} ({})", target())),
        "{readme}"
    );
    assert!(readme.contains(&format!("commit {COMMIT}")), "{readme}");

    // From another empty folder, with nothing of the checkout on PATH: the embedded suite
    // against the bundled reporter found beside wirecheck. It passes.
    let elsewhere = work.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let (out, said) = archive_wirecheck(&folder, &elsewhere, &["run", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let results = results_in(&elsewhere);
    assert_eq!(results["agents"][0]["agent"], "provision-report");
    let cases = results["agents"][0]["cases"].as_array().unwrap();
    assert!(
        cases.len() > 100,
        "the whole default suite: {}",
        cases.len()
    );
    assert!(cases.iter().all(|c| c["verdict"] != "fail"), "{said}");
    assert_eq!(results["wirecheck_version"], VERSION);
    assert_eq!(results["wirecheck_commit"], COMMIT);
}

/// The binaries' own `--version`, each `<name> <version> (commit <hash>)`, the hash this test's
/// build names (the commit checked out, when the checkout is a git repository).
#[test]
fn every_binary_names_its_build_and_the_deb_holds_the_same_build() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if let Ok(out) = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&repo)
        .output()
        && out.status.success()
    {
        let head = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(
            COMMIT, head,
            "the build names another commit than the checkout's HEAD (built before a commit? \
             `cargo build --workspace --bins` again)"
        );
    }
    let work = tempfile::tempdir().unwrap();
    let dist = release_files();
    let deb = dist.join(format!("wirecheck_{VERSION}-1_{}.deb", deb_arch()));
    let field = |name: &str| {
        let (ok, text) = run_in(
            work.path(),
            "dpkg-deb",
            &["-f", deb.to_str().unwrap(), name],
        );
        assert!(ok, "{text}");
        text.trim().to_owned()
    };
    assert_eq!(field("Package"), "wirecheck");
    assert_eq!(field("Version"), format!("{VERSION}-1"));
    assert_eq!(field("Architecture"), deb_arch());
    assert!(
        field("Depends").starts_with("libc6 (>= 2."),
        "{}",
        field("Depends")
    );
    let (ok, listing) = run_in(work.path(), "dpkg-deb", &["-c", deb.to_str().unwrap()]);
    assert!(ok, "{listing}");
    assert!(
        listing.lines().all(|l| l.contains(" root/root ")),
        "{listing}"
    );

    let root = work.path().join("deb");
    let (ok, text) = run_in(
        work.path(),
        "dpkg-deb",
        &["-x", deb.to_str().unwrap(), root.to_str().unwrap()],
    );
    assert!(ok, "{text}");
    assert!(root.join("usr/share/doc/wirecheck/copyright").is_file());
    // Where `fake_wireserver::clock::agent_clock_library` looks when wirecheck is in /usr/bin.
    assert!(
        root.join("usr/lib/wirecheck/libwirecheck_agent_clock.so")
            .is_file()
    );
    for name in ["wirecheck", "fake-wireserver", "provision-report"] {
        let (ok, said) = run_in(
            work.path(),
            root.join("usr/bin").join(name).to_str().unwrap(),
            &["--version"],
        );
        assert!(ok, "{said}");
        assert_eq!(said.trim(), format!("{name} {VERSION} (commit {COMMIT})"));
    }
}

/// `cargo binstall` reads `[package.metadata.binstall]` of each binary's crate: its URL must end
/// in the archive's name and its bin-dir name a binary inside it.
#[test]
fn binstall_metadata_points_at_the_archive() {
    let work = tempfile::tempdir().unwrap();
    let dist = release_files();
    let unpacked = work.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let archive = dist.join(format!("{}.tar.gz", archive_stem()));
    let (ok, text) = run_in(&unpacked, "tar", &["-xzf", archive.to_str().unwrap()]);
    assert!(ok, "{text}");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workspace: toml::Table =
        toml::from_str(&std::fs::read_to_string(repo.join("Cargo.toml")).unwrap()).unwrap();
    let repository = workspace["workspace"]["package"]["repository"]
        .as_str()
        .unwrap();
    for (krate, bin) in [
        ("cli", "wirecheck"),
        ("fake-wireserver-cli", "fake-wireserver"),
        ("reporter", "provision-report"),
    ] {
        let manifest: toml::Table =
            toml::from_str(&std::fs::read_to_string(repo.join(krate).join("Cargo.toml")).unwrap())
                .unwrap();
        let meta = &manifest["package"]["metadata"]["binstall"];
        let fill = |template: &str| {
            template
                .replace("{ repo }", repository)
                .replace("{ version }", VERSION)
                .replace("{ target }", target())
                .replace("{ bin }", bin)
                .replace("{ binary-ext }", "")
        };
        let url = fill(meta["pkg-url"].as_str().unwrap());
        assert_eq!(
            url,
            format!(
                "{repository}/releases/download/v{VERSION}/{}.tar.gz",
                archive_stem()
            ),
            "{krate}"
        );
        assert_eq!(meta["pkg-fmt"].as_str(), Some("tgz"), "{krate}");
        let bin_dir = fill(meta["bin-dir"].as_str().unwrap());
        assert!(
            unpacked.join(&bin_dir).is_file(),
            "{krate}: bin-dir {bin_dir} is not in the archive"
        );
    }
}

/// docs/ci.md leads with the one-line install for any CI: that very line, pointed at a
/// loopback server holding the release files instead of the GitHub release, downloads the
/// archive and its checksum, checks it and unpacks a wirecheck that names this build.
#[test]
fn the_documented_one_line_install_works() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(repo.join("docs/ci.md")).unwrap();
    let first = doc
        .split("\n\n")
        .find(|p| p.starts_with("**"))
        .unwrap_or_default();
    assert!(first.starts_with("**Install in one line.**"), "{first}");
    assert!(
        doc.contains(&format!("- uses: OWNER/wirecheck@v{VERSION}\n")),
        "docs/ci.md: the action line pins another version than {VERSION}"
    );
    let line = doc
        .lines()
        .find(|l| l.starts_with("curl "))
        .expect("docs/ci.md has a curl line");
    let published = format!("https://github.com/OWNER/wirecheck/releases/download/v{VERSION}");
    assert!(line.contains(&published), "{line}");
    let server = wirecheck_test_support::files::FileServer::serve(release_files()).unwrap();
    let line = line
        .replace(&published, &server.base)
        .replace("x86_64-unknown-linux-gnu", target());

    let work = tempfile::tempdir().unwrap();
    let (ok, said) = run_in(work.path(), "bash", &["-c", &line]);
    assert!(ok, "{line}\n{said}");
    assert!(
        said.contains(&format!("{}.tar.gz: OK", archive_stem())),
        "{said}"
    );
    let (ok, said) = run_in(
        work.path(),
        work.path()
            .join(archive_stem())
            .join("wirecheck")
            .to_str()
            .unwrap(),
        &["--version"],
    );
    assert!(ok, "{said}");
    assert_eq!(
        said.trim(),
        format!("wirecheck {VERSION} (commit {COMMIT})")
    );
}

/// A YAML file as JSON (Debian's python3-yaml, which cloud-init brings).
fn yaml(path: &Path) -> serde_json::Value {
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(path)
        .output()
        .expect("run /usr/bin/python3");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The release workflow cannot run here; what can be checked is that it fits the script: on a
/// tag it runs scripts/release.sh for its default targets (both) with both Rust targets
/// installed, runs each archive on a runner of its architecture, and attaches every file.
#[test]
fn the_release_workflow_builds_both_targets_on_a_tag_and_attaches_the_files() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = std::fs::read_to_string(repo.join("scripts/release.sh")).unwrap();
    let both = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"];
    assert!(
        script.contains(&format!("targets=({} {})", both[0], both[1])),
        "release.sh's default targets"
    );
    let workflow = yaml(&repo.join(".github/workflows/release.yml"));
    // PyYAML reads the key `on` as true.
    assert_eq!(workflow["true"]["push"]["tags"], serde_json::json!(["v*"]));
    let jobs = &workflow["jobs"];
    let steps = |job: &str| jobs[job]["steps"].as_array().unwrap().clone();
    let build = steps("build");
    let runs: Vec<&str> = build.iter().filter_map(|s| s["run"].as_str()).collect();
    assert!(runs.contains(&"bash scripts/release.sh dist"), "{runs:?}");
    let toolchain = build
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.contains("rust-toolchain"))
        })
        .unwrap();
    assert_eq!(toolchain["with"]["targets"], both.join(","));
    let smoked: Vec<&str> = jobs["smoke"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["target"].as_str().unwrap())
        .collect();
    assert_eq!(smoked, both);
    assert_eq!(jobs["smoke"]["needs"], "build");
    assert_eq!(jobs["publish"]["needs"], "smoke");
    assert_eq!(jobs["publish"]["permissions"]["contents"], "write");
    let publish = steps("publish");
    assert!(
        publish
            .iter()
            .filter_map(|s| s["run"].as_str())
            .any(|r| r.contains("gh release upload \"$GITHUB_REF_NAME\" dist/*")),
        "{publish:?}"
    );
}

/// Issue 25's leftover: agent time from a release archive. A reporter whose profile says its
/// clock can be scaled, run at x10 by the unpacked archive's wirecheck with nothing of the
/// checkout around it: the preload is found beside wirecheck (before, the archive had none and
/// the run stopped with "agent time needs libwirecheck_agent_clock.so").
#[test]
fn agent_time_runs_from_the_unpacked_archive() {
    let work = tempfile::tempdir().unwrap();
    let stem = archive_stem();
    let archive = release_files().join(format!("{stem}.tar.gz"));
    let (ok, text) = run_in(work.path(), "tar", &["-xzf", archive.to_str().unwrap()]);
    assert!(ok, "{text}");
    let folder = work.path().join(&stem);
    let agents = work.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let profile = std::fs::read_to_string(repo.join("conformance/agents/provision-report.toml"))
        .unwrap()
        .replace("name = \"provision-report\"", "name = \"reporter-fast\"")
        .replace(
            "attach = \"url\"\n",
            "attach = \"url\"\nclock = \"scalable\"\n",
        );
    assert!(profile.contains("clock = \"scalable\""));
    std::fs::write(agents.join("reporter-fast.toml"), profile).unwrap();
    let agents_dir = agents.to_str().unwrap();
    let (out, said) = archive_wirecheck(
        &folder,
        work.path(),
        &[
            "run",
            "--quiet",
            "--agent",
            "reporter-fast",
            "--agents-dir",
            agents_dir,
            "--cases",
            "retry.status.503.behaviour.*",
            "--time-scale",
            "10",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{said}");
    let results = results_in(work.path());
    let cases = results["agents"][0]["cases"].as_array().unwrap();
    assert!(!cases.is_empty(), "{said}");
    assert!(
        cases.iter().all(|c| c["timeline"]["time_scale"] == 10),
        "a case ran at another speed than x10: {said}"
    );
}
