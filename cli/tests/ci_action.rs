//! The composite GitHub Action (`action.yml`), its steps (`scripts/action.sh`) and the matrix
//! example (`examples/github/wirecheck-matrix.yml`): the YAML parses and fits together (every
//! input the example passes exists, every input is used, every step's script mode exists), and
//! the steps run for real here: install (with this build's binaries), two partition runs, the
//! merge, the job summary and the step outputs; and install from release files
//! (`scripts/release.sh` of this build) in a folder or on a loopback server: checksum checked,
//! kept in the tool cache, a tampered archive refused, no matching release built from source.

use crate::release_support;
use crate::runner_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use runner_support::{provision_report, repo, wirecheck_path};

/// A YAML file as JSON, through the system Python's PyYAML (installed with cloud-init by
/// scripts/install-agents.sh).
fn yaml(path: &Path) -> serde_json::Value {
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(path)
        .output()
        .expect("run /usr/bin/python3");
    assert!(
        out.status.success(),
        "{} does not parse as YAML (PyYAML comes with cloud-init: scripts/install-agents.sh): {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `${{ inputs.NAME }}` references in a text.
fn input_refs(text: &str) -> BTreeSet<String> {
    text.match_indices("inputs.")
        .map(|(i, _)| {
            text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn the_action_and_the_example_fit_together() {
    let action_path = repo().join("action.yml");
    let action = yaml(&action_path);
    assert_eq!(action["runs"]["using"], "composite");
    let inputs: BTreeSet<String> = action["inputs"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    for needed in [
        "agent-cmd",
        "agent",
        "cases",
        "strict",
        "partition",
        "command",
        "parts",
    ] {
        assert!(inputs.contains(needed), "action.yml has no input {needed}");
    }
    // Every input is handed to the steps, and the steps use no input that does not exist.
    let steps_text = serde_json::to_string(&action["runs"]["steps"]).unwrap();
    let used = input_refs(&steps_text);
    assert_eq!(used, inputs, "inputs declared vs used by the steps");
    // Composite steps need a shell, and each runs a mode action.sh knows.
    let script = std::fs::read_to_string(repo().join("scripts/action.sh")).unwrap();
    for step in action["runs"]["steps"].as_array().unwrap() {
        assert_eq!(step["shell"], "bash", "{step}");
        let run = step["run"].as_str().unwrap();
        assert!(run.contains("scripts/action.sh"), "{run}");
    }
    for mode in ["install)", "run)", "merge)"] {
        assert!(script.contains(mode), "action.sh has no {mode}");
    }
    // The step that runs wirecheck is the one the outputs read.
    assert_eq!(
        action["outputs"]["exit-status"]["value"],
        "${{ steps.wirecheck.outputs.exit-status }}"
    );
    assert!(
        action["runs"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "wirecheck")
    );

    // The example: one install job, partition jobs using its binaries, then a merge job.
    let example = yaml(&repo().join("examples/github/wirecheck-matrix.yml"));
    let mut uses = 0;
    let mut commands = Vec::new();
    for (name, job) in example["jobs"].as_object().unwrap() {
        let mut downloaded_bins = false;
        for step in job["steps"].as_array().unwrap() {
            if step["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/download-artifact@"))
                && step["with"]["name"] == "wirecheck-bin"
            {
                assert_eq!(step["with"]["path"], "wirecheck-bin", "{name}");
                downloaded_bins = true;
            }
            if step["uses"]
                .as_str()
                .is_some_and(|u| u.ends_with("/wirecheck@REF"))
            {
                uses += 1;
                for key in step["with"].as_object().unwrap().keys() {
                    assert!(
                        inputs.contains(key),
                        "the example passes unknown input {key}"
                    );
                }
                let command = step["with"]["command"].as_str().unwrap_or("run");
                commands.push(command.to_owned());
                // Only the install job installs; the others use its binaries.
                if command != "install" {
                    assert!(
                        downloaded_bins,
                        "{name}: wirecheck-bin is not downloaded first"
                    );
                    assert_eq!(step["with"]["bin-dir"], "wirecheck-bin", "{name}");
                }
            }
        }
    }
    assert_eq!(uses, 3);
    assert_eq!(commands, ["install", "run", "merge"]);
    let install_job = &example["jobs"]["install"];
    let upload = &install_job["steps"][1];
    assert_eq!(upload["with"]["name"], "wirecheck-bin");
    assert_eq!(
        upload["with"]["path"],
        "${{ steps.wirecheck.outputs.bin-dir }}/"
    );
    assert_eq!(install_job["steps"][0]["id"], "wirecheck");
    assert_eq!(
        action["outputs"]["bin-dir"]["value"],
        "${{ steps.install.outputs.bin }}"
    );
    assert_eq!(example["jobs"]["wirecheck"]["needs"], "install");
    let wirecheck_job = &example["jobs"]["wirecheck"];
    assert_eq!(
        wirecheck_job["strategy"]["matrix"]["part"],
        serde_json::json!([1, 2, 3])
    );
    assert_eq!(example["jobs"]["merge"]["if"], "always()");
    let text =
        std::fs::read_to_string(repo().join("examples/github/wirecheck-matrix.yml")).unwrap();
    assert!(text.contains("partition: ${{ matrix.part }}/3"), "{text}");
}

struct Steps {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Steps {
    fn new() -> Steps {
        provision_report();
        Steps {
            dir: tempfile::tempdir().unwrap(),
            bin: wirecheck_path().parent().unwrap().to_path_buf(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `action.sh MODE` with exactly these variables (plus PATH/HOME) and GitHub's files.
    fn run(&self, mode: &str, vars: &[(&str, &str)]) -> Output {
        let mut command = Command::new("bash");
        command
            .arg(repo().join("scripts/action.sh"))
            .arg(mode)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", self.dir.path())
            .env("NO_COLOR", "1")
            .env("WIRECHECK_BIN_DIR", &self.bin)
            .env("GITHUB_OUTPUT", self.path("output"))
            .env("GITHUB_PATH", self.path("path"))
            .env("GITHUB_STEP_SUMMARY", self.path("summary.md"));
        command.envs(vars.iter().copied());
        command.output().unwrap()
    }

    fn outputs(&self) -> String {
        std::fs::read_to_string(self.path("output")).unwrap_or_default()
    }
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_action_steps_run_partitions_merge_them_and_write_the_summary() {
    let steps = Steps::new();
    let out = steps.run("install", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let path = std::fs::read_to_string(steps.path("path")).unwrap();
    assert_eq!(
        path.trim(),
        steps.bin.canonicalize().unwrap().display().to_string()
    );

    for k in 1..=2 {
        let partition = format!("{k}/2");
        let part = format!("part-{k}");
        let out = steps.run(
            "run",
            &[
                ("INPUT_AGENT", "provision-report"),
                ("INPUT_CASES", "wire.health.json.* wire.health.xml.ready.*"),
                ("INPUT_PARTITION", &partition),
                ("INPUT_RUN_ID", "99"),
                ("INPUT_OUT", &part),
                ("INPUT_SUMMARY", "false"),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(steps.path(&part).join("results.json").is_file());
    }
    assert!(
        !steps.path("summary.md").exists(),
        "summary: false writes none"
    );
    assert_eq!(
        steps.outputs(),
        format!(
            "bin={}\nexit-status=0\nresults=part-1\nexit-status=0\nresults=part-2\n",
            steps.bin.canonicalize().unwrap().display()
        )
    );

    let out = steps.run(
        "merge",
        &[("INPUT_PARTS", "part-*"), ("INPUT_OUT", "merged")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let merged = runner_support::results(&steps.path("merged"));
    let cases = merged["agents"][0]["cases"].as_array().unwrap();
    let partial = |k: usize| {
        runner_support::results(&steps.path(&format!("part-{k}")))["agents"][0]["cases"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(cases.len(), partial(1) + partial(2));
    let summary = std::fs::read_to_string(steps.path("summary.md")).unwrap();
    assert!(summary.starts_with("## wirecheck: ✅ passed"), "{summary}");
    assert!(steps.outputs().ends_with("exit-status=0\nresults=merged\n"));

    // A missing part: the merge says so, exit 2, and the output says 2.
    let out = steps.run(
        "merge",
        &[("INPUT_PARTS", "part-1"), ("INPUT_OUT", "merged-2")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("partition 2/2 of 2 is missing"),
        "{}",
        text(&out)
    );
    assert!(
        steps
            .outputs()
            .ends_with("exit-status=2\nresults=merged-2\n")
    );
}

#[test]
fn the_action_steps_fail_with_the_agent_and_say_what_is_missing() {
    let steps = Steps::new();
    // An agent that reports nothing: cases fail, the step fails with 1, the summary says why.
    let out = steps.run(
        "run",
        &[
            ("INPUT_AGENT_CMD", "true"),
            ("INPUT_CLAIMS", "json"),
            ("INPUT_CASES", "wire.health.json.ready.*"),
            ("INPUT_STRICT", "true"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        steps.outputs().contains("exit-status=1"),
        "{}",
        steps.outputs()
    );
    let summary = std::fs::read_to_string(steps.path("summary.md")).unwrap();
    assert!(
        summary.starts_with("## wirecheck: ❌ failed (--strict)"),
        "{summary}"
    );
    assert!(summary.contains("### Problems"), "{summary}");
    assert!(steps.path("wirecheck-results/report.html").is_file());
    // Globs in cases are wirecheck's, not the shell's: a file matching one changes nothing.
    std::fs::write(steps.path("wire.health.json.ready.x"), "").unwrap();
    let out = steps.run(
        "run",
        &[
            ("INPUT_AGENT_CMD", "true"),
            ("INPUT_CASES", "wire.health.json.ready.*"),
            ("INPUT_OUT", "again"),
            ("INPUT_SUMMARY", "false"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        runner_support::results(&steps.path("again"))["agents"][0]["cases"]
            .as_array()
            .unwrap()
            .len()
            > 1
    );

    // Setup problems are exit 3 with what to set.
    let out = steps.run("run", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("agent-cmd input"), "{}", text(&out));
    let out = steps.run("merge", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("parts input"), "{}", text(&out));
    let out = steps.run("run", &[("INPUT_AGENT", "x"), ("INPUT_STRICT", "maybe")]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("true or false"), "{}", text(&out));
    let out = steps.run("install", &[("WIRECHECK_BIN_DIR", "")]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("WIRECHECK_SRC"), "{}", text(&out));
}

/// Install from release files, as the action does by default: not the test's own binaries.
fn release_install(steps: &Steps, release: &str, extra: &[(&str, &str)]) -> Output {
    let cache = steps.path("tool-cache").display().to_string();
    let src = repo().display().to_string();
    let mut vars = vec![
        ("WIRECHECK_BIN_DIR", ""),
        ("WIRECHECK_SRC", src.as_str()),
        ("WIRECHECK_RELEASE_URL", release),
        ("RUNNER_TOOL_CACHE", cache.as_str()),
    ];
    vars.extend_from_slice(extra);
    steps.run("install", &vars)
}

/// Where install puts this machine's release: the tool cache's wirecheck/<version>/<arch>.
fn cached_bin(steps: &Steps) -> PathBuf {
    let arch = if std::env::consts::ARCH == "x86_64" {
        "x64"
    } else {
        "arm64"
    };
    steps
        .path("tool-cache")
        .join("wirecheck")
        .join(conformance::build_info::VERSION)
        .join(arch)
}

#[test]
fn the_install_step_installs_the_release_from_a_folder_or_a_loopback_server_and_judges_the_reporter()
 {
    let steps = Steps::new();
    let dist = release_support::release_files();
    let archive = format!("{}.tar.gz", release_support::archive_stem());

    // From a folder: verified, unpacked into the tool cache, on $GITHUB_PATH.
    let out = release_install(&steps, &dist.display().to_string(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("downloading {archive}")),
        "{}",
        text(&out)
    );
    let bin = cached_bin(&steps).canonicalize().unwrap();
    assert_eq!(
        std::fs::read_to_string(steps.path("path")).unwrap().trim(),
        bin.display().to_string()
    );
    assert!(
        steps
            .outputs()
            .contains(&format!("bin={}\n", bin.display()))
    );
    for name in ["wirecheck", "fake-wireserver", "provision-report"] {
        assert!(bin.join(name).is_file(), "{name} is not installed");
    }

    // The run step, finding wirecheck on PATH as the next steps do, judges the bundled reporter
    // (found beside the installed wirecheck).
    let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display());
    let out = steps.run(
        "run",
        &[
            ("WIRECHECK_BIN_DIR", ""),
            ("PATH", &path),
            ("INPUT_AGENT", "provision-report"),
            ("INPUT_CASES", "wire.health.*"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let results = runner_support::results(&steps.path("wirecheck-results"));
    assert_eq!(results["agents"][0]["agent"], "provision-report");
    assert_eq!(results["agents"][0]["cases"].as_array().unwrap().len(), 74);
    assert_eq!(results["wirecheck_commit"], conformance::build_info::COMMIT);

    // From a loopback server, into an empty tool cache.
    std::fs::remove_dir_all(steps.path("tool-cache")).unwrap();
    let server = wirecheck_test_support::files::FileServer::serve(dist).unwrap();
    let out = release_install(&steps, &server.base, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(cached_bin(&steps).join("wirecheck").is_file());
    assert_eq!(
        server.asked(),
        [
            format!("/release/{archive}.sha256"),
            format!("/release/{archive}")
        ]
    );
    // Again: the same archive is in the tool cache; only its checksum is fetched.
    let out = release_install(&steps, &server.base, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("from the tool cache"), "{}", text(&out));
    assert_eq!(server.asked().len(), 3);
}

#[test]
fn the_install_step_refuses_a_tampered_archive_and_a_bad_checksum_file() {
    let steps = Steps::new();
    let dist = release_support::release_files();
    let archive = format!("{}.tar.gz", release_support::archive_stem());

    // One byte of the archive changed: refused, naming the file and both hashes; nothing
    // installed.
    let tampered = steps.path("tampered");
    std::fs::create_dir(&tampered).unwrap();
    for name in [archive.clone(), format!("{archive}.sha256")] {
        std::fs::copy(dist.join(&name), tampered.join(&name)).unwrap();
    }
    let mut bytes = std::fs::read(tampered.join(&archive)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(tampered.join(&archive), &bytes).unwrap();
    let published = std::fs::read_to_string(dist.join(format!("{archive}.sha256"))).unwrap();
    let expected = published.split(' ').next().unwrap();
    let (ok, actual) = release_support::run_in(
        &tampered,
        "sha256sum",
        &[tampered.join(&archive).to_str().unwrap()],
    );
    assert!(ok);
    let actual = actual.split(' ').next().unwrap().to_owned();
    let out = release_install(&steps, &tampered.display().to_string(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(&format!("{archive}: checksum mismatch")),
        "{said}"
    );
    assert!(said.contains(expected) && said.contains(&actual), "{said}");
    assert!(!steps.path("tool-cache").join("wirecheck").exists());
    assert!(!steps.path("path").exists(), "nothing put on PATH");

    // A checksum file that is not sha256sum's line for this archive: refused too.
    std::fs::copy(dist.join(&archive), tampered.join(&archive)).unwrap();
    std::fs::write(
        tampered.join(format!("{archive}.sha256")),
        format!("{expected}  another-file.tar.gz\n"),
    )
    .unwrap();
    let out = release_install(&steps, &tampered.display().to_string(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{archive}.sha256 (from ")),
        "{}",
        text(&out)
    );
    assert!(!steps.path("tool-cache").join("wirecheck").exists());
}

/// A `cargo` that records its arguments and "builds" by copying this build's binaries into
/// `--root`/bin: the source build's commands without its minutes.
fn fake_cargo(steps: &Steps) -> String {
    let dir = steps.path("fake-cargo");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        "#!/bin/bash\necho \"$*\" >>{log}\nwhile [ $# -gt 0 ]; do [ \"$1\" = --root ] && root=$2; shift; done\n\
         mkdir -p \"$root/bin\" && cp {bins}/wirecheck {bins}/fake-wireserver {bins}/provision-report \"$root/bin/\"\n",
        log = steps.path("cargo.log").display(),
        bins = steps.bin.display(),
    );
    std::fs::write(dir.join("cargo"), script).unwrap();
    std::fs::set_permissions(
        dir.join("cargo"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", dir.display())
}

#[test]
fn the_install_step_builds_from_source_when_no_release_matches() {
    let steps = Steps::new();
    let dist = release_support::release_files();
    let path = fake_cargo(&steps);
    let src = repo().display().to_string();
    let cargo_log = || std::fs::read_to_string(steps.path("cargo.log")).unwrap_or_default();

    // A release location without this machine's files: built from the action's checkout.
    let empty = steps.path("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = release_install(&steps, &empty.display().to_string(), &[("PATH", &path)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("building from source"),
        "{}",
        text(&out)
    );
    assert!(
        cargo_log().contains("install --locked --quiet --force --root"),
        "{}",
        cargo_log()
    );
    assert!(cargo_log().contains(&format!("--path {src}/cli")));
    assert!(cargo_log().contains(&format!("--path {src}/fake-wireserver-cli")));

    // A branch ref with no release location given: source, saying how to install in seconds.
    std::fs::remove_file(steps.path("cargo.log")).unwrap();
    let out = steps.run(
        "install",
        &[
            ("WIRECHECK_BIN_DIR", ""),
            ("WIRECHECK_SRC", &src),
            ("WIRECHECK_ACTION_REF", "main"),
            ("PATH", &path),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "ref (main) is not a release tag (v{})",
            conformance::build_info::VERSION
        )),
        "{}",
        text(&out)
    );
    assert!(cargo_log().contains("--path"), "{}", cargo_log());

    // A commit ref takes the release only when the release was built from that commit.
    std::fs::remove_file(steps.path("cargo.log")).unwrap();
    let other = "0".repeat(40);
    let out = release_install(
        &steps,
        &dist.display().to_string(),
        &[("WIRECHECK_ACTION_REF", &other), ("PATH", &path)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("not the action's commit {other}")),
        "{}",
        text(&out)
    );
    assert!(cargo_log().contains("--path"), "{}", cargo_log());
    let commit = conformance::build_info::COMMIT;
    assert_eq!(commit.len(), 40, "built from a git checkout: {commit}");
    std::fs::remove_file(steps.path("cargo.log")).unwrap();
    let out = release_install(
        &steps,
        &dist.display().to_string(),
        &[("WIRECHECK_ACTION_REF", commit), ("PATH", &path)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        cargo_log(),
        "",
        "the release is the action's commit: no build"
    );
    assert!(cached_bin(&steps).join("wirecheck").is_file());
}
