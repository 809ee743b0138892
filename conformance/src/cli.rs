//! The `wirecheck` command line (clap derive). Every flag has a `WIRECHECK_*` environment
//! equivalent. `main.rs` only dispatches; the work is in the library.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use crate::agent::{self, AgentProfile};
use crate::catalog::CheckId;
use crate::runner::{self, Planned, RunSettings};
use crate::scenario::{self, Scenario};
use crate::select::{CaseFilter, Partition};

/// Exit status: no case failed.
pub const EXIT_OK: u8 = 0;
/// Exit status: at least one case failed (or, with `--strict`, was non-strict).
pub const EXIT_FAILED: u8 = 1;
/// Exit status: usage error or bad input (profile, scenario, missing agent command).
pub const EXIT_USAGE: u8 = 2;

/// The bundled reporter, run when no agent is named.
pub const DEFAULT_AGENT: &str = "provision-report";

const RUN_AFTER_HELP: &str = "\
Exit status: 0 no case failed; 1 at least one case failed (with --strict: or was non-strict); \
2 usage error or bad input (a profile, a scenario, a missing agent command), a case that \
could not be run because wirecheck's own fake or sandbox failed, an agent none of whose \
cases was judged (all skipped), or an agent that never got going (in none of its scenarios \
did it send a request or exit 0: its case folder and stderr are named); results are still \
written.

Timing: an agent's deadline is counted from its first request (or from 10 s after its start, \
when none comes), so a slow start costs time, not verdicts; a timing too close to its limit to \
call, given how late wirecheck's own wake-ups came meanwhile (a loaded machine), is \
informational and says so.

Agents: --agent NAME loads <agents-dir>/NAME.toml (or a path to a .toml file); without --agent \
and --agent-cmd the bundled reporter `provision-report` runs, found next to wirecheck or on PATH.

--agent-cmd takes one command line for every action, split like a shell would; {action} is \
`ready`, `failure` or `in-progress`, and the other placeholders ({wireserver_url}, {imds_url}, \
{kvp_pool}, {vm_id}, {reason}, {description}, {data}, {protocol}, {budget}, {request_timeout}, \
{retry_interval}, {proxy_url}, {bin_dir}, {case_dir}) are filled in per case. Every value is \
also in the agent's environment as WIRECHECK_CASE_<NAME> (WIRECHECK_CASE_DATA: KEY=VALUE \
lines). Agents run inside their case folder: a word of the command line that is a relative \
path to a file where wirecheck was started is made absolute (`python3 my_agent.py` works); a \
bare program name is looked up next to wirecheck, then on PATH. The ad-hoc agent claims every \
capability unless --claims says which (e.g. --claims json,failure: the KVP, XML and \
in-progress cases are skipped) and is judged by the recommended policy.";

#[derive(Debug, Parser)]
#[command(
    name = "wirecheck",
    version = crate::build_info::BUILD,
    about = "Runs Azure provisioning agents against a fake wireserver + IMDS and judges what they send and write",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the scenarios against one or more agents and write results.json, junit.xml and
    /// report.html
    #[command(after_help = RUN_AFTER_HELP)]
    Run(Box<RunArgs>),
    /// List every case id with its title, without running anything
    List(ListArgs),
    /// Property runs: generate failure reports and in-progress descriptions, run the agent on
    /// each against a fresh fake, judge them with the scenario checks, and shrink the first
    /// failure to the smallest input that breaks the agent
    #[command(after_help = PROP_AFTER_HELP)]
    Prop(PropArgs),
    /// Inspect a Hyper-V KVP pool file
    #[command(subcommand)]
    Kvp(KvpCommand),
    /// Inspect an encoded provisioning report
    #[command(subcommand)]
    Report(ReportCommand),
    /// Check captured vectors against the fake and the oracle
    #[command(subcommand)]
    Vectors(VectorsCommand),
    /// Review regression snapshots written by `wirecheck run --snapshots DIR`
    #[command(subcommand)]
    Snapshots(SnapshotsCommand),
    /// Print the compatibility matrix of a run (agent × scenario group, verdict counts) as a
    /// markdown table
    #[command(after_help = MATRIX_AFTER_HELP)]
    Matrix {
        /// A results folder written by `wirecheck run` (or its results.json)
        results: PathBuf,
    },
    /// Merge the results of the parts of one `--partition K/N` run into one results folder
    /// (results.json, junit.xml, report.html, artifacts/)
    #[command(after_help = MERGE_AFTER_HELP)]
    Merge(MergeArgs),
    /// The built-in suite
    #[command(subcommand)]
    Scenarios(ScenariosCommand),
}

#[derive(Debug, Subcommand)]
pub enum ScenariosCommand {
    /// Write editable copies of the built-in scenarios into DIR (then `wirecheck run
    /// --scenarios DIR`); nothing is overwritten
    Export {
        /// The folder to write into (created if missing)
        dir: PathBuf,
        /// Also write the built-in agent profiles into this folder (then `--agents-dir`)
        #[arg(long, value_name = "DIR")]
        agents: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The merged results folder (must not be one of the parts)
    pub out: PathBuf,
    /// The parts: results folders (or their results.json), one per partition
    #[arg(required = true, num_args = 1..)]
    pub parts: Vec<PathBuf>,
    /// Also append a Markdown summary to FILE (e.g. "$GITHUB_STEP_SUMMARY")
    #[arg(long, value_name = "FILE", env = "WIRECHECK_SUMMARY")]
    pub summary: Option<PathBuf>,
    /// Count non-strict verdicts as failures (exit status, summary)
    #[arg(long, env = "WIRECHECK_STRICT", value_parser = env_bool())]
    pub strict: bool,
}

const MERGE_AFTER_HELP: &str = "\
Example (one CI job per part, then one that merges):
  wirecheck run --partition 1/2 --run-id \"$GITHUB_RUN_ID\" --out part-1
  wirecheck run --partition 2/2 --run-id \"$GITHUB_RUN_ID\" --out part-2
  wirecheck merge wirecheck-results part-1 part-2 --summary \"$GITHUB_STEP_SUMMARY\"

Refused, naming the part: parts of another run (other agents, cases, --snapshots or --run-id), \
of another wirecheck version or split another way, a partition given twice or missing, a case \
in two parts, a part that lost cases.

Exit status: like `wirecheck run`'s: 0 merged and no case failed; 1 merged and a case failed \
(with --strict: or was non-strict); 2 the parts cannot be merged or read, or the results \
cannot be written.";

/// Where scenarios and agent profiles are read from.
#[derive(Debug, Args)]
pub struct Sources {
    /// Folder of scenario files (*.toml, not recursive); repeatable (comma-separated in the
    /// environment), `@builtin` naming the built-in suite, e.g. `--scenarios @builtin
    /// --scenarios ./my-scenarios` [default: the checkout's scenarios/ when wirecheck runs
    /// from one (target/<profile>/wirecheck), else the built-in suite]
    #[arg(
        long,
        value_name = "DIR",
        env = "WIRECHECK_SCENARIOS",
        value_delimiter = ','
    )]
    pub scenarios: Vec<PathBuf>,
    /// Folder of agent profiles [default: the checkout's conformance/agents/ when wirecheck
    /// runs from one, else the built-in profiles]
    #[arg(long, value_name = "DIR", env = "WIRECHECK_AGENTS_DIR")]
    pub agents_dir: Option<PathBuf>,
}

/// `--scenarios @builtin`: the suite built into the binary.
pub const BUILTIN: &str = "@builtin";

/// Where profiles are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentsSource {
    Dir(PathBuf),
    Builtin,
}

impl AgentsSource {
    /// Profile `name` (or a path to a .toml file, read as such).
    pub fn find(&self, name: &str) -> Result<AgentProfile, crate::diag::FileError> {
        let path_like = name.ends_with(".toml") || name.contains('/');
        match self {
            AgentsSource::Dir(dir) => agent::find_profile(dir, name),
            AgentsSource::Builtin if path_like => agent::find_profile(Path::new("."), name),
            AgentsSource::Builtin => crate::embedded::profile(name).unwrap_or_else(|| {
                Err(crate::diag::FileError::whole(
                    Path::new(crate::embedded::ORIGIN),
                    format!(
                        "no agent profile named {name:?} (built in: {}; --agents-dir DIR reads a folder of them)",
                        crate::embedded::profile_names().join(", ")
                    ),
                ))
            }),
        }
    }
}

/// An ad-hoc agent given on the command line (`run` and `prop` share it).
#[derive(Debug, Clone, Args)]
pub struct AdHocArgs {
    /// An ad-hoc agent: a command line template for every action (`wirecheck run --help`
    /// lists its placeholders)
    #[arg(long, value_name = "TEMPLATE", env = "WIRECHECK_AGENT_CMD")]
    pub agent_cmd: Option<String>,
    /// With --agent-cmd: what the ad-hoc agent implements (json, xml, failure, in-progress,
    /// kvp; comma-separated or repeated); cases needing anything else are skipped, saying so
    /// [default: all of them]
    #[arg(
        long,
        value_enum,
        value_name = "CAPABILITY",
        env = "WIRECHECK_CLAIMS",
        value_delimiter = ',',
        requires = "agent_cmd",
        hide_possible_values = true
    )]
    pub claims: Vec<crate::agent::Capability>,
}

impl AdHocArgs {
    /// The ad-hoc agent's profile, when `--agent-cmd` was given; relative paths resolve
    /// against where wirecheck was started.
    pub fn profile(&self) -> Option<Result<AgentProfile, String>> {
        let cmd = self.agent_cmd.as_ref()?;
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Some(AgentProfile::ad_hoc(cmd, &self.claims, &cwd))
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Agent profile to run (repeatable; comma-separated in the environment)
    /// [default: provision-report]
    #[arg(
        long = "agent",
        value_name = "NAME",
        env = "WIRECHECK_AGENT",
        value_delimiter = ','
    )]
    pub agents: Vec<String>,
    #[command(flatten)]
    pub ad_hoc: AdHocArgs,
    #[command(flatten)]
    pub sources: Sources,
    /// Run only cases whose id matches this glob (repeatable; `{a,b}` alternation works)
    #[arg(long = "cases", value_name = "GLOB", env = "WIRECHECK_CASES")]
    pub cases: Vec<String>,
    /// Leave out cases whose id matches this glob (repeatable)
    #[arg(long = "exclude", value_name = "GLOB", env = "WIRECHECK_EXCLUDE")]
    pub exclude: Vec<String>,
    /// Results folder (results.json, junit.xml, report.html, artifacts/)
    #[arg(
        long,
        value_name = "DIR",
        env = "WIRECHECK_OUT",
        default_value = "wirecheck-results"
    )]
    pub out: PathBuf,
    /// Scenarios run at the same time [default: 8 per core, at most 64]
    #[arg(long, value_name = "N", env = "WIRECHECK_JOBS",
          value_parser = clap::value_parser!(u16).range(1..=512))]
    pub jobs: Option<u16>,
    /// Run only partition K of N (scenarios split deterministically by id), e.g. 2/4
    #[arg(long, value_name = "K/N", env = "WIRECHECK_PARTITION")]
    pub partition: Option<Partition>,
    /// Count non-strict verdicts as failures
    #[arg(long, env = "WIRECHECK_STRICT", value_parser = env_bool())]
    pub strict: bool,
    /// No progress bar
    #[arg(long, env = "WIRECHECK_QUIET", value_parser = env_bool())]
    pub quiet: bool,
    /// Compare each (agent, scenario)'s transcript with DIR/<agent>/<scenario id>.snap; a
    /// mismatch fails case `<scenario id>.snapshot.transcript` and writes a `.snap.new`
    #[arg(long, value_name = "DIR", env = "WIRECHECK_SNAPSHOTS")]
    pub snapshots: Option<PathBuf>,
    /// With --snapshots: a missing snapshot fails too (for CI)
    #[arg(long, env = "WIRECHECK_SNAPSHOTS_STRICT", requires = "snapshots", value_parser = env_bool())]
    pub snapshots_strict: bool,
    /// With --snapshots: what to do with snapshots of the agents run whose scenario no longer
    /// exists: name them (warn), fail the run (reject), or say nothing (ignore)
    #[arg(
        long,
        value_enum,
        value_name = "WHAT",
        env = "WIRECHECK_UNREFERENCED",
        default_value = "warn",
        requires = "snapshots"
    )]
    pub unreferenced: Unreferenced,
    /// Also append a Markdown summary of the run to FILE (e.g. "$GITHUB_STEP_SUMMARY")
    #[arg(long, value_name = "FILE", env = "WIRECHECK_SUMMARY")]
    pub summary: Option<PathBuf>,
    /// Names this run in results.json, so `wirecheck merge` refuses parts of another run with
    /// the same plan (e.g. the CI's run number)
    #[arg(long, value_name = "ID", env = "WIRECHECK_RUN_ID")]
    pub run_id: Option<String>,
    /// Print the effective configuration (flags, WIRECHECK_* variables and defaults merged:
    /// the agents with their programs, the scenario sources, the plan) as TOML and exit
    #[arg(long)]
    pub print_config: bool,
}

/// `--unreferenced`: snapshots whose scenario is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Unreferenced {
    Ignore,
    Warn,
    Reject,
}

#[derive(Debug, Subcommand)]
pub enum SnapshotsCommand {
    /// Show each pending snapshot's diff and ask: accept, reject or skip (a terminal only)
    Review {
        /// The snapshots folder given to `wirecheck run --snapshots`
        dir: PathBuf,
    },
    /// Accept pending snapshots (all, or those whose `<agent>/<scenario id>` matches a glob)
    Accept {
        dir: PathBuf,
        #[arg(long = "cases", value_name = "GLOB")]
        cases: Vec<String>,
    },
    /// Drop pending snapshots (all, or those whose `<agent>/<scenario id>` matches a glob)
    Reject {
        dir: PathBuf,
        #[arg(long = "cases", value_name = "GLOB")]
        cases: Vec<String>,
    },
    /// List pending snapshots with their diffs; exit status 1 when there are any (for CI)
    Pending { dir: PathBuf },
}

const PROP_AFTER_HELP: &str = "\
Properties: failure.json, failure.xml (a failure report: reason and supporting data), \
in-progress.json, in-progress.xml (an in-progress description). Each generated input runs as \
case prop.<property> through the scenario checks protocol.*, report.*, kvp.*, \
behaviour.terminal and behaviour.exit; properties needing a capability the agent does not \
claim are skipped.

A failure is shrunk (proptest) to the smallest input that still fails the same way; it is \
printed with the check that failed, its evidence and a command that replays exactly that \
input (--input), and appended to the regression file, whose inputs are run first next time. \
--seed replays a whole run. A profile's [[limitation]]s (see provision-report.toml) turn a \
failure they cover into non-strict or unimplemented, with the smallest input that shows it.

Exit status: 0 no property failed; 1 one failed (with --strict: or was non-strict); 2 usage \
error, bad input, or nothing could be judged (every property skipped, a harness error).";

#[derive(Debug, Args)]
pub struct PropArgs {
    /// Agent profile [default: provision-report]
    #[arg(
        long,
        value_name = "NAME",
        env = "WIRECHECK_AGENT",
        conflicts_with = "agent_cmd"
    )]
    pub agent: Option<String>,
    #[command(flatten)]
    pub ad_hoc: AdHocArgs,
    /// Folder of agent profiles [default: the checkout's conformance/agents/ when wirecheck
    /// runs from one, else the built-in profiles]
    #[arg(long, value_name = "DIR", env = "WIRECHECK_AGENTS_DIR")]
    pub agents_dir: Option<PathBuf>,
    /// Property to check (repeatable) [default: all the agent's capabilities allow]
    #[arg(
        long = "property",
        value_name = "NAME",
        env = "WIRECHECK_PROPERTY",
        value_delimiter = ','
    )]
    pub properties: Vec<String>,
    /// Generated inputs per property
    #[arg(long, value_name = "N", env = "WIRECHECK_PROP_CASES", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cases: u32,
    /// Seed of the generator (printed by every run) [default: random]
    #[arg(long, value_name = "N", env = "WIRECHECK_PROP_SEED")]
    pub seed: Option<u64>,
    /// Seconds spent at most shrinking a failure (the smallest failing input so far is kept)
    #[arg(long, value_name = "SECONDS", env = "WIRECHECK_MAX_SHRINK_TIME", default_value_t = 60,
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub max_shrink_time: u32,
    /// Generated cases run at the same time (shrinking runs one at a time)
    #[arg(long, value_name = "N", env = "WIRECHECK_JOBS", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=512))]
    pub jobs: u16,
    /// Run exactly this input (JSON, as printed by a failure) once instead of generating;
    /// needs one --property
    #[arg(long, value_name = "JSON")]
    pub input: Option<String>,
    /// The regression file [default: wirecheck-prop-regressions/<agent>.txt]
    #[arg(long, value_name = "FILE", env = "WIRECHECK_PROP_REGRESSIONS")]
    pub regressions: Option<PathBuf>,
    /// Neither replay nor write the regression file
    #[arg(long, conflicts_with = "regressions")]
    pub no_regressions: bool,
    /// Results folder (results.json, junit.xml, report.html, artifacts/)
    #[arg(
        long,
        value_name = "DIR",
        env = "WIRECHECK_OUT",
        default_value = "wirecheck-results"
    )]
    pub out: PathBuf,
    /// Count non-strict verdicts as failures
    #[arg(long, env = "WIRECHECK_STRICT")]
    pub strict: bool,
    /// No progress bar
    #[arg(long, env = "WIRECHECK_QUIET")]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Show how this agent's profile affects each case (skipped, known deviations)
    #[arg(long = "agent", value_name = "NAME", env = "WIRECHECK_AGENT")]
    pub agent: Option<String>,
    #[command(flatten)]
    pub sources: Sources,
}

const MATRIX_AFTER_HELP: &str = "\
Example: wirecheck run --agent cloud-init --agent afterburn && wirecheck matrix wirecheck-results/results.json

Exit status: 0 the table was printed; 2 the file cannot be read or is not a results.json \
(schema version 1).";

const TOOL_AFTER_HELP: &str = "\
Exit status: 0 the input was read and is in order; 1 it has problems (error findings, \
mismatches); 2 it could not be used at all (missing file, wrong kind of input).";

#[derive(Debug, Subcommand)]
pub enum KvpCommand {
    /// Decode a pool file as the Azure host reads it, with findings
    #[command(after_help = TOOL_AFTER_HELP)]
    Dump {
        /// The pool file (e.g. /var/lib/hyperv/.kvp_pool_1)
        file: PathBuf,
        /// Machine-readable output
        #[arg(long, env = "WIRECHECK_JSON", value_parser = env_bool())]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Parse an encoded report (`result=error|reason=...`) in either dialect, with findings
    #[command(after_help = TOOL_AFTER_HELP)]
    Parse {
        /// The encoded report
        string: String,
        /// Machine-readable output
        #[arg(long, env = "WIRECHECK_JSON", value_parser = env_bool())]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum VectorsCommand {
    /// Replay captured vectors through the fake and the oracle and compare
    #[command(after_help = TOOL_AFTER_HELP)]
    Check {
        /// The vectors folder (e.g. testdata/vectors)
        dir: PathBuf,
    },
}

/// Runs a parsed command line; returns the process exit status.
pub fn dispatch(cli: Cli) -> ExitCode {
    let code = match cli.command {
        Command::Run(args) => run(*args),
        Command::Prop(args) => prop(args),
        Command::Snapshots(command) => snapshots(command),
        Command::List(args) => list(args),
        Command::Kvp(KvpCommand::Dump { file, json }) => {
            tool(crate::tools::emit(crate::tools::kvp_dump(&file, json)))
        }
        Command::Report(ReportCommand::Parse { string, json }) => tool(crate::tools::emit(
            crate::tools::report_parse(&string, json),
        )),
        Command::Vectors(VectorsCommand::Check { dir }) => tool(crate::tools::emit(
            crate::tools::vectors_check_blocking(&dir),
        )),
        Command::Matrix { results } => tool(crate::tools::emit(crate::tools::matrix(&results))),
        Command::Merge(args) => merge(args),
        Command::Scenarios(ScenariosCommand::Export { dir, agents }) => {
            match crate::embedded::export(&dir, agents.as_deref()) {
                Ok(written) => {
                    crate::tools::write_stdout(&format!(
                        "{} file(s) written to {}{}\n",
                        written.len(),
                        dir.display(),
                        agents
                            .as_ref()
                            .map(|a| format!(" and {}", a.display()))
                            .unwrap_or_default()
                    ));
                    EXIT_OK
                }
                Err(e) => usage(e),
            }
        }
    };
    ExitCode::from(code)
}

/// The `WIRECHECK_*` twin of a boolean flag accepts `1`/`0`, `true`/`false`, `yes`/`no`,
/// `on`/`off` (any case), and an empty value (`WIRECHECK_STRICT=`, common in CI files) as
/// false; anything else is an error.
fn env_bool() -> fn(&str) -> Result<bool, String> {
    parse_bool
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Ok(true),
        "" | "0" | "false" | "no" | "off" | "n" => Ok(false),
        _ => Err(format!(
            "expected 1/0, true/false, yes/no or on/off (empty: false), got {value:?}"
        )),
    }
}

fn tool(code: i32) -> u8 {
    u8::try_from(code).unwrap_or(EXIT_USAGE)
}

fn usage(message: impl std::fmt::Display) -> u8 {
    eprintln!(
        "wirecheck: error: {}",
        crate::tools::text::visible_lines(&message.to_string())
    );
    EXIT_USAGE
}

/// The folder of the running executable (bundled agents live beside it).
pub fn bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The wirecheck checkout the executable was built in (`target/<profile>/wirecheck` →
/// `../..`), recognized by its `conformance/Cargo.toml`: there the files on disk win over the
/// built-in copies, so an edit shows without a rebuild. An installed binary has none (an
/// install folder's `../..` is someone's home, never taken for a checkout).
fn checkout() -> Option<PathBuf> {
    let root = bin_dir().join("../..").canonicalize().ok()?;
    (root.join("conformance/Cargo.toml").is_file()
        && root.join("scenarios").is_dir()
        && root.join("conformance/agents").is_dir())
    .then_some(root)
}

impl Sources {
    /// The scenario folders, `None` standing for the built-in suite.
    pub fn scenario_sources(&self) -> Vec<Option<PathBuf>> {
        if self.scenarios.is_empty() {
            return vec![checkout().map(|c| c.join("scenarios"))];
        }
        self.scenarios
            .iter()
            .map(|p| (p.as_os_str() != BUILTIN).then(|| p.clone()))
            .collect()
    }

    pub fn agents_source(&self) -> AgentsSource {
        agents_source(self.agents_dir.as_ref())
    }
}

/// `--agents-dir DIR`, else the checkout's `conformance/agents/`, else the built-in profiles.
fn agents_source(agents_dir: Option<&PathBuf>) -> AgentsSource {
    match (agents_dir, checkout()) {
        (Some(dir), _) => AgentsSource::Dir(dir.clone()),
        (None, Some(root)) => AgentsSource::Dir(root.join("conformance/agents")),
        (None, None) => AgentsSource::Builtin,
    }
}

/// Every scenario of every source, ids unique across them (the error names both files).
fn load_scenarios(sources: &Sources) -> Result<Vec<Arc<Scenario>>, u8> {
    let mut all: Vec<Arc<Scenario>> = Vec::new();
    for source in sources.scenario_sources() {
        let loaded = match &source {
            Some(dir) => scenario::load_dir(dir),
            None => crate::embedded::scenarios(),
        }
        .map_err(usage)?;
        for s in loaded {
            if let Some(other) = all.iter().find(|o| o.id == s.id) {
                return Err(usage(format!(
                    "{}: field `id`: {:?} is already used by {}; case ids must be unique across --scenarios folders",
                    s.file.display(),
                    s.id,
                    other.file.display()
                )));
            }
            all.push(Arc::new(s));
        }
    }
    Ok(all)
}

fn run(args: RunArgs) -> u8 {
    let agents = args.sources.agents_source();
    let mut profiles: Vec<Arc<AgentProfile>> = Vec::new();
    let names: Vec<String> = if args.agents.is_empty() && args.ad_hoc.agent_cmd.is_none() {
        vec![DEFAULT_AGENT.to_owned()]
    } else {
        args.agents.clone()
    };
    for name in &names {
        match agents.find(name) {
            Ok(p) => profiles.push(Arc::new(p)),
            Err(e) => return usage(e),
        }
    }
    match args.ad_hoc.profile() {
        Some(Ok(p)) => profiles.push(Arc::new(p)),
        Some(Err(e)) => return usage(e),
        None => {}
    }
    for (i, p) in profiles.iter().enumerate() {
        if profiles[..i].iter().any(|q| q.name == p.name) {
            return usage(format!("agent {:?} is given twice", p.name));
        }
    }
    let scenarios = match load_scenarios(&args.sources) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let filter = match CaseFilter::new(&args.cases, &args.exclude) {
        Ok(f) => f,
        Err(e) => return usage(e),
    };
    let planned = runner::plan(&profiles, &scenarios, &filter, args.partition);
    if args.print_config {
        return match crate::run_config::render(&args, &profiles, &scenarios, &planned, &bin_dir()) {
            Ok(text) => {
                crate::tools::write_stdout(&text);
                EXIT_OK
            }
            Err(e) => usage(e),
        };
    }
    if planned.is_empty() {
        return usage(
            "no case matches --cases / --exclude / --partition; `wirecheck list` shows the case ids",
        );
    }
    let bin_dir = bin_dir();
    if let Err(e) = runner::preflight(&planned, &bin_dir) {
        return usage(e);
    }
    // Before any case runs: a snapshots folder that is a file, or cannot be written, is the
    // user's to fix, not a verdict.
    let snapshots = match &args.snapshots {
        Some(dir) => match crate::snapshot::store::prepare(dir) {
            Ok(()) => Some(runner::SnapshotSettings {
                dir: dir.clone(),
                strict: args.snapshots_strict,
                filter: filter.clone(),
            }),
            Err(e) => return usage(e),
        },
        None => None,
    };
    let settings = RunSettings {
        out: args.out.clone(),
        jobs: args.jobs.map_or_else(runner::default_jobs, usize::from),
        bin_dir,
        progress: !args.quiet,
        stop: None,
        case_root: None,
        cases_parent: None,
        snapshots: snapshots.clone(),
        starts: runner::StartWatch::default(),
        artifacts: true,
    };
    let run_info = run_info(&profiles, &scenarios, &filter, &args);
    let mut results = match runner::run(planned, &settings) {
        Ok(r) => r,
        Err(e) => return usage(format!("cannot start the runtime: {e}")),
    };
    results.run = Some(run_info);
    results.never_started = settings
        .starts
        .never_started()
        .iter()
        .map(|n| crate::results::NeverStartedAgent {
            agent: n.agent.clone(),
            message: n.to_string(),
        })
        .collect();
    if let Err(e) = crate::results::write_all(&args.out, &results) {
        return usage(format!("cannot write the results: {e}"));
    }
    if let Some(path) = &args.summary
        && let Err(e) = crate::results::summary::append(path, &results, args.strict)
    {
        return usage(format!("cannot write the summary {}: {e}", path.display()));
    }
    let color = crate::console::colors_enabled(std::io::stdout().is_terminal());
    crate::tools::write_stdout(&crate::console::summary(
        &results,
        &args.out,
        args.strict,
        color,
    ));
    let mut unreferenced_failed = false;
    if let Some(snapshots) = &snapshots {
        print_snapshot_diffs(&results);
        let orphans = match orphaned_snapshots(&snapshots.dir, &profiles, &scenarios) {
            Ok(o) => o,
            Err(e) => return usage(e),
        };
        if args.unreferenced != Unreferenced::Ignore {
            for orphan in &orphans {
                eprintln!(
                    "wirecheck: {}: snapshot of a scenario that no longer exists: {}",
                    if args.unreferenced == Unreferenced::Reject {
                        "error"
                    } else {
                        "warning"
                    },
                    orphan.snap.display()
                );
            }
        }
        unreferenced_failed = args.unreferenced == Unreferenced::Reject && !orphans.is_empty();
    }
    let outcome = crate::results::outcome::Outcome::of(&results, args.strict);
    report_outcome(&outcome, &args.out);
    match outcome {
        crate::results::outcome::Outcome::Passed if unreferenced_failed => EXIT_FAILED,
        o => o.exit_status(),
    }
}

/// Says on stderr why a run did not end with its verdicts: interrupted, or not judged.
fn report_outcome(outcome: &crate::results::outcome::Outcome, out: &Path) {
    use crate::results::outcome::Outcome;
    match outcome {
        Outcome::Interrupted(signal) => eprintln!(
            "wirecheck: interrupted ({signal}): every agent was stopped; the results in {} are partial",
            out.display()
        ),
        Outcome::NotJudged(messages) => {
            for m in messages {
                eprintln!("wirecheck: error: {}", crate::tools::text::visible_lines(m));
            }
        }
        Outcome::Failed | Outcome::Passed => {}
    }
}

/// What `wirecheck merge` needs to tell this run's parts from another's: the fingerprint of
/// the whole plan (every partition), its case count, this part.
fn run_info(
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
    filter: &CaseFilter,
    args: &RunArgs,
) -> crate::results::RunInfo {
    let whole = runner::plan(profiles, scenarios, filter, None);
    let cases: Vec<(&str, String)> = whole
        .iter()
        .flat_map(|p| {
            p.checks
                .iter()
                .map(|c| (p.profile.name.as_str(), p.scenario.case_id(*c)))
        })
        .collect();
    crate::results::RunInfo {
        id: args.run_id.clone(),
        plan_cases: cases.len(),
        plan: crate::results::merge::plan_fingerprint(
            env!("CARGO_PKG_VERSION"),
            args.snapshots.is_some(),
            cases,
            profiles
                .iter()
                .map(|p| profile_content(p))
                .chain(scenarios.iter().map(|s| scenario_content(s))),
        ),
        partition: args
            .partition
            .map_or(crate::results::PartInfo { k: 1, n: 1 }, |p| {
                crate::results::PartInfo { k: p.k, n: p.n }
            }),
    }
}

/// What a profile makes the agent do and how it is judged (its commands, environment,
/// claims, reactions, exit statuses, declarations), not where it was read from: parts run
/// from two checkouts of the same profile are one run, parts of two different agents that
/// share a name are not.
fn profile_content(p: &AgentProfile) -> String {
    format!(
        "profile {}: {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        p.name,
        p.attach,
        p.commands,
        p.env,
        p.capabilities,
        p.reactions,
        p.exit,
        p.done,
        p.deviations,
        p.limitations,
        p.encoded,
        p.failure_description,
    )
}

/// What a scenario asks of the agent and the fake, not the file it came from.
fn scenario_content(s: &Scenario) -> String {
    let mut fake = s.fake.clone();
    fake.origin.clear();
    let checks: Vec<&str> = s.checks.iter().map(|c| c.as_str()).collect();
    format!(
        "scenario {}: {:?} {:?} {:?} {:?}",
        s.id, s.agent, s.expect, checks, fake
    )
}

fn merge(args: MergeArgs) -> u8 {
    use crate::results::merge;
    let mut parts = Vec::new();
    for path in &args.parts {
        match merge::read_part(path) {
            Ok(p) => parts.push(p),
            Err(e) => return usage(e),
        }
    }
    let results = match merge::check_out(&args.out, &parts).and_then(|()| merge::merge(&parts)) {
        Ok(r) => r,
        Err(e) => return usage(e),
    };
    if let Err(e) = merge::copy_artifacts(&args.out, &parts) {
        return usage(e);
    }
    if let Err(e) = crate::results::write_all(&args.out, &results) {
        return usage(format!("cannot write the results: {e}"));
    }
    if let Some(path) = &args.summary
        && let Err(e) = crate::results::summary::append(path, &results, args.strict)
    {
        return usage(format!("cannot write the summary {}: {e}", path.display()));
    }
    let color = crate::console::colors_enabled(std::io::stdout().is_terminal());
    crate::tools::write_stdout(&crate::console::summary(
        &results,
        &args.out,
        args.strict,
        color,
    ));
    // The parts' own ends carry over: an interrupted or unjudged part is not a green merge.
    let outcome = crate::results::outcome::Outcome::of(&results, args.strict);
    report_outcome(&outcome, &args.out);
    outcome.exit_status()
}

fn prop(args: PropArgs) -> u8 {
    use crate::prop::{self, Property};
    let profile = args.ad_hoc.profile().unwrap_or_else(|| {
        agents_source(args.agents_dir.as_ref())
            .find(args.agent.as_deref().unwrap_or(DEFAULT_AGENT))
            .map_err(|e| e.to_string())
    });
    let profile = match profile {
        Ok(p) => Arc::new(p),
        Err(e) => return usage(e),
    };
    let mut properties = Vec::new();
    for name in &args.properties {
        match Property::from_name(name) {
            Some(p) if !properties.contains(&p) => properties.push(p),
            Some(_) => {}
            None => {
                return usage(format!(
                    "--property {name:?}: unknown; the properties are {}",
                    Property::names()
                ));
            }
        }
    }
    if properties.is_empty() {
        properties = Property::ALL.to_vec();
    }
    let input = match &args.input {
        Some(text) => {
            if args.properties.len() != 1 {
                return usage("--input needs exactly one --property (the one the input is for)");
            }
            match prop::Input::from_json(text) {
                Ok(i) => match i.fits(properties[0]) {
                    Ok(()) => Some(i),
                    Err(e) => return usage(format!("--input: {e}")),
                },
                Err(e) => return usage(format!("--input: {e}")),
            }
        }
        None => None,
    };
    let regressions = if args.no_regressions {
        None
    } else {
        Some(
            args.regressions
                .clone()
                .unwrap_or_else(|| prop::regressions::default_path(&profile.name)),
        )
    };
    if let Some(path) = &regressions
        && let Err(e) = prop::regressions::load(path)
    {
        return usage(e);
    }
    let bin_dir = bin_dir();
    for p in &properties {
        let probe = prop::search::planned(&profile, *p, &prop::strategy_probe_input(*p));
        if runner::not_run(&probe, &bin_dir).is_none()
            && let Err(e) = runner::check_command(&profile, p.action(), &bin_dir)
        {
            return usage(e);
        }
    }
    let seed = args.seed.unwrap_or_else(random_seed);
    let mut replay_prefix = String::from("wirecheck prop");
    match (&args.agent, &args.ad_hoc.agent_cmd) {
        (_, Some(cmd)) => {
            replay_prefix.push_str(&format!(" --agent-cmd {}", prop::input::shell_quote(cmd)));
            // What the ad-hoc agent claims decides which checks judge it: the replay says so too.
            if !args.ad_hoc.claims.is_empty() {
                let claims: Vec<&str> = args.ad_hoc.claims.iter().map(|c| c.as_str()).collect();
                replay_prefix.push_str(&format!(" --claims {}", claims.join(",")));
            }
        }
        (Some(name), None) => {
            replay_prefix.push_str(&format!(" --agent {}", prop::input::shell_quote(name)))
        }
        (None, None) => {}
    }
    if let Some(dir) = &args.agents_dir {
        replay_prefix.push_str(&format!(
            " --agents-dir {}",
            prop::input::shell_quote(&dir.display().to_string())
        ));
    }
    let settings = prop::PropSettings {
        cases: args.cases,
        seed,
        max_shrink_time: std::time::Duration::from_secs(u64::from(args.max_shrink_time)),
        jobs: usize::from(args.jobs),
        regressions,
        input,
        replay_prefix,
        progress: !args.quiet,
    };
    let run_settings = RunSettings {
        out: args.out.clone(),
        jobs: settings.jobs,
        bin_dir,
        progress: false,
        stop: None,
        case_root: None,
        cases_parent: None,
        snapshots: None,
        starts: runner::StartWatch::default(),
        artifacts: false,
    };
    let started_wall = chrono::Utc::now();
    let started = std::time::Instant::now();
    let in_process = profile.attach != agent::Attach::Sandbox;
    let pair_runner = match runner::PairRunner::start(&run_settings, in_process) {
        Ok(r) => r,
        Err(e) => return usage(format!("cannot start the runtime: {e}")),
    };
    eprintln!(
        "wirecheck prop: agent {}, seed {seed}, {} case(s) per property",
        visible_name(&profile.name),
        settings.cases
    );
    let bar = prop_progress(
        settings.progress,
        u64::from(settings.cases) * properties.len() as u64,
    );
    let mut cases = Vec::new();
    let mut reports = Vec::new();
    for p in &properties {
        bar.set_message(p.name());
        let report = prop::run_property(&pair_runner, &profile, *p, &settings, &bar);
        let case = prop::case_result(&report, &profile, &settings);
        bar.suspend(|| print!("{}", prop::describe(&report, &case)));
        cases.push(case);
        reports.push(report);
    }
    bar.finish_and_clear();
    let interrupted = pair_runner.interrupted();
    let uncontained = pair_runner.uncontained().map(str::to_owned);
    pair_runner.finish();
    let mut results = crate::results::RunResults::of_this_build(
        started_wall.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    );
    results.duration_ms = started.elapsed().as_millis() as u64;
    results.interrupted = interrupted.map(|s| runner::signal_name(s).to_owned());
    results.uncontained = uncontained;
    results.agents = vec![crate::results::AgentResults {
        agent: profile.name.clone(),
        cases,
    }];
    if let Err(e) = crate::results::write_all(&args.out, &results) {
        return usage(format!("cannot write the results: {e}"));
    }
    println!(
        "results: {} (seed {seed}: `--seed {seed}` generates the same inputs again)",
        args.out.display()
    );
    if let Some(signal) = &results.interrupted {
        eprintln!("wirecheck: interrupted ({signal}): the results are partial");
        return runner::interrupted_exit_status(signal);
    }
    let harness = reports
        .iter()
        .filter(|r| {
            r.skipped
                .as_ref()
                .is_some_and(crate::disposition::NotRun::is_harness_error)
        })
        .count();
    if harness > 0 {
        return usage(format!(
            "{harness} propert(y/ies) could not be run because of a harness error (see above)"
        ));
    }
    if reports.iter().all(|r| r.skipped.is_some()) {
        return usage(format!(
            "every property was skipped for agent {}, so nothing was judged",
            visible_name(&profile.name)
        ));
    }
    if results.exit_code(args.strict) == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

fn visible_name(name: &str) -> String {
    crate::tools::text::visible(name)
}

/// A seed from the clock and the process id (not cryptographic: it only varies the inputs).
fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos ^ (u64::from(std::process::id()) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The property run's progress bar (stderr, terminals only; hidden otherwise).
fn prop_progress(enabled: bool, total: u64) -> indicatif::ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} generated cases {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// The diff of every snapshot case that failed, after the summary (escaped: agent text).
fn print_snapshot_diffs(results: &crate::results::RunResults) {
    let suffix = format!(".{}", crate::snapshot::CHECK_ID);
    for agent in &results.agents {
        for case in &agent.cases {
            if case.id.ends_with(&suffix) && case.verdict == crate::results::Verdict::Fail {
                println!(
                    "\n{} / {}: {}",
                    agent.agent,
                    case.id,
                    crate::tools::text::visible(case.reason.as_deref().unwrap_or_default())
                );
                for e in &case.evidence {
                    if let Some(excerpt) = &e.excerpt {
                        println!("{}", crate::tools::text::visible_lines(excerpt));
                    }
                }
            }
        }
    }
}

/// Accepted snapshots of the agents run whose scenario is not among the loaded ones.
fn orphaned_snapshots(
    dir: &Path,
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
) -> Result<Vec<crate::snapshot::store::Found>, String> {
    Ok(crate::snapshot::store::list(dir)?
        .into_iter()
        .filter(|f| !f.pending)
        .filter(|f| profiles.iter().any(|p| p.name == f.agent))
        .filter(|f| !scenarios.iter().any(|s| s.id == f.scenario))
        .collect())
}

fn snapshots(command: SnapshotsCommand) -> u8 {
    use crate::snapshot::store;
    let pending_in = |dir: &Path, cases: &[String]| -> Result<Vec<store::Found>, String> {
        let globs = cases
            .iter()
            .map(|c| crate::select::matcher(c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(store::list(dir)?
            .into_iter()
            .filter(|f| f.pending)
            .filter(|f| globs.is_empty() || globs.iter().any(|g| g.is_match(&f.name)))
            .collect())
    };
    let result = (|| -> Result<u8, String> {
        match command {
            SnapshotsCommand::Pending { dir } => {
                let pending = pending_in(&dir, &[])?;
                for f in &pending {
                    println!(
                        "{}\n{}",
                        f.name,
                        crate::tools::text::visible_lines(&store::pending_diff(f)?)
                    );
                }
                println!("{} pending snapshot(s) in {}", pending.len(), dir.display());
                Ok(if pending.is_empty() {
                    EXIT_OK
                } else {
                    EXIT_FAILED
                })
            }
            SnapshotsCommand::Accept { dir, cases } => {
                let pending = pending_in(&dir, &cases)?;
                // All or none: a corrupt or misplaced one stops the accept before any rename.
                for f in &pending {
                    store::check_pending(f)?;
                }
                for f in &pending {
                    store::accept(f)?;
                    println!("accepted {}", f.name);
                }
                println!("{} snapshot(s) accepted", pending.len());
                Ok(EXIT_OK)
            }
            SnapshotsCommand::Reject { dir, cases } => {
                let pending = pending_in(&dir, &cases)?;
                for f in &pending {
                    store::reject(f)?;
                    println!("rejected {}", f.name);
                }
                println!("{} snapshot(s) rejected", pending.len());
                Ok(EXIT_OK)
            }
            SnapshotsCommand::Review { dir } => {
                if !std::io::stdin().is_terminal() {
                    return Err("`wirecheck snapshots review` asks on a terminal; without one, use `wirecheck snapshots pending`, `accept` or `reject`".into());
                }
                let pending = pending_in(&dir, &[])?;
                let (mut accepted, mut rejected, mut skipped) = (0, 0, 0);
                for f in &pending {
                    println!(
                        "{}\n{}",
                        f.name,
                        crate::tools::text::visible_lines(&store::pending_diff(f)?)
                    );
                    loop {
                        print!("[a]ccept, [r]eject, [s]kip? ");
                        std::io::Write::flush(&mut std::io::stdout()).map_err(|e| e.to_string())?;
                        let mut answer = String::new();
                        if std::io::stdin()
                            .read_line(&mut answer)
                            .map_err(|e| e.to_string())?
                            == 0
                        {
                            return Err(
                                "the terminal closed before every snapshot was reviewed".into()
                            );
                        }
                        match answer.trim() {
                            "a" | "accept" => {
                                store::accept(f)?;
                                accepted += 1;
                                break;
                            }
                            "r" | "reject" => {
                                store::reject(f)?;
                                rejected += 1;
                                break;
                            }
                            "s" | "skip" => {
                                skipped += 1;
                                break;
                            }
                            _ => continue,
                        }
                    }
                }
                println!("{accepted} accepted, {rejected} rejected, {skipped} skipped");
                Ok(EXIT_OK)
            }
        }
    })();
    match result {
        Ok(code) => code,
        Err(e) => usage(e),
    }
}

fn list(args: ListArgs) -> u8 {
    let scenarios = match load_scenarios(&args.sources) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let profile = match &args.agent {
        Some(name) => match args.sources.agents_source().find(name) {
            Ok(p) => Some(Arc::new(p)),
            Err(e) => return usage(e),
        },
        None => None,
    };
    crate::tools::write_stdout(&list_text(&scenarios, profile.as_ref()));
    EXIT_OK
}

/// `wirecheck list`: one line per case, `id  title`, plus with an agent what its profile makes
/// of the case.
pub fn list_text(scenarios: &[Arc<Scenario>], profile: Option<&Arc<AgentProfile>>) -> String {
    let mut ordered: Vec<&Arc<Scenario>> = scenarios.iter().collect();
    ordered.sort_by(|a, b| a.id.cmp(&b.id));
    let rows: Vec<(String, String, Option<String>)> = ordered
        .iter()
        .flat_map(|s| {
            s.checks.iter().map(move |c: &CheckId| {
                let c = *c;
                let id = s.case_id(c);
                let status = profile.and_then(|p| case_status(p, s, c, &id));
                (id, runner::case_title(s, c), status)
            })
        })
        .collect();
    // Ids, titles and profile reasons are someone else's text: escaped for the terminal.
    let visible = crate::tools::text::visible;
    let width = rows
        .iter()
        .map(|(id, _, _)| visible(id).chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (id, title, status) in &rows {
        out.push_str(&format!("{:<width$}  {}", visible(id), visible(title)));
        if let Some(status) = status {
            out.push_str(&format!("  [{}]", visible(status)));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "{} cases in {} scenarios\n",
        rows.len(),
        scenarios.len()
    ));
    out
}

fn case_status(
    profile: &Arc<AgentProfile>,
    s: &Arc<Scenario>,
    c: CheckId,
    id: &str,
) -> Option<String> {
    let planned = Planned {
        profile: Arc::clone(profile),
        scenario: Arc::clone(s),
        checks: vec![],
    };
    // As `run` decides it, but for whether this machine can run the attach mode.
    crate::disposition::Disposition::of_case(
        profile,
        id,
        runner::skip_reason(&planned),
        crate::checks::get(c).needs,
    )
    .list_status()
}
