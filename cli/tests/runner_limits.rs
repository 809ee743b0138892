//! Each agent's limits (`[limits]`: processes, memory, file size, open files) are its own: an
//! agent that reaches one is judged on what it did, and no neighbour notices. Each test is one
//! way an agent used to take its neighbours down or get past its limits, named after that
//! finding.

mod runner_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use fake_wireserver::limits::Limits;
use fake_wireserver::limits::cgroup::TreeCgroup;
use runner_support::{as_ordinary_user, results, script_agent, shared_tempdir, wirecheck};

/// Has a shell fork sleepers until a fork fails (at most 1,000: the test must not take the
/// machine down where the limit fails to hold), says how many it got, holds them 5 s (while
/// its neighbours run), then reports Ready whatever it was asked.
const FORK_BOMB: &str = r#"
import os, subprocess, time, urllib.request
# A shell forks sleepers until a fork fails (at most 1,000); they stay, in this PID namespace.
subprocess.run(["sh", "-c", "i=0; while [ $i -lt 1000 ]; do sleep 600 & i=$((i+1)); done"],
               stderr=subprocess.DEVNULL)
held = sum(1 for p in os.listdir("/proc") if p.isdigit() and
           open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep"))
print(f"forked {held}", flush=True)
time.sleep(5)
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

/// Asks for the wireserver's versions (it got going), allocates (and touches) 512 MiB, then
/// reports Ready.
const MEMORY_HOG: &str = r#"
import os, urllib.request
urllib.request.urlopen(os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/?comp=versions").read()
hog = bytearray(512 << 20)
for i in range(0, len(hog), 4096):
    hog[i] = 1
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

/// Asks for the wireserver's versions (it got going), then allocates (and touches) 80 MiB in
/// each of four processes, each below a per-process limit of 128 MiB, together far above; it
/// reports Ready only if all four got theirs.
const MEMORY_HOG_TREE: &str = r#"
import os, sys, time, urllib.request
urllib.request.urlopen(os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/?comp=versions").read()
def hog():
    memory = bytearray(80 << 20)
    for i in range(0, len(memory), 4096):
        memory[i] = 1
    time.sleep(1)
    return memory
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        hog()
        os._exit(0)
    kids.append(pid)
mine = hog()
if any(os.waitpid(kid, 0)[1] != 0 for kid in kids):
    sys.exit(1)
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

/// Asks for the wireserver's versions (it got going), writes a 64 MiB file into its case folder
/// (with SIGXFSZ's default action, which CPython ignores where most programs do not), then
/// reports Ready.
const FILE_HOG: &str = r#"
import os, signal, urllib.request
urllib.request.urlopen(os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/?comp=versions").read()
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
with open("big", "wb") as f:
    for _ in range(64):
        f.write(b"x" * (1 << 20))
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

/// A container's process limit, simulated (root: a cgroup of the test's own, which the run
/// joins before it starts, and below which wirecheck makes its agents' cgroups): the whole run
/// may have `processes`, as in `docker run --pids-limit`.
fn container_cap(processes: u64) -> Option<TreeCgroup> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    if let Some(why) = fake_wireserver::limits::cgroup::available() {
        panic!("as root, a cgroup per process tree must be possible here: {why}");
    }
    let cap = Limits {
        processes,
        memory: 16 << 30,
        ..Limits::DEFAULT
    };
    Some(TreeCgroup::create(&cap).unwrap().unwrap())
}

/// `wirecheck run` of `agents` (from `agents_dir`) on `cases`, 16 pairs at a time, inside `cap`
/// when given, as an ordinary user when `ordinary`.
fn run(
    out: &Path,
    agents_dir: &Path,
    agents: &[&str],
    cases: &str,
    cap: Option<&TreeCgroup>,
    ordinary: bool,
) -> Output {
    let mut cmd = wirecheck(&runner_support::repo());
    cmd.args(["run", "--quiet", "--agents-dir"]).arg(agents_dir);
    for agent in agents {
        cmd.args(["--agent", agent]);
    }
    cmd.arg("--out")
        .arg(out)
        .args(["--cases", cases, "--jobs", "16"]);
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    if let Some(cap) = cap {
        // SAFETY: the hook makes system calls only.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, cap.join_hook());
        }
    }
    cmd.output().unwrap()
}

/// Verdicts by case id of one agent.
fn verdicts(r: &serde_json::Value, agent: &str) -> BTreeMap<String, String> {
    cases(r, agent)
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn cases<'a>(r: &'a serde_json::Value, agent: &str) -> impl Iterator<Item = &'a serde_json::Value> {
    r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |a| a["agent"] == agent)
        .flat_map(|a| a["cases"].as_array().unwrap())
}

/// The timing cases the runner did not judge because the machine stalled it (`runner::lag`:
/// `informational`, alone or not, whenever wirecheck's own wake-ups come late).
fn stalled(r: &serde_json::Value, agent: &str) -> Vec<String> {
    cases(r, agent)
        .filter(|c| {
            c["verdict"] == "informational"
                && c["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("not judged, the machine was too loaded"))
        })
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

/// `agent`'s verdicts in both runs, but for the timing cases either run could not judge.
fn comparable(
    a: &serde_json::Value,
    b: &serde_json::Value,
    agent: &str,
) -> [BTreeMap<String, String>; 2] {
    let unjudged: Vec<String> = [stalled(a, agent), stalled(b, agent)].concat();
    [a, b].map(|r| {
        let mut v = verdicts(r, agent);
        v.retain(|id, _| !unjudged.contains(id));
        v
    })
}

/// The reasons of an agent's cases that were not judged because wirecheck failed.
fn harness_errors(r: &serde_json::Value, agent: &str) -> Vec<String> {
    r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["agent"] == agent)
        .flat_map(|a| a["cases"].as_array().unwrap())
        .filter_map(|c| c["reason"].as_str())
        .filter(|r| r.contains("harness error"))
        .map(str::to_owned)
        .collect()
}

/// Every `run-N.<ext>` artifact of an agent, as text.
fn run_artifacts(out: &Path, agent: &str, ext: &str) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(scenarios) = std::fs::read_dir(out.join("artifacts").join(agent)) else {
        return found;
    };
    for scenario in scenarios.flatten() {
        for file in std::fs::read_dir(scenario.path()).unwrap().flatten() {
            let path = file.path();
            if path.extension().is_some_and(|e| e == ext) {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                found.push((path, text));
            }
        }
    }
    found
}

/// Writes the agent `name` (a script with a profile claiming `capabilities`) with a
/// `[limits]` table into `dir`; returns the agents folder.
fn limited_agent(
    dir: &Path,
    name: &str,
    capabilities: &str,
    script: &str,
    limits: &str,
) -> PathBuf {
    let agents = script_agent(dir, name, "url", capabilities, script);
    let profile = agents.join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(&profile, format!("{text}\n[limits]\n{limits}\n")).unwrap();
    agents
}

/// The whole default suite: its pairs start over several seconds, so some are sure to start
/// while a fork bomb holds the machine's (here: the cap's) processes.
const SUITE: &str = "*";

/// A forking agent used to make its neighbours' agents fail to start ("os error 11"), their
/// cases harness errors or FAILs. Beside one, in the default suite (in a run capped at 2,000
/// processes, as a container's pid limit would: room for every slot's bomber at its limit,
/// 16 × 66, and the rest of the run, not for one bomber without it), the bundled reporter gets
/// exactly the verdicts of a run alone, `runs` times, and the bomber's own cases are verdicts
/// about it, its processes held at its limit. With `xml_bomber`, the XML bomber
/// (`tests/trust_support/xml_bomber.py`: two 300 KB bodies of nested tags per case) runs
/// beside them too.
fn assert_fork_bomb_is_its_own_problem(ordinary: bool, xml_bomber: bool, runs: usize) {
    let dir = shared_tempdir();
    let agents = limited_agent(
        dir.path(),
        "bomber",
        "\"json\", \"failure\", \"in-progress\"",
        FORK_BOMB,
        "processes = 64",
    );
    std::fs::copy(
        runner_support::repo().join("conformance/agents/provision-report.toml"),
        agents.join("provision-report.toml"),
    )
    .unwrap();
    let mut neighbours = vec!["bomber", "provision-report"];
    if xml_bomber {
        let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/trust_support");
        let profile = std::fs::read_to_string(support.join("xml_bomber.toml.in"))
            .unwrap()
            .replace(
                "@SCRIPT@",
                &support.join("xml_bomber.py").display().to_string(),
            );
        std::fs::write(agents.join("xml-bomber.toml"), profile).unwrap();
        neighbours.push("xml-bomber");
    }
    let cap = container_cap(2000);
    let alone = dir.path().join("alone");
    let o = run(
        &alone,
        &agents,
        &["provision-report"],
        SUITE,
        cap.as_ref(),
        ordinary,
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let alone = results(&alone);
    for n in 1..=runs {
        let beside = dir.path().join(format!("beside-{n}"));
        let o = run(&beside, &agents, &neighbours, SUITE, cap.as_ref(), ordinary);
        assert_beside_is_alone(&alone, &beside, &o, xml_bomber);
    }
    if let Some(cap) = cap {
        cap.finish();
    }
}

/// One run beside the bombers (`beside`, ended with `o`) against the run `alone`: the
/// reporter's verdicts are the same, the bombers' cases are verdicts about them.
fn assert_beside_is_alone(alone: &serde_json::Value, beside_dir: &Path, o: &Output, xml: bool) {
    let beside = &results(beside_dir);
    let [alone_verdicts, beside_verdicts] = comparable(alone, beside, "provision-report");
    // Most are compared: the runner stalls on a few timing cases at most.
    let all = verdicts(alone, "provision-report").len();
    assert!(alone_verdicts.len() * 10 >= all * 9, "{alone_verdicts:?}");
    let differ: Vec<String> = alone_verdicts
        .iter()
        .filter(|(id, v)| beside_verdicts.get(*id) != Some(v))
        .map(|(id, v)| {
            let reason = |r: &serde_json::Value| {
                cases(r, "provision-report")
                    .find(|c| c["id"] == id.as_str())
                    .map(|c| format!("{} {}", c["verdict"], c["reason"]))
            };
            format!("{id}: alone {v}; beside {:?}", reason(beside))
        })
        .collect();
    assert_eq!(beside_verdicts.len(), alone_verdicts.len());
    assert!(
        differ.is_empty(),
        "{differ:#?}\n{}",
        runner_support::stderr(o)
    );
    assert_eq!(harness_errors(beside, "bomber"), Vec::<String>::new());
    let bombs = run_artifacts(beside_dir, "bomber", "stdout");
    assert!(!bombs.is_empty(), "the bomber never ran: {o:?}");
    for (path, text) in bombs {
        let forked: u64 = text
            .trim()
            .strip_prefix("forked ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}: {text:?}", path.display()));
        // Its limit, less itself and its shell.
        assert!(forked <= 64, "{}: forked {forked}", path.display());
    }
    // Its cases are verdicts about it: Ready where it was asked for a failure is a failure.
    let bomber = verdicts(beside, "bomber");
    assert_eq!(
        bomber["wire.health.json.failure.report.state"], "fail",
        "{bomber:?}"
    );
    assert_eq!(
        bomber["wire.health.json.ready.report.state"], "pass",
        "{bomber:?}"
    );
    if xml {
        // Its bodies reached its fakes (the oracle says what it made of them) and were judged.
        assert_eq!(harness_errors(beside, "xml-bomber"), Vec::<String>::new());
        let bombed = cases(beside, "xml-bomber")
            .filter(|c| {
                c["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("the root element is <a>"))
            })
            .count();
        assert!(bombed > 0, "the XML bomber's bodies never reached a fake");
    }
}

/// The fork bomb runs are compared with runs alone: one at a time, or each would load the
/// other's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Issue 23: "ten runs of the default suite beside the XML bomber and the fork bomber: the
/// bundled reporter's verdicts identical to a run alone". Two runs here (`BOMBER_RUNS=10` for
/// the issue's ten).
#[test]
fn runs_beside_the_xml_bomber_and_a_fork_bomb_change_none_of_the_reporters_verdicts() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let runs =
        std::env::var("BOMBER_RUNS").map_or(2, |n| n.parse().expect("BOMBER_RUNS: a number"));
    assert_fork_bomb_is_its_own_problem(false, true, runs);
}

#[test]
fn a_fork_bomb_of_an_ordinary_users_run_changes_none_of_its_neighbours_verdicts() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = conformance::containment::unavailable() {
        eprintln!("not run: {why}");
        return;
    }
    assert_fork_bomb_is_its_own_problem(true, false, 1);
}

/// Runs one hog (with its `[limits]`) on `wire.health.json.ready`, as root and as an ordinary
/// user (`users`); returns each run's results and the end of its one invocation.
fn hog_runs(
    name: &str,
    script: &str,
    limits: &str,
    users: &[bool],
) -> Vec<(serde_json::Value, String)> {
    let mut runs = Vec::new();
    for &ordinary in users {
        if ordinary && conformance::containment::unavailable().is_some() {
            continue;
        }
        let dir = shared_tempdir();
        let agents = limited_agent(dir.path(), name, "\"json\"", script, limits);
        let out = dir.path().join("out");
        let o = run(
            &out,
            &agents,
            &[name],
            "wire.health.json.ready.*",
            None,
            ordinary,
        );
        assert_eq!(o.status.code(), Some(1), "ordinary: {ordinary}: {o:?}");
        let r = results(&out);
        assert_eq!(harness_errors(&r, name), Vec::<String>::new());
        let commands = run_artifacts(&out, name, "command");
        assert_eq!(commands.len(), 1, "{commands:?}");
        let ended = commands[0].1.lines().next().unwrap_or_default().to_owned();
        runs.push((r, ended));
    }
    runs
}

/// An agent could use all the memory it liked: past its `memory_mib` it is stopped (an
/// allocation past its RLIMIT_DATA fails, or the kernel's OOM killer ends it in its cgroup),
/// and its case fails on what it then did: no report.
#[test]
fn a_memory_hog_is_stopped_at_its_limit_and_judged() {
    for (r, ended) in hog_runs("memhog", MEMORY_HOG, "memory_mib = 128", &[false, true]) {
        let v = verdicts(&r, "memhog");
        assert_eq!(
            v["wire.health.json.ready.behaviour.terminal"], "fail",
            "{v:?}"
        );
        // Killed in its cgroup, or its allocation refused past RLIMIT_DATA (MemoryError).
        assert!(
            ended.contains("killed by signal 9") || ended.contains("exit status 1"),
            "{ended}"
        );
    }
}

/// Where the agent has a cgroup of its own (root), its memory limit holds for its whole tree:
/// four processes of 80 MiB each do not fit in 128 MiB, although each is below it.
#[test]
fn a_memory_hog_spread_over_processes_is_stopped_at_its_trees_limit() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("not run: a memory limit per process tree needs a cgroup (root)");
        return;
    }
    if let Some(why) = fake_wireserver::limits::cgroup::available() {
        panic!("as root, a cgroup per process tree must be possible here: {why}");
    }
    for (r, ended) in hog_runs("treehog", MEMORY_HOG_TREE, "memory_mib = 128", &[false]) {
        let v = verdicts(&r, "treehog");
        assert_eq!(
            v["wire.health.json.ready.behaviour.terminal"], "fail",
            "{v:?}"
        );
        assert!(
            ended.contains("killed by signal 9") || ended.contains("exit status 1"),
            "{ended}"
        );
    }
}

/// An agent could fill the disk with one file: past its `file_size_mib` a write ends it with
/// SIGXFSZ, and its case fails on what it then did: no report.
#[test]
fn a_file_size_hog_gets_sigxfsz_at_its_limit_and_is_judged() {
    for (r, ended) in hog_runs("filehog", FILE_HOG, "file_size_mib = 8", &[false, true]) {
        let v = verdicts(&r, "filehog");
        assert_eq!(
            v["wire.health.json.ready.behaviour.terminal"], "fail",
            "{v:?}"
        );
        assert!(ended.contains("killed by signal 25"), "{ended}");
    }
}
