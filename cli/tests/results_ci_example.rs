//! examples/ci: the shell script a reporter project copies, run for real
//! against the bundled reporter with the binaries of this build (the test
//! command builds every binary first), so the example cannot rot; and the
//! GitHub workflow kept consistent with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use wirecheck_results::json;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn script() -> PathBuf {
    repo().join("examples/ci/run-wirecheck.sh")
}

/// `target/<profile>/wirecheck`, with the bundled reporter next to it.
fn wirecheck() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_wirecheck"));
    let reporter = bin.with_file_name("provision-report");
    assert!(
        reporter.is_file(),
        "{} is missing: build every binary first (`cargo build --workspace --bins`, as scripts/test-all.sh does)",
        reporter.display()
    );
    bin
}

/// Runs the script with exactly `vars` (plus PATH/HOME) from `cwd`.
fn run_script(cwd: &Path, vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new("bash");
    command.arg(script()).current_dir(cwd).env_clear();
    for name in ["PATH", "HOME", "CARGO_HOME", "RUSTUP_HOME"] {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(vars.iter().copied());
    command.output().expect("run bash")
}

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The three result files exist and agree with each other and with the exit status.
fn check_results(out: &Path, output: &Output, agent: &str) -> usize {
    let results =
        json::read(out.join("results.json")).unwrap_or_else(|e| panic!("{e}\n{}", text(output)));
    assert_eq!(results.agents.len(), 1, "{}", text(output));
    assert_eq!(results.agents[0].agent, agent);
    let cases = results.counts().total();
    assert!(cases > 0, "no cases ran\n{}", text(output));
    assert_eq!(
        output.status.code(),
        Some(results.exit_code(false)),
        "the script's exit status is wirecheck's\n{}",
        text(output)
    );
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let report = quick_junit::Report::deserialize_from_str(&junit).expect("junit.xml parses");
    assert_eq!(report.tests, cases);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    // A row per case; a timeline per scenario that ran, and its own for each case whose
    // timeline is not its scenario's first (a verdict taken from another attempt of a re-run
    // pair).
    assert_eq!(html.matches("<tr class=\"case v-").count(), cases);
    let mut firsts: Vec<(&str, &wirecheck_results::Timeline)> = Vec::new();
    let mut timelines = 0;
    for c in &results.agents[0].cases {
        match firsts.iter().find(|(s, _)| *s == c.scenario) {
            None => {
                firsts.push((c.scenario.as_str(), &c.timeline));
                timelines += usize::from(c.timeline.deadline_ms > 0 || !c.timeline.runs.is_empty());
            }
            Some((_, first)) => timelines += usize::from(c.timeline != **first),
        }
    }
    assert_eq!(html.matches("<svg class=\"timeline\"").count(), timelines);
    cases
}

#[test]
fn script_runs_the_bundled_reporter_and_leaves_the_results() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("wirecheck-results");
    let summary = work.path().join("summary.md");
    let output = run_script(
        work.path(),
        &[
            ("WIRECHECK_BIN", wirecheck().to_str().unwrap()),
            ("WIRECHECK_SRC", repo().to_str().unwrap()),
            ("WIRECHECK_AGENT", "provision-report"),
            ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
        ],
    );
    // Default output folder, relative to where the script runs.
    let cases = check_results(&out, &output, "provision-report");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("==> results in wirecheck-results/"),
        "{}",
        text(&output)
    );
    let summary = std::fs::read_to_string(&summary).unwrap();
    let failed = json::read(out.join("results.json")).unwrap().counts().fail;
    assert_eq!(
        summary,
        format!(
            "wirecheck: {cases} cases, {failed} failed, exit status {}; report.html is in the wirecheck-results artifact\n",
            output.status.code().unwrap()
        )
    );
}

#[test]
fn script_takes_an_agent_command_and_extra_flags() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let reporter = wirecheck().with_file_name("provision-report");
    let command = format!(
        "{} {{action}} --wireserver={{wireserver_url}} --imds={{imds_url}} --kvp-pool={{kvp_pool}} --timeout={{budget}}",
        reporter.display()
    );
    let output = run_script(
        work.path(),
        &[
            ("WIRECHECK_BIN", wirecheck().to_str().unwrap()),
            ("WIRECHECK_SRC", repo().to_str().unwrap()),
            ("WIRECHECK_AGENT_CMD", command.as_str()),
            ("WIRECHECK_OUT", out.to_str().unwrap()),
            // Not globbed by the shell: the pattern reaches wirecheck as written.
            (
                "WIRECHECK_ARGS",
                "--cases wire.health.json.ready.* --jobs 4",
            ),
        ],
    );
    check_results(&out, &output, "agent-cmd");
    let results = json::read(out.join("results.json")).unwrap();
    assert!(
        results.agents[0]
            .cases
            .iter()
            .all(|c| c.id.starts_with("wire.health.json.ready.")),
        "--cases was not applied"
    );
}

#[test]
fn script_fetches_wirecheck_from_git() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("cache");
    let out = work.path().join("out");
    let url = format!("file://{}", repo().display());
    let output = run_script(
        work.path(),
        &[
            ("WIRECHECK_BIN", wirecheck().to_str().unwrap()),
            ("WIRECHECK_GIT", url.as_str()),
            ("WIRECHECK_ROOT", root.to_str().unwrap()),
            ("WIRECHECK_AGENT", "provision-report"),
            ("WIRECHECK_OUT", out.to_str().unwrap()),
            ("WIRECHECK_ARGS", "--cases wire.health.xml.ready.*"),
        ],
    );
    assert!(root.join("src/scenarios").is_dir(), "{}", text(&output));
    assert!(
        root.join("src/conformance/agents/provision-report.toml")
            .is_file()
    );
    check_results(&out, &output, "provision-report");
}

#[test]
fn setup_problems_exit_3_and_say_what_to_set() {
    let work = tempfile::tempdir().unwrap();
    let bin = wirecheck();
    let repo = repo();
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[
                ("WIRECHECK_BIN", bin.to_str().unwrap()),
                ("WIRECHECK_SRC", repo.to_str().unwrap()),
            ],
            "set WIRECHECK_AGENT_CMD (a command template) or WIRECHECK_AGENT (a profile)",
        ),
        (
            &[("WIRECHECK_AGENT", "provision-report")],
            "set WIRECHECK_GIT to the wirecheck repository URL",
        ),
        (
            &[
                ("WIRECHECK_BIN", "/nonexistent/wirecheck"),
                ("WIRECHECK_SRC", repo.to_str().unwrap()),
                ("WIRECHECK_AGENT", "provision-report"),
            ],
            "WIRECHECK_BIN=/nonexistent/wirecheck is not an executable file",
        ),
        (
            &[
                ("WIRECHECK_SRC", "/tmp"),
                ("WIRECHECK_AGENT", "provision-report"),
            ],
            "/tmp is not a wirecheck checkout",
        ),
    ];
    for (vars, message) in cases {
        let output = run_script(work.path(), vars);
        assert_eq!(output.status.code(), Some(3), "{vars:?}\n{}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(message),
            "{vars:?}\n{}",
            text(&output)
        );
    }
}

#[test]
fn workflow_runs_the_script_and_uploads_its_results() {
    let workflow = std::fs::read_to_string(repo().join("examples/ci/wirecheck.yml")).unwrap();
    let script = std::fs::read_to_string(script()).unwrap();
    assert!(workflow.contains("run: bash ci/run-wirecheck.sh"));
    assert!(workflow.contains("WIRECHECK_OUT: wirecheck-results"));
    for file in ["junit.xml", "report.html", "results.json"] {
        assert!(
            workflow.contains(&format!("wirecheck-results/{file}")),
            "{file} not uploaded"
        );
    }
    assert!(
        workflow.contains("if: always()"),
        "results must be uploaded when cases fail"
    );
    // Every setting the workflow makes is one the script reads.
    for line in workflow.lines() {
        let Some((name, _)) = line.trim().split_once(':') else {
            continue;
        };
        if name.starts_with("WIRECHECK_") {
            assert!(
                script.contains(&format!("{name}:-")) || script.contains(&format!("${name}")),
                "{name} is set by the workflow but not read by the script"
            );
        }
    }
}

/// `WIRECHECK_SUDO=1` as a CI user that is not root: `wirecheck run` (and only it) goes through
/// sudo with the caller's PATH, and the results are given back to the caller afterwards. A
/// `sudo` on PATH stands in for the real one (it records its arguments and runs them as the
/// caller); as root the script runs as `nobody` so the non-root path is the one taken.
#[test]
fn script_runs_wirecheck_through_sudo_when_asked_and_not_root() {
    use std::os::unix::fs::PermissionsExt as _;
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let shims = work.path().join("shims");
    std::fs::create_dir(&shims).unwrap();
    let log = work.path().join("sudo.log");
    std::fs::write(
        shims.join("sudo"),
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(shims.join("sudo"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = work.path().join("out");
    let path = format!("{}:{}", shims.display(), std::env::var("PATH").unwrap());

    let mut command = if rustix::process::geteuid().is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
        c
    } else {
        Command::new("bash")
    };
    let output = command
        .arg(script())
        .current_dir(work.path())
        .env_clear()
        .env("PATH", &path)
        .env("HOME", work.path())
        .env("WIRECHECK_BIN", wirecheck())
        .env("WIRECHECK_SRC", repo())
        .env("WIRECHECK_AGENT", "provision-report")
        .env("WIRECHECK_OUT", &out)
        .env("WIRECHECK_ARGS", "--cases wire.health.json.ready.*")
        .env("WIRECHECK_SUDO", "1")
        .output()
        .unwrap();
    check_results(&out, &output, "provision-report");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 2, "{calls:?}\n{}", text(&output));
    assert!(
        calls[0].starts_with(&format!("env PATH={path} {} run ", wirecheck().display())),
        "{}",
        calls[0]
    );
    assert!(
        calls[1].starts_with("chown -R ") && calls[1].ends_with(&out.display().to_string()),
        "{}",
        calls[1]
    );
}
