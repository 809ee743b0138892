//! The `wirecheck` command line's flags and subcommands (clap derive), with their help texts.
//! Every flag has a `WIRECHECK_*` environment equivalent. `main.rs` parses, `dispatch` runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use conformance::agent::{AgentProfile, Capability};
use conformance::select::Partition;

/// The bundled reporter, run when no agent is named.
pub const DEFAULT_AGENT: &str = "provision-report";

const RUN_AFTER_HELP: &str = "\
Exit status: 0 no case failed; 1 at least one case failed (with --strict: or was non-strict); \
2 usage error or bad input (a profile, a scenario, a missing agent command), a case that \
could not be run because wirecheck's own fake or sandbox failed, an agent none of whose \
cases was judged (a verdict from observing it: pass, non-strict, fail or informational; \
skipped cases and the `unimplemented` its profile declares do not count), or an agent that never got going (in none of its scenarios \
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
{retry_interval}, {proxy_url}, {bin_dir}, {case_dir}) are filled in per case; one without a \
value in a case ({reason} but in failure reports, {description}, {vm_id} when the agent must \
ask IMDS) is an empty word. {data} is one word per KEY=VALUE item of a failure report (none \
when there are none). Words in unquoted square brackets are an optional group, dropped when a \
placeholder in it has no value and repeated per {data} item: `[--data {data}]` gives `--data \
a=1 --data b=2` or nothing, `[--reason {reason}]` appears only in failure reports. Every value \
is also in the agent's environment as WIRECHECK_CASE_<NAME> (WIRECHECK_CASE_DATA: KEY=VALUE \
lines). Agents run inside their case folder: a word of the command line that is a relative \
path to a file where wirecheck was started is made absolute (`python3 my_agent.py` works); a \
bare program name is looked up next to wirecheck, then on PATH. The ad-hoc agent claims every \
capability unless --claims says which (e.g. --claims json,failure: the KVP, XML and \
in-progress cases are skipped) and is judged by the recommended policy.";

#[derive(Debug, Parser)]
#[command(
    name = "wirecheck",
    version = conformance::build_info::BUILD,
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
    /// Folder of scenario files (*.toml, not recursive), or one scenario file; repeatable
    /// (comma-separated in the environment), `@builtin` naming the built-in suite, e.g.
    /// `--scenarios @builtin --scenarios ./my-scenarios` [default: the checkout's scenarios/
    /// when wirecheck runs from one (target/<profile>/wirecheck), else the built-in suite]
    #[arg(
        long,
        value_name = "DIR|FILE",
        env = "WIRECHECK_SCENARIOS",
        value_delimiter = ','
    )]
    pub scenarios: Vec<PathBuf>,
    /// Folder of agent profiles [default: the checkout's conformance/agents/ when wirecheck
    /// runs from one, else the built-in profiles]
    #[arg(long, value_name = "DIR", env = "WIRECHECK_AGENTS_DIR")]
    pub agents_dir: Option<PathBuf>,
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
    pub claims: Vec<Claim>,
}

impl AdHocArgs {
    /// The ad-hoc agent's profile, when `--agent-cmd` was given; relative paths resolve
    /// against where wirecheck was started.
    pub fn profile(&self) -> Option<Result<AgentProfile, String>> {
        let cmd = self.agent_cmd.as_ref()?;
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let claims: Vec<Capability> = self.claims.iter().map(|c| c.0).collect();
        Some(AgentProfile::ad_hoc(cmd, &claims, &cwd))
    }
}

/// A `--claims` value: one of the runner's capabilities, spelled as profiles spell it
/// (`Capability::as_str`, in `Capability::ALL`'s order), but `guest` (sandbox only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim(pub Capability);

impl clap::ValueEnum for Claim {
    fn value_variants<'a>() -> &'a [Self] {
        // An ad-hoc agent runs at loopback URLs: it cannot provision a guest (sandbox only).
        static CLAIMS: std::sync::LazyLock<Vec<Claim>> = std::sync::LazyLock::new(|| {
            Capability::ALL
                .into_iter()
                .filter(|c| *c != Capability::Guest)
                .map(Claim)
                .collect()
        });
        &CLAIMS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.as_str()))
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
    /// Results folder (results.json, junit.xml, report.html, artifacts/): made if missing;
    /// an earlier wirecheck run's results in it are replaced; a file or a folder of other
    /// files is refused
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
    /// Agent time at this speed (1 to 100; 1: the wall clock) for every agent whose profile
    /// says `clock = "scalable"` and for an --agent-cmd agent, instead of the speed the runner
    /// picks per case from its waits. Other agents keep the wall clock
    #[arg(long, value_name = "FACTOR", env = "WIRECHECK_TIME_SCALE")]
    pub time_scale: Option<fake_wireserver::clock::TimeScale>,
    /// Count non-strict verdicts as failures
    #[arg(long, env = "WIRECHECK_STRICT", value_parser = env_bool())]
    pub strict: bool,
    /// No progress bar
    #[arg(long, env = "WIRECHECK_QUIET", value_parser = env_bool())]
    pub quiet: bool,
    /// Run url and proxy agents even where this machine cannot contain them (it refuses user
    /// namespaces): url agents then run in wirecheck's own namespaces, as its user, proxy
    /// cases are skipped, and results.json, the summary and report.html say so. Without it,
    /// such a run refuses to start
    #[arg(long, env = "WIRECHECK_UNCONTAINED", value_parser = env_bool())]
    pub uncontained: bool,
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
in-progress.json, in-progress.xml (an in-progress description), schedule.json, schedule.xml \
(the fake's answers on the way to a Ready report, to the report itself, the goal state and \
IMDS: statuses, Retry-After, throttling, unusable 200s, replies cut short, resets, closes, \
delays, hangs; on the XML flow a 410 as the goal state moves on). Each generated input runs as case prop.<property> through the scenario checks \
protocol.*, report.*, kvp.*, behaviour.terminal and behaviour.exit (a schedule also through \
behaviour.budget, behaviour.retry, behaviour.interval, behaviour.rate, behaviour.timeout and \
behaviour.refresh); properties needing a capability \
the agent does not claim are skipped. A shrunk schedule is kept as a scenario file in its \
artifacts (scenario.toml, or scenario-limitation-<n>-<class>.toml for a declared limitation), \
which wirecheck run --scenarios FILE replays.

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
    /// Run the agent even where this machine cannot contain it (as `wirecheck run
    /// --uncontained`)
    #[arg(long, env = "WIRECHECK_UNCONTAINED", value_parser = env_bool())]
    pub uncontained: bool,
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
