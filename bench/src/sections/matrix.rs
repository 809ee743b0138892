//! The real-agent matrix: `wirecheck run` with every bundled real-agent profile (root: sandbox
//! and network namespaces; the agents from scripts/install-agents.sh) against its slowest
//! single case, which no amount of parallelism can shorten. The slowest case run alone is the
//! measured floor beside it.

use std::fmt::Write as _;

use anyhow::bail;

use super::Ctx;
use super::suite::{SuiteRun, run_suite};
use crate::results::{Figure, Section};

/// The matrix: every bundled profile (conformance/agents/: the registry of real agents, and
/// the bundled reporter), so a new agent is in it with its profile.
pub fn agents(root: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let dir = root.join("conformance/agents");
    let names = conformance::agent::list_profiles(&dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    if names.is_empty() {
        bail!("no profile in {}", dir.display());
    }
    Ok(names)
}

/// Target: the matrix ends within this multiple of its slowest case.
pub const TARGET_RATIO: f64 = 1.5;

pub fn run(ctx: &Ctx) -> anyhow::Result<Section> {
    if !rustix::process::geteuid().is_root() {
        bail!(
            "not measured: the real agents run in fake-wireserver sandbox and private network namespaces, which need root"
        );
    }
    let names = agents(&ctx.root)?;
    let agents: Vec<String> = names
        .iter()
        .flat_map(|a| ["--agent".to_owned(), a.clone()])
        .collect();
    let whole = run_suite(ctx, &ctx.tmp.join("matrix"), &agents)?;
    let Some((agent, scenario, slowest)) = whole.slowest.clone() else {
        bail!("the matrix run judged no case");
    };
    let skipped_all = whole
        .per_agent
        .iter()
        .filter(|(_, v)| v.keys().all(|k| k == "skipped"))
        .map(|(a, _)| a.clone())
        .collect::<Vec<_>>();
    if !skipped_all.is_empty() {
        bail!(
            "every case of {} was skipped (agents not installed? run scripts/install-agents.sh as root)",
            skipped_all.join(", ")
        );
    }
    let alone = run_suite(
        ctx,
        &ctx.tmp.join("matrix-alone"),
        &[
            "--agent".to_owned(),
            agent.clone(),
            format!("--cases={scenario}.*"),
        ],
    )?;

    Ok(Section {
        title: "Real-agent matrix wall time".into(),
        body: body(&names, &whole, &alone, &agent, &scenario, slowest),
        figures: figures(&whole, &alone, slowest),
    })
}

/// The verdicts per agent, then the matrix's wall time beside its floors.
fn body(
    names: &[String],
    whole: &SuiteRun,
    alone: &SuiteRun,
    agent: &str,
    scenario: &str,
    slowest: f64,
) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "`wirecheck run` as root with {} profiles ({}), {} cases, 16 scenarios at a time, one \
         timed run. Its floor is the slowest single case (its duration in results.json: what \
         that agent's fixed timing makes it wait in that scenario), and the same case run \
         alone.\n",
        names.len(),
        names.join(", "),
        whole.cases
    );
    let _ = writeln!(body, "| agent | cases not skipped | verdicts |");
    let _ = writeln!(body, "|---|---:|---|");
    for (name, verdicts) in &whole.per_agent {
        let judged: usize = verdicts
            .iter()
            .filter(|(v, _)| v.as_str() != "skipped")
            .map(|(_, n)| n)
            .sum();
        let list: Vec<String> = verdicts.iter().map(|(v, n)| format!("{v} {n}")).collect();
        let _ = writeln!(body, "| {name} | {judged} | {} |", list.join(", "));
    }
    let _ = writeln!(body, "\n| what | seconds |");
    let _ = writeln!(body, "|---|---:|");
    let _ = writeln!(
        body,
        "| whole matrix (exit {}) | {:.2} |",
        whole.exit, whole.seconds
    );
    let _ = writeln!(
        body,
        "| slowest case inside the matrix (`{agent}`, `{scenario}`) | {slowest:.2} |"
    );
    let _ = writeln!(
        body,
        "| `{scenario}` for `{agent}` run alone (exit {}) | {:.2} |",
        alone.exit, alone.seconds
    );
    if whole.exit != 0 {
        let _ = writeln!(
            body,
            "\n**The matrix exited {}: at least one case failed** (the wall time still counts).",
            whole.exit
        );
    }
    let _ = writeln!(
        body,
        "| agent time the matrix covered ({} pairs sped up; each pair's agent on its own clock, summed) | {:.2} |",
        whole.scaled_pairs, whole.agent_seconds
    );
    body
}

fn figures(whole: &SuiteRun, alone: &SuiteRun, slowest: f64) -> Vec<Figure> {
    let ratio = whole.seconds / slowest;
    vec![
        Figure {
            name: "real-agent matrix wall time vs its slowest case".into(),
            measured: format!("{:.2} s", whole.seconds),
            reference: format!("{slowest:.2} s"),
            ratio: Some(ratio),
            target: format!("≤ {TARGET_RATIO}x"),
            met: Some(ratio <= TARGET_RATIO),
        },
        Figure {
            name: "real-agent matrix wall time vs the agent time it covered".into(),
            measured: format!("{:.2} s", whole.seconds),
            reference: format!("{:.2} s", whole.agent_seconds),
            ratio: Some(whole.seconds / whole.agent_seconds.max(f64::MIN_POSITIVE)),
            target: "-".into(),
            met: None,
        },
        Figure {
            name: "real-agent matrix wall time vs its slowest case run alone".into(),
            measured: format!("{:.2} s", whole.seconds),
            reference: format!("{:.2} s", alone.seconds),
            ratio: Some(whole.seconds / alone.seconds),
            target: "-".into(),
            met: None,
        },
    ]
}
