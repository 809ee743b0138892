//! Regression snapshots as a user meets them: `wirecheck run --snapshots DIR`, then
//! `wirecheck snapshots pending|accept|reject|review DIR`.

mod runner_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use runner_support::{case, repo, results, script_agent, stderr, stdout, wirecheck};

fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        stdout(o),
        stderr(o)
    )
}

/// A small XML agent: reports Ready (or the failure it is asked for) with its report laid out
/// as LAYOUT says ("spaces" or "tabs"): both are valid, so every check passes either way.
const LAYOUT_AGENT: &str = r#"
import http.client, os, sys, urllib.parse
url = urllib.parse.urlparse(os.environ["WIRECHECK_CASE_WIRESERVER_URL"])
def call(method, path, body=None, headers=None):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    h = {"x-ms-agent-name": "layout-agent", "x-ms-version": "2012-11-30"}
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return data.decode()
gs = call("GET", "/machine/?comp=goalstate")
def tag(name):
    return gs.split("<%s>" % name)[1].split("</%s>" % name)[0]
incarnation, container, instance = tag("Incarnation"), tag("ContainerId"), tag("InstanceId")
pad = "\t" if os.environ.get("LAYOUT") == "tabs" else "  "
body = ("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Health xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\">\n"
        + pad + "<GoalStateIncarnation>%s</GoalStateIncarnation>\n" % incarnation
        + pad + "<Container>\n" + pad * 2 + "<ContainerId>%s</ContainerId>\n" % container
        + pad * 2 + "<RoleInstanceList>\n" + pad * 3 + "<Role>\n"
        + pad * 4 + "<InstanceId>%s</InstanceId>\n" % instance
        + pad * 4 + "<Health>\n" + pad * 5 + "<State>Ready</State>\n" + pad * 4 + "</Health>\n"
        + pad * 3 + "</Role>\n" + pad * 2 + "</RoleInstanceList>\n" + pad + "</Container>\n</Health>\n")
call("POST", "/machine?comp=health", body.encode(), {"Content-Type": "text/xml; charset=utf-8"})
# Tries to accept its own transcript: the snapshots folder must be out of its reach.
try:
    with open(os.path.join(os.environ["SNAPSHOTS"], "planted"), "w") as f:
        f.write("x")
    print("PLANTED")
except OSError:
    pass
"#;

/// An agent folder with the layout agent's profile (XML; the script reports Ready whatever
/// the action).
fn layout_agent(dir: &Path) -> PathBuf {
    script_agent(dir, "layout", "url", "\"xml\"", LAYOUT_AGENT)
}

fn run_layout(dir: &Path, agents: &Path, snaps: &Path, layout: &str, run: &str) -> Output {
    wirecheck(&repo())
        .args(["run", "--quiet", "--agent", "layout", "--agents-dir"])
        .arg(agents)
        .arg("--snapshots")
        .arg(snaps)
        .arg("--out")
        .arg(dir.join(run))
        .args(["--cases", "wire.health.xml.ready.*"])
        .env("LAYOUT", layout)
        .env("SNAPSHOTS", snaps)
        .output()
        .unwrap()
}

fn snapshots(args: &[&str], dir: &Path) -> Output {
    wirecheck(&repo())
        .arg("snapshots")
        .args(args)
        .arg(dir)
        .output()
        .unwrap()
}

const CASE: &str = "wire.health.xml.ready.snapshot.transcript";

#[test]
fn new_then_accept_then_match_then_a_change_shows_as_a_diff_until_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let snaps = dir.path().join("snaps");

    // 1. No snapshot yet: informational, written as pending; the run passes.
    let o = run_layout(dir.path(), &agents, &snaps, "spaces", "run1");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r = results(&dir.path().join("run1"));
    assert_eq!(case(&r, "layout", CASE)["verdict"], "informational");
    let pending = snaps.join("layout/wire.health.xml.ready.snap.new");
    let text = std::fs::read_to_string(&pending).unwrap();
    assert!(
        text.starts_with("---\nformat: 1\nagent: layout\nscenario: wire.health.xml.ready\n"),
        "{text}"
    );
    assert!(text.contains("2-space indentation"), "{text}");
    let o = snapshots(&["pending"], &snaps);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("layout/wire.health.xml.ready"),
        "{}",
        show(&o)
    );

    // 2. Accepted: nothing pending, the next run matches.
    let o = snapshots(&["accept"], &snaps);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!pending.exists());
    assert_eq!(snapshots(&["pending"], &snaps).status.code(), Some(0));
    let o = run_layout(dir.path(), &agents, &snaps, "spaces", "run2");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        case(&results(&dir.path().join("run2")), "layout", CASE)["verdict"],
        "pass"
    );

    // 3. The agent's encoder changes (tabs): every check still passes, the snapshot does not,
    // and the diff is on the terminal and in results.json.
    let o = run_layout(dir.path(), &agents, &snaps, "tabs", "run3");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = results(&dir.path().join("run3"));
    for c in r["agents"][0]["cases"].as_array().unwrap() {
        if c["id"] == CASE {
            assert_eq!(c["verdict"], "fail", "{c}");
        } else {
            assert_ne!(c["verdict"], "fail", "{c}");
        }
    }
    let out = stdout(&o);
    assert!(
        out.contains("-      body: health report (xml, declaration, LF, 2-space indentation)")
            && out.contains("+      body: health report (xml, declaration, LF, tab indentation)"),
        "{out}"
    );
    let evidence = case(&r, "layout", CASE)["evidence"][0]["excerpt"]
        .as_str()
        .unwrap();
    assert!(
        evidence.contains("+      body: health report (xml, declaration, LF, tab indentation)"),
        "{evidence}"
    );
    for report in ["junit.xml", "report.html"] {
        let written = std::fs::read_to_string(dir.path().join("run3").join(report)).unwrap();
        assert!(
            written.contains("tab indentation"),
            "{report} lacks the diff"
        );
    }

    // 4. Rejected: the accepted one stays, and the change still fails.
    assert_eq!(snapshots(&["reject"], &snaps).status.code(), Some(0));
    assert!(!pending.exists());
    let o = run_layout(dir.path(), &agents, &snaps, "tabs", "run4");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));

    // 5. Reviewed without a terminal: refused, nothing changed.
    let o = snapshots(&["review"], &snaps);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("terminal"), "{}", show(&o));
    assert!(pending.exists());

    // 6. Accepted by glob: the change is the new normal.
    let o = snapshots(&["accept", "--cases", "layout/wire.health.xml.*"], &snaps);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = run_layout(dir.path(), &agents, &snaps, "tabs", "run5");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        case(&results(&dir.path().join("run5")), "layout", CASE)["verdict"],
        "pass"
    );

    // The agent could not reach the snapshots folder at any point.
    for run in ["run1", "run2", "run3", "run4", "run5"] {
        let said = std::fs::read_to_string(
            dir.path()
                .join(run)
                .join("artifacts/layout/wire.health.xml.ready/run-1.stdout"),
        )
        .unwrap_or_default();
        assert!(
            !said.contains("PLANTED"),
            "{run}: the agent wrote into the snapshots folder"
        );
    }
    assert!(!snaps.join("planted").exists());
}

#[test]
fn strict_snapshots_fail_a_missing_one_and_unreferenced_ones_can_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let snaps = dir.path().join("snaps");
    let o = wirecheck(&repo())
        .args(["run", "--quiet", "--agent", "layout", "--agents-dir"])
        .arg(&agents)
        .arg("--snapshots")
        .arg(&snaps)
        .arg("--snapshots-strict")
        .arg("--out")
        .arg(dir.path().join("out"))
        .args(["--cases", "wire.health.xml.ready.*"])
        .env("SNAPSHOTS", &snaps)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    let c = case(&r, "layout", CASE);
    assert_eq!(c["verdict"], "fail");
    assert!(
        c["reason"].as_str().unwrap().contains("--snapshots-strict"),
        "{c}"
    );

    // A snapshot of a scenario that no longer exists.
    assert_eq!(snapshots(&["accept"], &snaps).status.code(), Some(0));
    let orphan = snaps.join("layout/wire.health.gone.snap");
    std::fs::copy(snaps.join("layout/wire.health.xml.ready.snap"), &orphan).unwrap();
    let run = |unreferenced: &str| {
        wirecheck(&repo())
            .args(["run", "--quiet", "--agent", "layout", "--agents-dir"])
            .arg(&agents)
            .arg("--snapshots")
            .arg(&snaps)
            .args(["--unreferenced", unreferenced])
            .arg("--out")
            .arg(dir.path().join("out"))
            .args(["--cases", "wire.health.xml.ready.*"])
            .env("SNAPSHOTS", &snaps)
            .output()
            .unwrap()
    };
    let o = run("warn");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stderr(&o).contains("warning: snapshot of a scenario that no longer exists"),
        "{}",
        show(&o)
    );
    let o = run("reject");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stderr(&o).contains(&orphan.display().to_string()),
        "{}",
        show(&o)
    );
}

#[test]
fn a_snapshots_folder_that_is_a_file_or_read_only_is_an_error_before_any_case_runs() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let run = |snaps: &Path| {
        wirecheck(&repo())
            .args(["run", "--quiet", "--agent", "layout", "--agents-dir"])
            .arg(&agents)
            .arg("--snapshots")
            .arg(snaps)
            .arg("--out")
            .arg(dir.path().join("out"))
            .args(["--cases", "wire.health.xml.ready.*"])
            .env("SNAPSHOTS", snaps)
            .output()
            .unwrap()
    };
    let o = run(&file);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("not a folder"), "{}", show(&o));
    assert!(!dir.path().join("out/results.json").exists(), "a case ran");
    // Read-only (a read-only mount stops root too).
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let mounted = rustix::process::geteuid().is_root()
        && std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=64k", "none"])
            .arg(&ro)
            .status()
            .unwrap()
            .success();
    if !mounted {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let o = run(&ro);
    if mounted {
        let _ = std::process::Command::new("umount").arg(&ro).status();
    }
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("cannot write in it"), "{}", show(&o));
    assert!(!dir.path().join("out/results.json").exists(), "a case ran");
}

#[test]
fn a_corrupt_snapshot_fails_its_case_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let snaps = dir.path().join("snaps");
    std::fs::create_dir_all(snaps.join("layout")).unwrap();
    let snap = snaps.join("layout/wire.health.xml.ready.snap");
    std::fs::write(&snap, "---\nformat: 1\nagent: layout\nflavour: odd\n---\n").unwrap();
    let o = run_layout(dir.path(), &agents, &snaps, "spaces", "out");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    let c = case(&r, "layout", CASE);
    assert_eq!(c["verdict"], "fail");
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "{}:4: unknown header field \"flavour\"",
            snap.display()
        )),
        "{reason}"
    );
}

/// The same agent on a loaded machine: its transcripts are what they were on a quiet one.
#[test]
fn the_bundled_reporters_transcripts_do_not_change_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let run = |out: &str, strict: bool| {
        let mut cmd = wirecheck(&repo());
        cmd.args(["run", "--quiet", "--snapshots"])
            .arg(&snaps)
            .arg("--out")
            .arg(dir.path().join(out));
        if strict {
            cmd.arg("--snapshots-strict");
        }
        cmd.output().unwrap()
    };
    let o = run("quiet", false);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(snapshots(&["accept"], &snaps).status.code(), Some(0));
    // Four spinners per core.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..4 * cores)
        .map(|_| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
        })
        .collect();
    let o = run("loaded", true);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    let r = results(&dir.path().join("loaded"));
    let suffix = ".snapshot.transcript";
    let mut compared = 0;
    for c in r["agents"][0]["cases"].as_array().unwrap() {
        // The guest scenarios are not offered to the reporter: it provisions nothing.
        assert!(!c["id"].as_str().unwrap().starts_with("guest."), "{c}");
        if c["id"].as_str().unwrap().ends_with(suffix) {
            compared += 1;
            // A pass; or, where time decides (a scenario whose answers move with the clock, the
            // agent's resends and exit) on a machine that stalled: the documented informational.
            let excused = c["verdict"] == "informational"
                && c["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("where time decides"));
            assert!(c["verdict"] == "pass" || excused, "{c}\n{}", show(&o));
        }
    }
    assert!(compared >= 40, "{compared} snapshot cases");
}

/// A snapshot written by another version of the normalizer: not compared line by line (a wall
/// of diffs), but said to be of another format.
#[test]
fn a_snapshot_of_another_format_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let snaps = dir.path().join("snaps");
    let o = run_layout(dir.path(), &agents, &snaps, "spaces", "run1");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(snapshots(&["accept"], &snaps).status.code(), Some(0));
    let snap = snaps.join("layout/wire.health.xml.ready.snap");
    let old = std::fs::read_to_string(&snap)
        .unwrap()
        .replacen("format: 1", "format: 0", 1);
    std::fs::write(&snap, old).unwrap();
    let o = run_layout(dir.path(), &agents, &snaps, "spaces", "run2");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = results(&dir.path().join("run2"));
    let c = case(&r, "layout", CASE);
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.contains("format 0") && reason.contains("normalizer changed"),
        "{reason}"
    );
    assert!(c["evidence"].as_array().unwrap().is_empty(), "{c}");
}

/// `review` on a terminal: each pending snapshot's diff, then a question per snapshot.
#[test]
fn review_on_a_terminal_accepts_rejects_and_skips() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let snaps = dir.path().join("snaps");
    let o = run_layout(dir.path(), &agents, &snaps, "spaces", "run1");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let pending = snaps.join("layout/wire.health.xml.ready.snap.new");
    assert!(pending.exists());
    // `script` gives the command a terminal; its input is the answers.
    let review = |answers: &str| {
        let command = format!(
            "{} snapshots review {}",
            runner_support::wirecheck_path().display(),
            snaps.display()
        );
        let mut child = std::process::Command::new("script")
            .args(["-q", "-e", "-c", &command, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), answers.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let o = review("s\n");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("0 accepted, 0 rejected, 1 skipped"),
        "{}",
        show(&o)
    );
    assert!(stdout(&o).contains("new snapshot:"), "{}", show(&o));
    assert!(pending.exists());
    let o = review("x\na\n");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("1 accepted, 0 rejected, 0 skipped"),
        "{}",
        show(&o)
    );
    assert!(!pending.exists());
    assert!(snaps.join("layout/wire.health.xml.ready.snap").exists());
}

/// `--exclude` leaves the snapshot case out like any other case.
#[test]
fn the_snapshot_case_follows_cases_and_exclude() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let snaps = dir.path().join("snaps");
    let o = wirecheck(&repo())
        .args(["run", "--quiet", "--agent", "layout", "--agents-dir"])
        .arg(&agents)
        .arg("--snapshots")
        .arg(&snaps)
        .arg("--out")
        .arg(dir.path().join("out"))
        .args([
            "--cases",
            "wire.health.xml.ready.*",
            "--exclude",
            "*.snapshot.*",
        ])
        .env("SNAPSHOTS", &snaps)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    let ids: Vec<&str> = r["agents"][0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(!ids.is_empty() && !ids.contains(&CASE), "{ids:?}");
    assert!(!snaps.join("layout").exists());
}

/// The finding: `wirecheck snapshots accept/reject` followed a symlinked agent folder (one a
/// repository can hold), renaming and removing files wherever it pointed. Links are refused,
/// saying so, and nothing outside the folder is touched; the same for a linked snapshot file.
#[test]
fn snapshots_accept_and_reject_refuse_a_symlinked_agent_folder() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&snaps).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let pending = conformance::snapshot::store::Snapshot::new("a", "x", "run 1:\n".into());
    std::fs::write(elsewhere.join("x.snap.new"), pending.render()).unwrap();
    std::fs::write(elsewhere.join("x.snap"), "precious\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, snaps.join("a")).unwrap();
    for command in ["accept", "reject", "pending"] {
        let o = snapshots(&[command], &snaps);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", show(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "{}: is a symbolic link",
                snaps.join("a").display()
            )),
            "{command}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("x.snap")).unwrap(),
            "precious\n"
        );
        assert!(elsewhere.join("x.snap.new").is_file(), "{command}");
    }

    // A linked snapshot file inside a real agent folder: refused the same way.
    std::fs::remove_file(snaps.join("a")).unwrap();
    std::fs::create_dir(snaps.join("a")).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("x.snap.new"), snaps.join("a/x.snap.new")).unwrap();
    let o = snapshots(&["reject"], &snaps);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("is a symbolic link"), "{}", show(&o));
    assert!(elsewhere.join("x.snap.new").is_file());
}

/// The finding: `wirecheck snapshots pending | head` panicked on the broken pipe. A reader
/// that goes away is not an error: no panic, no message, the usual exit status.
#[test]
fn snapshots_pending_into_a_closed_pipe_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    std::fs::create_dir_all(snaps.join("a")).unwrap();
    // More than a pipe holds (64 KiB), so writing goes on after the reader is gone.
    for i in 0..40 {
        let scenario = format!("s{i}");
        let pending =
            conformance::snapshot::store::Snapshot::new("a", &scenario, "line\n".repeat(800));
        std::fs::write(
            snaps.join(format!("a/{scenario}.snap.new")),
            pending.render(),
        )
        .unwrap();
    }
    let mut child = wirecheck(&repo())
        .args(["snapshots", "pending"])
        .arg(&snaps)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // As `| head -0`: the reader is gone before wirecheck writes.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(stderr(&o), "");
}

/// The finding: `--cases '*.snapshot.transcript'` was refused ("no case matches") although
/// docs/snapshots.md says the snapshot case is selected by `--cases` like any case. It selects
/// the snapshot cases alone; a pair that is not run gives its snapshot case its reason.
#[test]
fn cases_can_select_the_snapshot_cases_alone() {
    let dir = tempfile::tempdir().unwrap();
    let agents = layout_agent(dir.path());
    let snaps = dir.path().join("snaps");
    let run = |cases: &str, out: &str| {
        wirecheck(&repo())
            .args(["run", "--quiet", "--agent", "layout", "--agents-dir"])
            .arg(&agents)
            .arg("--snapshots")
            .arg(&snaps)
            .arg("--out")
            .arg(dir.path().join(out))
            .args(["--cases", cases])
            .env("SNAPSHOTS", &snaps)
            .output()
            .unwrap()
    };
    let o = run("wire.health.xml.*.snapshot.transcript", "out");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    let cases = r["agents"][0]["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        assert!(
            c["id"].as_str().unwrap().ends_with(".snapshot.transcript"),
            "{c}"
        );
    }
    assert_eq!(case(&r, "layout", CASE)["verdict"], "informational");
    assert!(
        snaps
            .join("layout/wire.health.xml.ready.snap.new")
            .is_file()
    );

    // A JSON scenario the XML agent does not claim is not offered to it: selecting only that
    // case runs nothing, and the run says which flow is not claimed (exit 2), instead of a
    // skipped case.
    let o = run("wire.health.json.ready.snapshot.transcript", "json");
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains(
            "the selected cases are not offered to the agents (agent layout: the json flow is not claimed: 1 scenario (1 case) not offered)"
        ),
        "{}",
        show(&o)
    );
    assert!(!dir.path().join("json/results.json").exists());
}
