//! The composite GitHub Action (`action.yml`), its steps (`scripts/action.sh`) and the matrix
//! example (`examples/github/wirecheck-matrix.yml`): the YAML parses and fits together (every
//! input the example passes exists, every input is used, every step's script mode exists), and
//! the steps run for real here: install (with this build's binaries), two partition runs, the
//! merge, the job summary and the step outputs.

mod runner_support;

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

    // The example: partition jobs using the action, then a merge job using it.
    let example = yaml(&repo().join("examples/github/wirecheck-matrix.yml"));
    let mut uses = 0;
    let mut commands = Vec::new();
    for (_, job) in example["jobs"].as_object().unwrap() {
        for step in job["steps"].as_array().unwrap() {
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
                commands.push(step["with"]["command"].as_str().unwrap_or("run").to_owned());
            }
        }
    }
    assert_eq!(uses, 2);
    assert_eq!(commands, ["run", "merge"]);
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
