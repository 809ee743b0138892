//! `wirecheck run --print-config`: what a run would use, as TOML (flags, `WIRECHECK_*`
//! variables and defaults merged), like `fake-wireserver --print-config`. Nothing is run.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::cli::RunArgs;
use crate::sources::AgentsSource;
use conformance::agent::{Action, AgentProfile};
use conformance::runner::{self, Planned};
use conformance::scenario::Scenario;

#[derive(Debug, Serialize)]
struct RunConfig {
    out: String,
    jobs: usize,
    strict: bool,
    quiet: bool,
    uncontained: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshots: Option<String>,
    cases: Vec<String>,
    exclude: Vec<String>,
    /// Folders, or "(built in)".
    scenarios: Vec<String>,
    agents_dir: String,
    /// Where bundled agents (provision-report, fake-wireserver) are looked for first.
    bin_dir: String,
    agent: Vec<AgentConfig>,
    plan: PlanConfig,
}

#[derive(Debug, Serialize)]
struct AgentConfig {
    name: String,
    profile: String,
    attach: &'static str,
    capabilities: Vec<&'static str>,
    /// action → the program it runs, resolved as the run would ("not found: ..." else).
    programs: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
struct PlanConfig {
    scenarios_loaded: usize,
    /// (agent, scenario) pairs this run (this partition) would run.
    pairs: usize,
    cases: usize,
}

pub fn render(
    args: &RunArgs,
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
    planned: &[Planned],
    bin_dir: &Path,
) -> Result<String, String> {
    let shown = |p: &Path| p.display().to_string();
    let config = RunConfig {
        out: shown(&args.out),
        jobs: args.jobs.map_or_else(runner::default_jobs, usize::from),
        strict: args.strict,
        quiet: args.quiet,
        uncontained: args.uncontained,
        partition: args.partition.map(|p| p.to_string()),
        run_id: args.run_id.clone(),
        summary: args.summary.as_deref().map(shown),
        snapshots: args.snapshots.as_deref().map(shown),
        cases: args.cases.clone(),
        exclude: args.exclude.clone(),
        scenarios: args
            .sources
            .scenario_sources()
            .iter()
            .map(|s| {
                s.as_deref()
                    .map_or(conformance::embedded::ORIGIN.into(), shown)
            })
            .collect(),
        agents_dir: match args.sources.agents_source() {
            AgentsSource::Dir(d) => shown(&d),
            AgentsSource::Builtin => conformance::embedded::ORIGIN.into(),
        },
        bin_dir: shown(bin_dir),
        agent: profiles
            .iter()
            .map(|p| AgentConfig {
                name: p.name.clone(),
                profile: p.source.to_string(),
                attach: p.attach.as_str(),
                capabilities: p.capabilities.iter().map(|c| c.as_str()).collect(),
                programs: Action::ALL
                    .into_iter()
                    .filter(|a| p.commands.contains_key(a))
                    .map(|a| {
                        let program = match runner::check_command(p, a, bin_dir) {
                            Ok(path) => shown(&path),
                            Err(e) => format!("not found: {}", e.message),
                        };
                        (a.to_string(), program)
                    })
                    .collect(),
            })
            .collect(),
        plan: PlanConfig {
            scenarios_loaded: scenarios.len(),
            pairs: planned.len(),
            cases: planned.iter().map(|p| p.checks.len()).sum(),
        },
    };
    toml::to_string(&config)
        .map(|t| format!("# wirecheck run: the effective configuration (nothing was run)\n{t}"))
        .map_err(|e| format!("cannot render the configuration: {e}"))
}
