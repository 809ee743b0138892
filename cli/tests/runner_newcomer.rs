//! The command line a newcomer meets, each item seen in a trial run: an agent that cannot
//! start, the `--agent-cmd` example of the README's quick start and of docs/profiles.md,
//! `--claims`, repeatable `--scenarios`, the built-in suite of an installed binary,
//! `wirecheck list | head`, `--print-config`.

use crate::runner_support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use runner_support::{provision_report, repo, results, stderr, stdout, wirecheck, write_files};

/// The `--agent-cmd` example a page shows (the first one written as `` `--agent-cmd '...'` ``),
/// word for word.
fn agent_cmd_example(page: &str) -> String {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let start = text
        .find("`--agent-cmd '")
        .unwrap_or_else(|| panic!("{page} shows no `--agent-cmd '...'` example"))
        + 14;
    let end = start + text[start..].find('\'').unwrap();
    text[start..end].to_owned()
}

/// The example newcomers copy: the README's quick start, which must be the one the profile
/// page explains (two copies that drift apart would leave one untested).
fn readme_agent_cmd() -> String {
    let readme = agent_cmd_example("README.md");
    let page = agent_cmd_example("docs/profiles.md");
    assert_eq!(
        readme, page,
        "README.md and docs/profiles.md show different --agent-cmd examples"
    );
    // The quick start's command line is the example too, not a third spelling.
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let line = format!("./target/release/wirecheck run --agent-cmd '{readme}'\n");
    assert!(
        text.contains(&line),
        "the README's quick start does not run {line}"
    );
    readme
}

#[test]
fn an_agent_that_never_starts_is_exit_2_naming_its_case_folder_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    // A relative path to a script that is not where wirecheck was started: python3 starts,
    // cannot open it, exits 2, in every scenario.
    let out = wirecheck(dir.path())
        .args([
            "run",
            "--quiet",
            "--cases",
            "wire.health.json.*",
            "--out",
            "out",
        ])
        .args([
            "--agent-cmd",
            "python3 missing_agent.py {action} --url {wireserver_url}",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("agent agent-cmd never got going"), "{err}");
    assert!(err.contains("in its case folder /"), "{err}");
    assert!(err.contains("wirecheck-case-"), "{err}");
    assert!(err.contains("missing_agent.py"), "{err}");
    assert!(err.contains("can't open file"), "the agent's stderr: {err}");
    assert!(err.contains("Give absolute paths"), "{err}");
    // One message, not one per case; the results are still written.
    assert_eq!(err.matches("never got going").count(), 1, "{err}");
    assert!(dir.path().join("out/results.json").is_file());

    // An agent that got going in one scenario (it ends well when asked for Ready) is judged
    // as usual: exit 1, not 2.
    std::fs::write(
        dir.path().join("half.sh"),
        "[ \"$1\" = ready ] && exit 0\necho no >&2\nexit 3\n",
    )
    .unwrap();
    let out = wirecheck(dir.path())
        .args([
            "run",
            "--quiet",
            "--cases",
            "wire.health.json.*",
            "--out",
            "out2",
        ])
        .args(["--agent-cmd", "sh half.sh {action}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("never got going"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_readme_agent_cmd_example_works_as_written() {
    let cmd = readme_agent_cmd();
    assert!(cmd.starts_with("python3 my_agent.py "), "{cmd}");
    let dir = tempfile::tempdir().unwrap();
    // my_agent.py next to where wirecheck is started, as a newcomer writes it: it asks the
    // wireserver for its versions (so the fake sees it) and says it ran.
    std::fs::write(
        dir.path().join("my_agent.py"),
        "import sys, urllib.request\n\
         url = sys.argv[sys.argv.index('--url') + 1]\n\
         urllib.request.urlopen(url + '/?comp=versions', timeout=5).read()\n\
         print('my_agent ran:', sys.argv[1])\n",
    )
    .unwrap();
    let out = wirecheck(dir.path())
        .args([
            "run",
            "--quiet",
            "--cases",
            "wire.health.json.ready.*",
            "--out",
            "out",
        ])
        .args(["--agent-cmd", &cmd])
        .output()
        .unwrap();
    // It reports nothing, so cases fail (exit 1), but it ran: not exit 2.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let run = std::fs::read_to_string(
        dir.path()
            .join("out/artifacts/agent-cmd/wire.health.json.ready/run-1.stdout"),
    )
    .unwrap();
    assert_eq!(run.trim(), "my_agent ran: ready");
    let journal = std::fs::read_to_string(
        dir.path()
            .join("out/artifacts/agent-cmd/wire.health.json.ready/journal.jsonl"),
    )
    .unwrap();
    assert!(journal.contains("wireserver.versions"), "{journal}");
}

#[test]
fn claims_leave_out_what_the_ad_hoc_agent_does_not_do() {
    let dir = tempfile::tempdir().unwrap();
    let run = |claims: &[&str], out: &str| {
        wirecheck(dir.path())
            .args([
                "run",
                "--quiet",
                "--cases",
                "wire.health.json.*",
                "--out",
                out,
            ])
            .args(["--agent-cmd", "true"])
            .args(claims)
            .output()
            .unwrap()
    };
    let all = run(&[], "all");
    assert_eq!(all.status.code(), Some(1), "{}", stderr(&all));
    let some = run(&["--claims", "json,failure"], "some");
    assert_eq!(some.status.code(), Some(1), "{}", stderr(&some));
    let kvp_cases = |out: &str| -> Vec<(String, String, String)> {
        results(&dir.path().join(out))["agents"][0]["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["id"].as_str().unwrap().ends_with(".kvp.report"))
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_owned(),
                    c["verdict"].as_str().unwrap().to_owned(),
                    c["reason"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    let unclaimed = kvp_cases("some");
    assert!(!unclaimed.is_empty());
    assert!(
        unclaimed
            .iter()
            .any(|(_, _, r)| r.contains("does not claim \"kvp\"")),
        "{unclaimed:?}"
    );
    for (id, verdict, reason) in &unclaimed {
        assert_eq!(verdict, "skipped", "{id}: {reason}");
        assert!(reason.contains("does not claim"), "{id}: {reason}");
    }
    // Claiming everything (the default), the same cases are judged and fail.
    assert!(kvp_cases("all").iter().any(|(_, v, _)| v == "fail"));
    // --claims names what exists and needs --agent-cmd.
    let bad = run(&["--claims", "json,telepathy"], "bad");
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("telepathy"), "{}", stderr(&bad));
    let alone = wirecheck(dir.path())
        .args(["run", "--claims", "json"])
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(2));
    assert!(stderr(&alone).contains("--agent-cmd"), "{}", stderr(&alone));
}

fn list_count(out: &std::process::Output) -> usize {
    let text = stdout(out);
    let last = text.lines().last().unwrap_or_default();
    last.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"))
}

#[test]
fn scenarios_are_repeatable_and_builtin_names_the_built_in_suite() {
    let dir = tempfile::tempdir().unwrap();
    let mine = std::fs::read_to_string(repo().join("scenarios/wire-health-ready.toml"))
        .unwrap()
        .replace(
            "id = \"wire.health.{flow}.ready\"",
            "id = \"mine.{flow}.ready\"",
        );
    assert!(mine.contains("mine.{flow}.ready"));
    write_files(dir.path(), &[("mine/ready.toml", &mine)]);
    let builtin = wirecheck(dir.path())
        .args(["list", "--scenarios", "@builtin"])
        .output()
        .unwrap();
    assert_eq!(builtin.status.code(), Some(0), "{}", stderr(&builtin));
    let both = wirecheck(dir.path())
        .args(["list", "--scenarios", "@builtin", "--scenarios", "mine"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(0), "{}", stderr(&both));
    let only = wirecheck(dir.path())
        .args(["list", "--scenarios", "mine"])
        .output()
        .unwrap();
    assert_eq!(list_count(&both), list_count(&builtin) + list_count(&only));
    assert!(stdout(&both).contains("mine.json.ready.protocol.request"));
    assert!(stdout(&both).contains("wire.health.json.ready.protocol.request"));
    // The environment twin, comma-separated.
    let env = wirecheck(dir.path())
        .arg("list")
        .env("WIRECHECK_SCENARIOS", "@builtin,mine")
        .output()
        .unwrap();
    assert_eq!(stdout(&env), stdout(&both));
    // A scenario id in two folders is refused, naming both files.
    write_files(dir.path(), &[("again/ready.toml", &mine)]);
    let twice = wirecheck(dir.path())
        .args(["list", "--scenarios", "mine", "--scenarios", "again"])
        .output()
        .unwrap();
    assert_eq!(twice.status.code(), Some(2));
    let err = stderr(&twice);
    assert!(
        err.contains("again/ready.toml") && err.contains("mine/ready.toml"),
        "{err}"
    );
}

/// A folder holding only the three binaries, as `cargo install` leaves them.
fn installed(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let from = runner_support::wirecheck_path();
    for name in ["wirecheck", "provision-report", "fake-wireserver"] {
        let source = from.with_file_name(name);
        if std::fs::hard_link(&source, bin.join(name)).is_err() {
            std::fs::copy(&source, bin.join(name)).unwrap();
        }
    }
    bin.join("wirecheck")
}

#[test]
fn an_installed_wirecheck_works_with_nothing_beside_it() {
    provision_report();
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(dir.path());
    let work = dir.path().join("project");
    std::fs::create_dir_all(&work).unwrap();
    let bare = |args: &[&str]| {
        let cmd = wirecheck(&work);
        let mut real = std::process::Command::new(&exe);
        real.current_dir(&work).args(args);
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => real.env(k, v),
                None => real.env_remove(k),
            };
        }
        real.output().unwrap()
    };
    // The built-in suite is the checkout's.
    let listed = bare(&["list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let checkout = wirecheck(&repo())
        .args(["list", "--scenarios", "scenarios"])
        .output()
        .unwrap();
    assert_eq!(stdout(&listed), stdout(&checkout));
    // A run with the built-in profile of the bundled reporter, found next to it.
    let out = bare(&[
        "run",
        "--quiet",
        "--cases",
        "wire.health.json.ready.*",
        "--out",
        "out",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = results(&work.join("out"));
    assert_eq!(results["agents"][0]["agent"], "provision-report");
    assert!(!results["agents"][0]["cases"].as_array().unwrap().is_empty());
    let config = stdout(&bare(&["run", "--print-config"]));
    assert!(config.contains("scenarios = [\"(built in)\"]"), "{config}");
    assert!(config.contains("agents_dir = \"(built in)\""), "{config}");

    // Editable copies, byte for byte, then used through --scenarios / --agents-dir.
    let out = bare(&["scenarios", "export", "mine", "--agents", "mine-agents"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for entry in std::fs::read_dir(repo().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let copy = work.join("mine").join(path.file_name().unwrap());
            assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&path).unwrap());
        }
    }
    assert_eq!(
        std::fs::read(work.join("mine-agents/provision-report.toml")).unwrap(),
        std::fs::read(repo().join("conformance/agents/provision-report.toml")).unwrap()
    );
    let again = bare(&["scenarios", "export", "mine"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("exists already"),
        "{}",
        stderr(&again)
    );
    std::fs::remove_file(work.join("mine/wire-health-ready.toml")).unwrap();
    let fewer = bare(&["list", "--scenarios", "mine"]);
    assert!(list_count(&fewer) < list_count(&listed));
    let edited = std::fs::read_to_string(work.join("mine-agents/provision-report.toml"))
        .unwrap()
        .replace("description = ", "description = \"edited\"\n#");
    std::fs::write(work.join("mine-agents/provision-report.toml"), edited).unwrap();
    let config = stdout(&bare(&[
        "run",
        "--print-config",
        "--agents-dir",
        "mine-agents",
    ]));
    assert!(
        config.contains("mine-agents/provision-report.toml"),
        "{config}"
    );
}

#[test]
fn list_into_a_closed_pipe_exits_0_quietly() {
    let mut child = wirecheck(&repo())
        .arg("list")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader is gone before wirecheck writes a byte, as with `| head -0`.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn run_print_config_shows_what_would_run_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = wirecheck(dir.path())
        .args([
            "run",
            "--print-config",
            "--partition",
            "2/3",
            "--cases",
            "wire.*",
        ])
        .args([
            "--agent",
            "provision-report",
            "--agent-cmd",
            "nosuchprogram {action}",
        ])
        .args(["--claims", "json", "--out", "never"])
        .env("WIRECHECK_STRICT", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !dir.path().join("never").exists(),
        "nothing is run or written"
    );
    let text = stdout(&out);
    let value: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(value["strict"].as_bool(), Some(true));
    assert_eq!(value["partition"].as_str(), Some("2/3"));
    assert_eq!(value["cases"][0].as_str(), Some("wire.*"));
    let agents = value["agent"].as_array().unwrap();
    assert_eq!(agents[0]["name"].as_str(), Some("provision-report"));
    let program = agents[0]["programs"]["ready"].as_str().unwrap();
    assert!(program.ends_with("/provision-report"), "{program}");
    assert_eq!(agents[1]["capabilities"].as_array().unwrap().len(), 1);
    assert!(
        agents[1]["programs"]["ready"]
            .as_str()
            .unwrap()
            .starts_with("not found"),
        "{text}"
    );
    assert!(value["plan"]["cases"].as_integer().unwrap() > 0);
}

/// `wirecheck run` of the bundled reporter's `wire.health.<flow>.ready` cases into `out`.
fn run_ready(cwd: &Path, flow: &str, out: &Path) -> std::process::Output {
    provision_report();
    wirecheck(cwd)
        .args(["run", "--quiet", "--cases"])
        .arg(format!("wire.health.{flow}.ready.*"))
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// The finding: `--out FILE` said "cannot start the runtime: File exists", naming neither the
/// path nor what is expected.
#[test]
fn out_that_is_a_file_names_the_path_and_what_is_expected() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("results.txt");
    std::fs::write(&file, "mine").unwrap();
    let o = run_ready(dir.path(), "json", &file);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "--out: cannot use {} as the results folder: it is a regular file, not a folder",
            file.display()
        )) && err.contains("give a new path"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}

/// The finding: a reused `--out` kept the previous run's artifacts (of cases this run did not
/// have) beside this run's results. The folder now holds this run's results only; a file of
/// the user's in it is left alone, and so is a folder that is not wirecheck's (refused).
#[test]
fn a_reused_out_reflects_only_this_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let json_case = out.join("artifacts/provision-report/wire.health.json.ready");
    let xml_case = out.join("artifacts/provision-report/wire.health.xml.ready");
    let o = run_ready(dir.path(), "json", &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(json_case.is_dir());
    std::fs::write(out.join("notes.txt"), "mine").unwrap();

    let o = run_ready(dir.path(), "xml", &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        xml_case.is_dir() && !json_case.exists(),
        "stale artifacts kept"
    );
    let r = results(&out);
    for case in r["agents"][0]["cases"].as_array().unwrap() {
        assert!(case["id"].as_str().unwrap().starts_with("wire.health.xml"));
    }
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );

    // A run killed before its results were written left artifacts only: still wirecheck's.
    std::fs::remove_file(out.join("results.json")).unwrap();
    let o = run_ready(dir.path(), "json", &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(json_case.is_dir() && !xml_case.exists());

    // Someone else's folder: refused, nothing in it deleted or added.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(theirs.join("artifacts")).unwrap();
    std::fs::write(theirs.join("artifacts/build.log"), "theirs").unwrap();
    let o = run_ready(dir.path(), "json", &theirs);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds \"artifacts\" but no results of an earlier wirecheck run"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("artifacts/build.log")).unwrap(),
        "theirs"
    );
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 1);
}

/// The finding: an agent whose program is there but not executable was reported "not found".
#[test]
fn a_non_executable_agent_is_reported_not_executable_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let o = wirecheck(dir.path())
        .args(["run", "--quiet", "--cases", "wire.health.json.ready.*"])
        .args(["--out", "out", "--agent-cmd", "./agent.sh {action}"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "program \"{0}\" cannot be run: {0} is not executable",
            script.display()
        )) && !err.contains("not found"),
        "{err}"
    );
    assert!(!dir.path().join("out/results.json").exists());
}

/// The finding: `{data}` in `--agent-cmd` was undocumented, and `--data {data}` left a dangling
/// `--data` where a scenario gives no data (the agent exited 2 on its arguments). The optional
/// group of profiles works on the command line: `[--data {data}]`, as `run --help` says.
#[test]
fn agent_cmd_data_in_a_group_leaves_no_dangling_flag() {
    provision_report();
    let help = stdout(&wirecheck(&repo()).args(["run", "--help"]).output().unwrap());
    assert!(help.contains("`[--data {data}]` gives `--data"), "{help}");
    let dir = tempfile::tempdir().unwrap();
    let o = wirecheck(dir.path())
        .args(["run", "--quiet", "--cases", "report.*", "--out", "out"])
        .args([
            "--agent-cmd",
            "provision-report --wireserver {wireserver_url} --imds {imds_url} \
             --kvp-pool {kvp_pool} [--vm-id {vm_id}] --protocol {protocol} {action} \
             [--reason {reason}] [--data {data}] [--description {description}]",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let r = results(&dir.path().join("out"));
    // Scenarios with data and without: every invocation got arguments it could read.
    let mut with_data = 0;
    for c in r["agents"][0]["cases"].as_array().unwrap() {
        for run in c["timeline"]["runs"].as_array().into_iter().flatten() {
            assert_eq!(run["exit_code"], 0, "{c}");
        }
        with_data += usize::from(c["id"] == "report.description.long.report.description");
    }
    assert_eq!(with_data, 1);
    let command = std::fs::read_to_string(
        dir.path()
            .join("out/artifacts/agent-cmd/report.description.long/run-1.command"),
    )
    .unwrap();
    assert!(command.contains("--data device=/dev/sdb"), "{command}");
}

/// The finding, as a run shows it: an agent that exited 2 on its arguments (`--data {data}`:
/// a dangling `--data` where a scenario gives no data, a second item taken for an argument
/// where it gives two) before sending anything, in some scenarios. The summary leads with that,
/// not with the checks it failed.
#[test]
fn a_failed_run_leads_with_the_agents_exit_before_any_request() {
    provision_report();
    let dir = tempfile::tempdir().unwrap();
    let o = wirecheck(dir.path())
        .args(["run", "--quiet", "--out", "out"])
        .args(["--cases", "report.description.*"])
        .args([
            "--agent-cmd",
            "provision-report --wireserver {wireserver_url} --imds {imds_url} \
             --kvp-pool {kvp_pool} --protocol {protocol} {action} [--reason {reason}] --data {data}",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    let groups: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        groups[0].contains(
            "every check (1 agent): the agent exited 2 before any request reached the fake; its stderr: error: unexpected argument"
        ),
        "{out}"
    );
    assert_eq!(
        groups.iter().filter(|g| g.contains("exited 2")).count(),
        1,
        "{out}"
    );
}
