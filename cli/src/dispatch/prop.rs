//! `wirecheck prop`: property runs of one agent (the runner's `prop`), a progress bar over the
//! generated cases, each property's report on stdout, the results written.

use std::path::PathBuf;
use std::sync::Arc;

use conformance::agent::{self, AgentProfile};
use conformance::prop::{self, Property, PropertyReport};
use conformance::runner::{self, RunSettings};
use wirecheck_results::RunResults;

use crate::cli::{DEFAULT_AGENT, PropArgs};
use crate::sources::{agents_source, bin_dir};
use crate::status::{EXIT_FAILED, EXIT_OK, say, usage};

/// `wirecheck prop`; returns the exit status.
pub fn prop(args: PropArgs) -> u8 {
    let prepared = match prepare(&args) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let Prepared {
        profile,
        properties,
        settings,
        run_settings,
    } = prepared;
    let seed = settings.seed;
    let started_wall = chrono::Utc::now();
    let started = std::time::Instant::now();
    let in_process = profile.attach != agent::Attach::Sandbox;
    if let Err(refused) = runner::uncontained(in_process, args.uncontained) {
        return usage(refused);
    }
    let pair_runner = match runner::PairRunner::start(&run_settings, in_process) {
        Ok(r) => r,
        Err(e) => return usage(format!("cannot start the runtime: {e}")),
    };
    eprintln!(
        "wirecheck prop: agent {}, seed {seed}, {} case(s) per property",
        visible_name(&profile.name),
        settings.cases
    );
    let bar = crate::console::PropBar::new(
        !args.quiet,
        u64::from(settings.cases) * properties.len() as u64,
    );
    let mut cases = Vec::new();
    let mut reports = Vec::new();
    for p in &properties {
        bar.0.set_message(p.name());
        let report = prop::run_property(&pair_runner, &profile, *p, &settings, &bar);
        let case = prop::case_result(&report, &profile, &settings);
        bar.0
            .suspend(|| conformance::tools::write_stdout(&prop::describe(&report, &case)));
        cases.push(case);
        reports.push(report);
    }
    bar.0.finish_and_clear();
    let interrupted = pair_runner.interrupted();
    let uncontained = pair_runner.uncontained().map(str::to_owned);
    pair_runner.finish();
    let mut results = conformance::build_info::new_results(
        started_wall.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    );
    results.duration_ms = started.elapsed().as_millis() as u64;
    results.interrupted = interrupted.map(|s| runner::signal_name(s).to_owned());
    results.uncontained = uncontained;
    results.agents = vec![wirecheck_results::AgentResults {
        agent: profile.name.clone(),
        cases,
    }];
    if let Err(e) = wirecheck_results::write_all(&args.out, &results) {
        return usage(format!("cannot write the results: {e}"));
    }
    say(format!(
        "results: {} (seed {seed}: `--seed {seed}` generates the same inputs again)",
        args.out.display()
    ));
    exit_status(&args, &profile, &results, &reports)
}

/// A `wirecheck prop` ready to run: its agent, its properties, and how they run.
struct Prepared {
    profile: Arc<AgentProfile>,
    properties: Vec<Property>,
    settings: prop::PropSettings,
    run_settings: RunSettings,
}

/// Reads and checks the command line before anything runs; `Err` is the exit status of the
/// usage error already reported.
fn prepare(args: &PropArgs) -> Result<Prepared, u8> {
    let profile = agent_profile(args)?;
    let properties = properties(args)?;
    let input = input(args, &properties)?;
    let regressions = regressions(args, &profile)?;
    let bin_dir = bin_dir();
    for p in &properties {
        let probe = prop::search::planned(&profile, *p, &prop::strategy_probe_input(*p));
        if runner::not_run(&probe, &bin_dir).is_none()
            && let Err(e) = runner::check_command(&profile, p.action(), &bin_dir)
        {
            return Err(usage(e));
        }
    }
    let settings = prop::PropSettings {
        cases: args.cases,
        seed: args.seed.unwrap_or_else(random_seed),
        max_shrink_time: std::time::Duration::from_secs(u64::from(args.max_shrink_time)),
        jobs: usize::from(args.jobs),
        regressions,
        input,
        replay_prefix: replay_prefix(args),
    };
    let run_settings = RunSettings {
        out: args.out.clone(),
        jobs: settings.jobs,
        bin_dir,
        progress: None,
        stop: None,
        case_root: None,
        cases_parent: None,
        snapshots: None,
        starts: runner::StartWatch::default(),
        artifacts: false,
        allow_uncontained: args.uncontained,
    };
    if let Err(e) = wirecheck_results::folder::claim(&args.out) {
        return Err(usage(format!("--out: {e}")));
    }
    Ok(Prepared {
        profile,
        properties,
        settings,
        run_settings,
    })
}

/// The ad-hoc agent, or the named profile (the default one without a name).
fn agent_profile(args: &PropArgs) -> Result<Arc<AgentProfile>, u8> {
    let profile = args.ad_hoc.profile().unwrap_or_else(|| {
        agents_source(args.agents_dir.as_ref())
            .find(args.agent.as_deref().unwrap_or(DEFAULT_AGENT))
            .map_err(|e| e.to_string())
    });
    match profile {
        Ok(p) => Ok(Arc::new(p)),
        Err(e) => Err(usage(e)),
    }
}

/// The `--property` flags, each once in the order given; all of them without one.
fn properties(args: &PropArgs) -> Result<Vec<Property>, u8> {
    let mut properties = Vec::new();
    for name in &args.properties {
        match Property::from_name(name) {
            Some(p) if !properties.contains(&p) => properties.push(p),
            Some(_) => {}
            None => {
                return Err(usage(format!(
                    "--property {name:?}: unknown; the properties are {}",
                    Property::names()
                )));
            }
        }
    }
    if properties.is_empty() {
        properties = Property::ALL.to_vec();
    }
    Ok(properties)
}

/// `--input`, for the one property given.
fn input(args: &PropArgs, properties: &[Property]) -> Result<Option<prop::Input>, u8> {
    let Some(text) = &args.input else {
        return Ok(None);
    };
    if args.properties.len() != 1 {
        return Err(usage(
            "--input needs exactly one --property (the one the input is for)",
        ));
    }
    match prop::Input::from_json(text) {
        Ok(i) => match i.fits(properties[0]) {
            Ok(()) => Ok(Some(i)),
            Err(e) => Err(usage(format!("--input: {e}"))),
        },
        Err(e) => Err(usage(format!("--input: {e}"))),
    }
}

/// The regressions file (`None`: `--no-regressions`), read once here so a broken one is a
/// usage error before anything runs.
fn regressions(args: &PropArgs, profile: &AgentProfile) -> Result<Option<PathBuf>, u8> {
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
        return Err(usage(e));
    }
    Ok(regressions)
}

/// The start of the command line that replays a finding: the same agent, from the same place.
fn replay_prefix(args: &PropArgs) -> String {
    let mut replay_prefix = String::from("wirecheck prop");
    match (&args.agent, &args.ad_hoc.agent_cmd) {
        (_, Some(cmd)) => {
            replay_prefix.push_str(&format!(" --agent-cmd {}", prop::input::shell_quote(cmd)));
            // What the ad-hoc agent claims decides which checks judge it: the replay says so too.
            if !args.ad_hoc.claims.is_empty() {
                let claims: Vec<&str> = args.ad_hoc.claims.iter().map(|c| c.0.as_str()).collect();
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
    replay_prefix
}

/// The exit status of a run whose results are written: an interruption's, a usage error when
/// nothing could be judged, else the verdicts'.
fn exit_status(
    args: &PropArgs,
    profile: &AgentProfile,
    results: &RunResults,
    reports: &[PropertyReport],
) -> u8 {
    if let Some(signal) = &results.interrupted {
        eprintln!("wirecheck: interrupted ({signal}): the results are partial");
        return runner::interrupted_exit_status(signal);
    }
    let harness = reports
        .iter()
        .filter(|r| {
            r.skipped
                .as_ref()
                .is_some_and(conformance::disposition::NotRun::is_harness_error)
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
    wirecheck_results::text::visible(name)
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
