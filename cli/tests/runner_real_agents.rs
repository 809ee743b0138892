//! `wirecheck run --agent cloud-init --agent afterburn`: the real agents, unmodified, through the
//! runner (cloud-init 22.4.2 over loopback URLs via its driver, afterburn 5.11.0 in
//! `fake-wireserver sandbox`), every applicable scenario, judged by results.json.
//!
//! Needs root (the sandbox), cloud-init 22.4.2 and afterburn 5.11.0 installed by
//! scripts/install-agents.sh, and the workspace binaries built (`cargo build --workspace
//! --bins`). A missing piece is a failure that says how to get it, never a skip. The whole
//! suite runs (no --cases): the pairs run in parallel, so its wall time is that of the longest
//! scenario (cloud-init's three 5 s retry sleeps), about 20 s.

use crate::runner_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use runner_support::{case, counts, repo, stderr, stdout, wirecheck, wirecheck_path};

fn require_prerequisites() {
    let mut missing = Vec::new();
    if !rustix::process::geteuid().is_root() {
        missing.push("root (afterburn runs in `fake-wireserver sandbox`)".to_owned());
    }
    let version = Path::new("/usr/lib/python3/dist-packages/cloudinit/version.py");
    match std::fs::read_to_string(version) {
        Ok(text) if text.contains("\"22.4.2\"") => {}
        Ok(_) => missing.push(format!(
            "cloud-init 22.4.2 ({} names another version)",
            version.display()
        )),
        Err(_) => missing.push("cloud-init 22.4.2 (the Debian package)".to_owned()),
    }
    let bin_dir = wirecheck_path().parent().unwrap().to_path_buf();
    let afterburn = bin_dir.join("../agents/afterburn/bin/afterburn");
    if !afterburn.is_file() {
        missing.push(format!("afterburn 5.11.0 at {}", afterburn.display()));
    }
    let fake = bin_dir.join("fake-wireserver");
    if !fake.is_file() {
        missing.push(format!(
            "{} (cargo build --workspace --bins)",
            fake.display()
        ));
    }
    assert!(
        missing.is_empty(),
        "the real-agent runner test needs: {}. Install the agents with `bash scripts/install-agents.sh` \
         (as root; scripts/test-all.sh does it) and build the workspace binaries first.",
        missing.join("; ")
    );
}

fn ids_with(results: &serde_json::Value, agent: &str, verdict: &str) -> BTreeSet<String> {
    results["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["agent"] == agent)
        .flat_map(|a| a["cases"].as_array().unwrap())
        .filter(|c| c["verdict"] == verdict)
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

/// The journal a case kept under artifacts/.
fn journal(out: &Path, agent: &str, scenario: &str) -> Vec<serde_json::Value> {
    let path: PathBuf = out.join(format!("artifacts/{agent}/{scenario}/journal.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal line is JSON"))
        .collect()
}

fn verdict<'a>(results: &'a serde_json::Value, agent: &str, id: &str) -> &'a str {
    case(results, agent, id)["verdict"].as_str().unwrap()
}

fn header<'a>(entry: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    entry["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
        .and_then(|h| h[1].as_str())
}

#[test]
fn cloud_init_and_afterburn_are_judged_as_protocol_md_describes_them() {
    require_prerequisites();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let run = wirecheck(&repo())
        .args([
            "run",
            "--agent",
            "cloud-init",
            "--agent",
            "afterburn",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let results = runner_support::results(&out);
    let context = format!("stdout:\n{}\nstderr:\n{}", stdout(&run), stderr(&run));
    assert_eq!(run.status.code(), Some(0), "{context}");
    assert!(!stderr(&run).contains("wirecheck: error"), "{context}");

    // No failures; the real agents' known shortcomings are exactly the declared deviations.
    for agent in ["cloud-init", "afterburn"] {
        assert_eq!(
            counts(&results, agent).get("fail"),
            None,
            "{agent}: {context}"
        );
        let harness: Vec<String> = results["agents"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|a| a["cases"].as_array().unwrap())
            .filter(|c| {
                c["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("harness error"))
            })
            .map(|c| c["id"].to_string())
            .collect();
        assert!(harness.is_empty(), "harness errors: {harness:?}");
    }
    assert_eq!(
        ids_with(&results, "cloud-init", "non-strict"),
        set(&[
            "goalstate.malformed.behaviour.retry",
            "goalstate.malformed.behaviour.terminal",
            "report.description.long.xml.behaviour.terminal",
            "report.description.special.xml.behaviour.terminal",
            "transport.partial.goalstate.behaviour.retry",
            "transport.partial.goalstate.behaviour.terminal",
        ])
    );
    assert_eq!(
        ids_with(&results, "afterburn", "non-strict"),
        set(&["wireserver.unreachable.ready.behaviour.retry"])
    );
    let ci_unimplemented = ids_with(&results, "cloud-init", "unimplemented");
    assert!(ci_unimplemented.contains("wire.health.xml.failure.report.description"));
    assert!(ci_unimplemented.contains("wire.health.xml.ready.kvp.report"));
    let reason = case(&results, "cloud-init", "wire.health.xml.ready.kvp.report")["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("no PROVISIONING_REPORT"), "{reason}");
    let reason = case(
        &results,
        "afterburn",
        "wire.health.xml.failure.report.state",
    )["reason"]
        .as_str()
        .unwrap();
    assert_eq!(
        verdict(
            &results,
            "afterburn",
            "wire.health.xml.failure.report.state"
        ),
        "unimplemented"
    );
    assert!(reason.contains("only Ready"), "{reason}");

    // cloud-init: the Ready report over the XML flow, parsed by the oracle as Ready.
    for check in [
        "report.shape",
        "report.state",
        "protocol.headers",
        "behaviour.exit",
        "behaviour.terminal",
    ] {
        let id = format!("wire.health.xml.ready.{check}");
        assert_eq!(
            verdict(&results, "cloud-init", &id),
            "pass",
            "{id}: {:?}",
            case(&results, "cloud-init", &id)
        );
    }
    let posts: Vec<serde_json::Value> = journal(&out, "cloud-init", "wire.health.xml.ready")
        .into_iter()
        .filter(|e| e["endpoint"] == "wireserver.health.xml")
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["report"]["kind"], "xml");
    assert_eq!(posts[0]["report"]["state"], "Ready");
    assert!(header(&posts[0], "User-Agent").is_some_and(|ua| ua.starts_with("Cloud-Init/")));
    // cloud-init's fixed 5 s sleeps are waited for, not cut by the scenario's 7 s deadline.
    for id in [
        "retry.status.500.xml.behaviour.interval",
        "retry.status.500.xml.behaviour.budget",
        "retry.status.500.xml.behaviour.exit",
        "retry.gone.health.xml.behaviour.terminal",
    ] {
        assert_eq!(
            verdict(&results, "cloud-init", id),
            "pass",
            "{id}: {:?}",
            case(&results, "cloud-init", id)
        );
    }
    // Its 20-minute budget with the wireserver refused: run in agent time (its clock and the
    // fake's sped up alike), no longer skipped as too long. The fake sees nothing of it; the
    // runner's watch sees the SYNs of its attempts on the closed port, which measure its
    // start-up and its loop, so its exit is judged (it was left informational, "having sent
    // nothing").
    let unreachable = case(
        &results,
        "cloud-init",
        "wireserver.unreachable.ready.behaviour.budget",
    );
    assert_eq!(unreachable["verdict"], "pass", "{unreachable}");
    assert!(
        unreachable["evidence"][0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("of a 1200.00 s budget")),
        "{unreachable}"
    );
    assert!(
        unreachable["timeline"]["time_scale"]
            .as_u64()
            .is_some_and(|s| s > 1),
        "{unreachable}"
    );
    assert!(
        unreachable["timeline"]["agent_exit_ms"]
            .as_u64()
            .is_some_and(|ms| ms >= 1_200_000),
        "it tried for its whole budget: {unreachable}"
    );

    // afterburn: the boot check-in in the sandbox, on the platform's addresses.
    for check in [
        "report.shape",
        "report.state",
        "protocol.headers",
        "behaviour.exit",
        "behaviour.terminal",
    ] {
        let id = format!("wire.health.xml.ready.{check}");
        assert_eq!(
            verdict(&results, "afterburn", &id),
            "pass",
            "{id}: {:?}",
            case(&results, "afterburn", &id)
        );
    }
    let posts: Vec<serde_json::Value> = journal(&out, "afterburn", "wire.health.xml.ready")
        .into_iter()
        .filter(|e| e["endpoint"] == "wireserver.health.xml")
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["report"]["state"], "Ready");
    assert_eq!(
        header(&posts[0], "x-ms-agent-name"),
        Some("com.coreos.afterburn")
    );
    assert_eq!(header(&posts[0], "Host"), Some("168.63.129.16"));
    for id in [
        "retry.gone.health.xml.behaviour.retry",
        "retry.status.500.xml.behaviour.interval",
        "goalstate.malformed.behaviour.retry",
        "transport.partial.goalstate.behaviour.terminal",
    ] {
        assert_eq!(
            verdict(&results, "afterburn", id),
            "pass",
            "{id}: {:?}",
            case(&results, "afterburn", id)
        );
    }
    // The sandbox arranges the refused wireserver (`--refuse`), and afterburn's minutes of
    // tries run sped up: judged, where its own clock kept it skipped as too long before.
    for id in [
        "wireserver.unreachable.ready.behaviour.exit",
        "wireserver.unreachable.ready.behaviour.budget",
        "retry.fatal.403.plain.xml.behaviour.budget",
    ] {
        let judged = case(&results, "afterburn", id);
        assert_eq!(judged["verdict"], "pass", "{judged}");
        assert!(
            judged["timeline"]["time_scale"]
                .as_u64()
                .is_some_and(|s| s > 1),
            "{judged}"
        );
    }

    // docs/matrix.md's matrix comes from this results.json.
    let matrix = wirecheck(&repo())
        .arg("matrix")
        .arg(out.join("results.json"))
        .output()
        .unwrap();
    assert_eq!(matrix.status.code(), Some(0), "{}", stderr(&matrix));
    let table = stdout(&matrix);
    assert!(
        table.starts_with("| scenario group | cloud-init | afterburn |\n"),
        "{table}"
    );
    assert!(table.contains("| `retry` | "), "{table}");
}
