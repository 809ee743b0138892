//! `attach = "sandbox"`: for agents that cannot be pointed anywhere (afterburn), each scenario
//! runs as `fake-wireserver sandbox --scenario <the [fake] table> --out <case>/sandbox
//! --timeout <deadline> -- <agent argv>`. Inside its network and mount namespaces the fake
//! answers on the platform's addresses, so the placeholders are `http://168.63.129.16`,
//! `http://169.254.169.254` and `/var/lib/hyperv/.kvp_pool_1`. Afterwards the journal
//! (`journal.jsonl`), the pool copies (`.kvp_pool_N`) and the summary (`sandbox.json`) are read
//! back from `--out`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_wireserver::documents::Documents;
use fake_wireserver::journal::Entry;
use serde::Deserialize;

use super::{Endpoints, Session, SessionError, agent_invocation, record};
use crate::exec::{self, Exit, Invocation};
use crate::runner::{Planned, RunSettings};
use crate::scenario::{Scenario, Target};

/// The sandbox binary (a workspace binary, found next to wirecheck, else on PATH).
const FAKE_BINARY: &str = "fake-wireserver";
/// The pool file agents write inside the sandbox.
const POOL_PATH: &str = "/var/lib/hyperv/.kvp_pool_1";
/// Its copy in `--out`.
const POOL_COPY: &str = ".kvp_pool_1";
/// Time the sandbox gets beyond the agent's deadline to set up, kill and write its files.
const SANDBOX_GRACE: Duration = Duration::from_secs(15);

/// What `sandbox.json` says about the run (the fields the runner needs).
#[derive(Debug, Deserialize)]
struct Summary {
    exit_status: i32,
    signal: Option<i32>,
    timed_out: bool,
}

pub fn unsupported(scenario: &Scenario) -> Option<String> {
    if scenario.agent.wireserver == Target::Closed || scenario.agent.imds == Target::Closed {
        return Some(
            "the sandbox always serves 168.63.129.16 and 169.254.169.254; a refused wireserver or IMDS cannot be arranged in it".into(),
        );
    }
    if scenario.agent.runs.len() > 1 {
        return Some(format!(
            "the sandbox runs one agent invocation per scenario; this one has {}",
            scenario.agent.runs.len()
        ));
    }
    None
}

pub fn unavailable(bin_dir: &Path) -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some(
            "sandbox attach needs root (fake-wireserver sandbox creates network and mount namespaces); run wirecheck as root".into(),
        );
    }
    if exec::resolve_program(FAKE_BINARY, bin_dir).is_none() {
        return Some(format!(
            "sandbox attach needs the {FAKE_BINARY} binary next to wirecheck ({}) or on PATH (cargo build --workspace --bins)",
            bin_dir.display()
        ));
    }
    None
}

pub async fn run(
    p: &Planned,
    settings: &RunSettings,
    case_dir: &Path,
    deadline: f64,
) -> Result<Session, SessionError> {
    let scenario = &*p.scenario;
    let [run] = scenario.agent.runs.as_slice() else {
        return Err(SessionError::Harness(
            unsupported(scenario).unwrap_or_default(),
        ));
    };
    let fake_binary = exec::resolve_program(FAKE_BINARY, &settings.bin_dir)
        .ok_or_else(|| SessionError::Harness(format!("{FAKE_BINARY} not found")))?;

    // The [fake] table as a scenario file of its own (bodies inline), checked by reading it
    // back so a problem is the runner's error, not the sandbox's.
    let scenario_file = case_dir.join("fake-scenario.toml");
    let text = scenario.fake.to_toml_string();
    fake_wireserver::Scenario::from_toml_str(&text, &scenario_file.display().to_string()).map_err(
        |e| {
            SessionError::Harness(format!(
                "cannot write the [fake] table as a scenario file: {e}"
            ))
        },
    )?;
    std::fs::write(&scenario_file, &text).map_err(|e| {
        SessionError::Harness(format!("cannot write {}: {e}", scenario_file.display()))
    })?;
    let out = case_dir.join("sandbox");

    let endpoints = Endpoints {
        wireserver_url: format!("http://{}", fake_wireserver::sandbox::WIRESERVER_ADDR),
        imds_url: format!("http://{}", fake_wireserver::sandbox::IMDS_ADDR),
        proxy_url: None,
        kvp_pool: PathBuf::from(POOL_PATH),
    };
    let (argv, agent) = agent_invocation(p, settings, run, &endpoints, case_dir, deadline)?;
    let mut args: Vec<String> = vec![
        "sandbox".into(),
        "--scenario".into(),
        scenario_file.display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--timeout".into(),
        format!("{deadline}"),
        "--".into(),
        agent.program.display().to_string(),
    ];
    args.extend(agent.args.iter().cloned());
    let invocation = Invocation {
        program: fake_binary,
        args,
        deadline: agent.deadline + SANDBOX_GRACE,
        ..agent
    };

    // The fake's clock starts inside the sandbox, a little after this: journal times are never
    // later than the runner's view of the run (see `Observation::run_of`).
    let t0 = Instant::now();
    let finished = exec::run(&invocation).await;
    let failed = |what: String| {
        let stderr = finished.stderr.text();
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        SessionError::Harness(format!(
            "fake-wireserver sandbox failed ({what}); its last output: {}",
            tail.join(" | ")
        ))
    };
    let summary: Summary = match std::fs::read_to_string(out.join("sandbox.json")) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| failed(format!("{}/sandbox.json: {e}", out.display())))?,
        Err(_) => return Err(failed(finished.exit.describe())),
    };
    let exit = match summary {
        Summary {
            timed_out: true, ..
        } => Exit::KilledAtDeadline,
        Summary {
            signal: Some(sig), ..
        } => Exit::Signal(sig),
        Summary {
            exit_status: status @ (126 | 127),
            ..
        } => {
            return Err(SessionError::Agent(format!(
                "the agent could not be started in the sandbox (exit status {status}): {}",
                finished.stderr.text().lines().last().unwrap_or_default()
            )));
        }
        Summary { exit_status, .. } => Exit::Code(exit_status),
    };

    let journal = read_journal(&out.join(fake_wireserver::sandbox::JOURNAL_FILE))?;
    let pool = std::fs::read(out.join(POOL_COPY)).ok();
    let served = Documents::new(&scenario.fake).served_ids(0);
    Ok(Session {
        journal,
        served,
        pool,
        runs: vec![record(run, argv, exit, finished, t0)],
        clock_origin: t0,
        unjudgeable: None,
    })
}

/// `journal.jsonl`: one `fake_wireserver::journal::Entry` per line, sorted by `seq`.
fn read_journal(path: &Path) -> Result<Vec<Entry>, SessionError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        SessionError::Harness(format!(
            "cannot read the sandbox journal {}: {e}",
            path.display()
        ))
    })?;
    let mut journal = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry = serde_json::from_str(line).map_err(|e| {
            SessionError::Harness(format!(
                "{}:{}: not a journal entry: {e}",
                path.display(),
                i + 1
            ))
        })?;
        journal.push(entry);
    }
    journal.sort_by_key(|e| e.seq);
    Ok(journal)
}
