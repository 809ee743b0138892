//! One property against one agent: replay the regression file, generate inputs (in batches of
//! `--jobs`, each case from its own seed), and shrink the first failure with proptest's
//! `TestRunner::run_one` (bounded by `--max-shrink-time`), then run the smallest input once
//! more with artifacts kept. Every case runs through the runner's own path
//! (`runner::PairRunner`): a fresh fake, case folder and containment, the scenario checks.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::agent::AgentProfile;
use crate::disposition::{HarnessError, NotRun};
use crate::runner::{PairRunner, Planned};
use wirecheck_results::CaseResult;

use super::input::Input;
use super::judge::{self, Class};
use super::property::Property;
use super::regressions;

/// A generated input with its shrinking state.
type Tree = Box<dyn ValueTree<Value = Input>>;

/// Settings of one `wirecheck prop`.
#[derive(Debug, Clone)]
pub struct PropSettings {
    /// Generated inputs per property.
    pub cases: u32,
    /// The run's seed: every case's own seed derives from it, the property and the case number.
    pub seed: u64,
    /// Shrinking stops after this long (the smallest failing input so far is kept).
    pub max_shrink_time: Duration,
    /// Cases run at the same time while generating (shrinking runs one at a time).
    pub jobs: usize,
    /// The regression file: replayed first, failures appended. `None`: neither.
    pub regressions: Option<PathBuf>,
    /// `--input`: run exactly this input once, nothing generated.
    pub input: Option<Input>,
    /// The command line before `--property` in replay commands (`wirecheck prop --agent x`).
    pub replay_prefix: String,
}

/// A failure found, shrunk and run once more.
#[derive(Debug, Clone)]
pub struct Finding {
    /// `Declared(k)` or `Undeclared`.
    pub class: Class,
    /// The smallest failing input found.
    pub input: Input,
    /// The input it was shrunk from.
    pub original: Input,
    /// The confirmation run of `input` (artifacts kept).
    pub cases: Vec<CaseResult>,
    /// The confirmation run failed the same way.
    pub reproduced: bool,
    pub shrink_ms: u64,
    /// Agent runs spent shrinking.
    pub shrink_runs: u32,
    /// Came from the regression file (or `--input`), not from the generator.
    pub replayed: bool,
}

/// What one property's run found.
#[derive(Debug, Clone)]
pub struct PropertyReport {
    pub property: Property,
    /// Why nothing was run (unclaimed capability, unavailable attach mode), or why the run
    /// was not judged (a harness error, an interruption).
    pub skipped: Option<NotRun>,
    pub generated: u32,
    pub replayed: u32,
    /// Generated or replayed inputs the runner did not run (longer than a case may take for
    /// this agent): not judged, and said so.
    pub not_run: u32,
    /// Inputs run with nothing failed but a check left unjudged (informational): said so.
    pub unjudged: u32,
    pub undeclared: Option<Finding>,
    /// The smallest input of each declared limitation that was hit (one per limitation).
    pub declared: Vec<Finding>,
    pub seed: u64,
    pub duration_ms: u64,
    /// Where the failure was appended (when it was new).
    pub persisted: Option<PathBuf>,
}

/// The seed of case `n` of `property` in a run with `seed` (splitmix64 of the three).
pub fn case_seed(seed: u64, property: Property, n: u32) -> [u8; 32] {
    let mut state = seed
        ^ ((Property::ALL
            .iter()
            .position(|p| *p == property)
            .unwrap_or(0) as u64)
            << 56)
        ^ u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = [0u8; 32];
    for chunk in out.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes());
    }
    out
}

fn shrink_config(max: Duration) -> Config {
    Config {
        // 0 would mean "no limit" to proptest.
        max_shrink_time: u32::try_from(max.as_millis()).unwrap_or(u32::MAX).max(1),
        max_shrink_iters: 100_000,
        failure_persistence: None,
        cases: 1,
        ..Config::default()
    }
}

/// The generated input of case `n` (the same for the same seed and agent).
pub fn generate(
    seed: u64,
    property: Property,
    n: u32,
    with_data: bool,
) -> proptest::strategy::NewTree<proptest::strategy::BoxedStrategy<Input>> {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &case_seed(seed, property, n));
    let mut runner = TestRunner::new_with_rng(shrink_config(Duration::from_secs(1)), rng);
    super::strategy::input(property, with_data).new_tree(&mut runner)
}

/// True when the agent is handed supporting data: its failure command or environment uses
/// `{data}` (an ad-hoc agent has every value in `WIRECHECK_CASE_DATA`).
pub fn takes_data(profile: &AgentProfile) -> bool {
    use crate::agent::template::Placeholder;
    profile.source == crate::agent::Source::AdHoc
        || profile
            .commands
            .get(&crate::agent::Action::Failure)
            .is_some_and(|c| c.template.placeholders().contains(&Placeholder::Data))
        || profile.env.iter().any(|(_, w)| w.uses(Placeholder::Data))
}

/// The pair for one input.
pub fn planned(profile: &Arc<AgentProfile>, property: Property, input: &Input) -> Planned {
    let scenario = Arc::new(property.scenario(input));
    Planned {
        profile: Arc::clone(profile),
        checks: scenario.checks.clone(),
        scenario,
        snapshot: false,
    }
}

struct Search<'a> {
    runner: &'a PairRunner,
    profile: &'a Arc<AgentProfile>,
    property: Property,
    settings: &'a PropSettings,
}

impl Search<'_> {
    /// Runs `inputs` and classifies each. A failure a limitation covers is declared only if the
    /// same input without the characters (or answers) of the limitation's class passes, or
    /// fails only as another limitation explains (one more run): a limitation explains a
    /// failure its class causes, not any failure of an input that happens to hold one (a
    /// quoting bug in a reason with an `é` in it is still a bug). A plain input the runner did
    /// not run or could not judge leaves the input so, not declared.
    fn run_inputs(&self, inputs: &[Input], artifacts: bool) -> Vec<(Class, Vec<CaseResult>)> {
        let mut out = self.run_classified(inputs, artifacts);
        let declared: Vec<(usize, Input)> = out
            .iter()
            .enumerate()
            .filter_map(|(i, (class, _))| match class {
                Class::Declared(l) => {
                    let l = &self.profile.limitations[*l];
                    Some((i, inputs[i].without(l.input, l.endpoint)))
                }
                _ => None,
            })
            .collect();
        if !declared.is_empty() {
            let plain: Vec<Input> = declared.iter().map(|(_, p)| p.clone()).collect();
            for ((i, _), (class, _)) in declared.iter().zip(self.run_classified(&plain, false)) {
                // Declared only if the plain input passes, or fails as another limitation
                // explains; a plain input not run or not judged proves nothing either way.
                match class {
                    Class::Pass => {}
                    other => out[*i].0 = other,
                }
            }
        }
        out
    }

    fn run_classified(&self, inputs: &[Input], artifacts: bool) -> Vec<(Class, Vec<CaseResult>)> {
        let pairs: Vec<Planned> = inputs
            .iter()
            .map(|i| planned(self.profile, self.property, i))
            .collect();
        self.runner
            .run_pairs(&pairs, self.settings.jobs, artifacts)
            .into_iter()
            .zip(inputs)
            .map(|(cases, input)| {
                (
                    judge::classify(self.profile, self.property, input, &cases),
                    cases,
                )
            })
            .collect()
    }

    /// Shrinks `tree` (whose current input failed as `target`) while it keeps failing so.
    fn shrink<T: ValueTree<Value = Input>>(&self, tree: T, target: Class) -> (Input, u64, u32) {
        let original = tree.current();
        let runs = AtomicU32::new(0);
        let started = Instant::now();
        let mut runner = TestRunner::new(shrink_config(self.settings.max_shrink_time));
        let result = runner.run_one(tree, |input| {
            runs.fetch_add(1, Ordering::Relaxed);
            let (class, _) = self
                .run_inputs(std::slice::from_ref(&input), false)
                .remove(0);
            // A candidate that could not be judged (a harness error) counts as not failing:
            // the input returned still failed as `target`, it may only be less small.
            if class == target {
                Err(TestCaseError::fail(format!("{class:?}")))
            } else {
                Ok(())
            }
        });
        let minimal = match result {
            Err(TestError::Fail(_, minimal)) => minimal,
            // It passed when run again: the smallest input known to fail is the original.
            _ => original,
        };
        (
            minimal,
            started.elapsed().as_millis() as u64,
            runs.load(Ordering::Relaxed),
        )
    }

    fn confirm(
        &self,
        class: Class,
        input: Input,
        original: Input,
        shrink: (u64, u32),
        replayed: bool,
    ) -> Finding {
        let (again, cases) = self
            .run_inputs(std::slice::from_ref(&input), true)
            .remove(0);
        self.keep_scenario_file(class, &input, &cases);
        Finding {
            class,
            reproduced: again == class,
            input,
            original,
            cases,
            shrink_ms: shrink.0,
            shrink_runs: shrink.1,
            replayed,
        }
    }
}

impl Search<'_> {
    /// A schedule's smallest failing input, as the scenario file that replays it, beside the
    /// confirmation run's artifacts (`scenario.toml`): `wirecheck run --scenarios` takes it.
    fn keep_scenario_file(&self, class: Class, input: &Input, cases: &[CaseResult]) {
        if self.property.generates() != super::property::Generates::Schedule {
            return;
        }
        let Some(dir) = cases.iter().find_map(|c| c.artifacts.as_ref()) else {
            return;
        };
        let path = self
            .runner
            .settings()
            .out
            .join(dir)
            .join(scenario_file(self.profile, class));
        if let Err(e) = std::fs::write(&path, self.property.scenario_toml(input)) {
            eprintln!("wirecheck: warning: cannot write {}: {e}", path.display());
        }
    }
}

/// The file name of a shrunk schedule's scenario file in its artifacts: `scenario.toml` for
/// an undeclared failure, `scenario-limitation-<n>-<input class>.toml` for the profile's n-th
/// `[[limitation]]` (one property run may show several, and each keeps its own).
pub fn scenario_file(profile: &AgentProfile, class: Class) -> String {
    match class {
        Class::Declared(k) => format!(
            "scenario-limitation-{}-{}.toml",
            k + 1,
            profile.limitations[k].input.as_str()
        ),
        Class::Pass | Class::Undeclared | Class::NotJudged | Class::NotRun | Class::Unjudged => {
            "scenario.toml".into()
        }
    }
}

/// Runs one property against one agent: the replays first, then generated inputs until an
/// undeclared failure, then each failure found shrunk.
pub fn run_property(
    runner: &PairRunner,
    profile: &Arc<AgentProfile>,
    property: Property,
    settings: &PropSettings,
    progress: &dyn crate::progress::PropProgress,
) -> PropertyReport {
    let started = Instant::now();
    let mut report = PropertyReport {
        property,
        skipped: None,
        generated: 0,
        replayed: 0,
        not_run: 0,
        unjudged: 0,
        undeclared: None,
        declared: Vec::new(),
        seed: settings.seed,
        duration_ms: 0,
        persisted: None,
    };
    let probe = planned(profile, property, &super::strategy_probe_input(property));
    if let Some(why) = crate::runner::not_run(&probe, &runner.settings().bin_dir) {
        report.skipped = Some(NotRun::Skipped(why));
        return report;
    }
    let search = Search {
        runner,
        profile,
        property,
        settings,
    };
    let replays = match replays(settings, property) {
        Ok(replays) => replays,
        Err(why) => {
            report.skipped = Some(why);
            return report;
        }
    };
    if search.replay(&replays, &mut report).is_break()
        || settings.input.is_some()
        || report.undeclared.is_some()
    {
        return finish(report, started);
    }
    let ControlFlow::Continue(found) = search.generate(progress, &mut report) else {
        return finish(report, started);
    };
    if let Some(tree) = found.undeclared {
        search.keep_undeclared(tree, progress, &mut report);
    }
    search.keep_declared(found.first_declared, progress, &mut report);
    finish(report, started)
}

/// The inputs replayed first: --input, else the regression file's entries for this property.
fn replays(settings: &PropSettings, property: Property) -> Result<Vec<Input>, NotRun> {
    if let Some(input) = &settings.input {
        return Ok(vec![input.clone()]);
    }
    let Some(path) = &settings.regressions else {
        return Ok(Vec::new());
    };
    match regressions::load(path) {
        Ok(entries) => Ok(entries
            .into_iter()
            .filter(|e| e.property == property)
            .map(|e| e.input)
            .collect()),
        Err(e) => Err(NotRun::Harness(HarnessError(e.to_string()))),
    }
}

/// What the generated inputs found, before shrinking: the first undeclared failure, and the
/// first of each declared limitation.
struct Found {
    undeclared: Option<Tree>,
    first_declared: Vec<(usize, Tree)>,
}

impl Search<'_> {
    /// Runs the replays; `Break` when the property cannot be judged on this agent.
    fn replay(&self, replays: &[Input], report: &mut PropertyReport) -> ControlFlow<()> {
        for (input, (class, cases)) in replays.iter().zip(self.run_inputs(replays, false)) {
            report.replayed += 1;
            match class {
                Class::NotRun => report.not_run += 1,
                Class::Unjudged => report.unjudged += 1,
                Class::NotJudged => {
                    report.skipped = Some(not_judged_reason(&cases));
                    return ControlFlow::Break(());
                }
                Class::Undeclared if report.undeclared.is_none() => {
                    report.undeclared =
                        Some(self.confirm(class, input.clone(), input.clone(), (0, 0), true));
                }
                Class::Declared(k)
                    if !report
                        .declared
                        .iter()
                        .any(|f| f.class == Class::Declared(k)) =>
                {
                    report.declared.push(self.confirm(
                        class,
                        input.clone(),
                        input.clone(),
                        (0, 0),
                        true,
                    ));
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    /// Generated inputs, `jobs` at a time; the first undeclared failure ends the search, a
    /// declared one is kept (the first per limitation) while the search goes on for undeclared
    /// ones. `Break` when the generator gave up or the property cannot be judged.
    fn generate(
        &self,
        progress: &dyn crate::progress::PropProgress,
        report: &mut PropertyReport,
    ) -> ControlFlow<(), Found> {
        let settings = self.settings;
        let with_data = takes_data(self.profile);
        let mut n = 0u32;
        let mut found = Found {
            undeclared: None,
            first_declared: Vec::new(),
        };
        while n < settings.cases
            && found.undeclared.is_none()
            && self.runner.interrupted().is_none()
        {
            let batch = (settings.cases - n).min(settings.jobs.max(1) as u32);
            let mut trees = Vec::new();
            for i in n..n + batch {
                match generate(settings.seed, self.property, i, with_data) {
                    Ok(tree) => trees.push(tree),
                    Err(e) => {
                        report.skipped = Some(NotRun::Harness(HarnessError(format!(
                            "the generator gave up: {e}"
                        ))));
                        return ControlFlow::Break(());
                    }
                }
            }
            let inputs: Vec<Input> = trees.iter().map(|t| t.current()).collect();
            let outcomes = self.run_inputs(&inputs, false);
            n += batch;
            report.generated = n;
            progress.ran(u64::from(batch));
            for (tree, (class, cases)) in trees.into_iter().zip(outcomes) {
                match class {
                    Class::NotRun => report.not_run += 1,
                    Class::Unjudged => report.unjudged += 1,
                    Class::NotJudged => {
                        report.skipped = Some(not_judged_reason(&cases));
                        return ControlFlow::Break(());
                    }
                    Class::Undeclared if found.undeclared.is_none() => {
                        found.undeclared = Some(tree);
                    }
                    Class::Declared(k) if !found.first_declared.iter().any(|(j, _)| *j == k) => {
                        found.first_declared.push((k, tree));
                    }
                    _ => {}
                }
            }
        }
        ControlFlow::Continue(found)
    }

    /// The undeclared failure shrunk, confirmed and, with a regression file, kept in it.
    fn keep_undeclared(
        &self,
        tree: Tree,
        progress: &dyn crate::progress::PropProgress,
        report: &mut PropertyReport,
    ) {
        let property = self.property;
        progress.phase(format!("{}: shrinking a failure", property.name()));
        let original = tree.current();
        let (minimal, ms, runs) = self.shrink(tree, Class::Undeclared);
        let finding = self.confirm(Class::Undeclared, minimal, original, (ms, runs), false);
        if let Some(path) = &self.settings.regressions {
            let comment = judge::failed(&finding.cases)
                .first()
                .map(|c| {
                    format!(
                        "{} failed: {}",
                        judge::check_of(property, &c.id),
                        c.reason.as_deref().unwrap_or("")
                    )
                })
                .unwrap_or_else(|| "failed".into());
            match regressions::append(path, &self.profile.name, property, &finding.input, &comment)
            {
                Ok(true) => report.persisted = Some(path.clone()),
                Ok(false) => {}
                Err(e) => eprintln!("wirecheck: warning: cannot write the regression file: {e}"),
            }
        }
        report.undeclared = Some(finding);
    }

    /// Each declared limitation not replayed already, shrunk and confirmed.
    fn keep_declared(
        &self,
        first_declared: Vec<(usize, Tree)>,
        progress: &dyn crate::progress::PropProgress,
        report: &mut PropertyReport,
    ) {
        for (k, tree) in first_declared {
            if report
                .declared
                .iter()
                .any(|f| f.class == Class::Declared(k))
            {
                continue;
            }
            progress.phase(format!(
                "{}: shrinking a declared limitation",
                self.property.name()
            ));
            let original = tree.current();
            let (minimal, ms, runs) = self.shrink(tree, Class::Declared(k));
            report.declared.push(self.confirm(
                Class::Declared(k),
                minimal,
                original,
                (ms, runs),
                false,
            ));
        }
    }
}

fn finish(mut report: PropertyReport, started: Instant) -> PropertyReport {
    report.duration_ms = started.elapsed().as_millis() as u64;
    report
}

fn not_judged_reason(cases: &[CaseResult]) -> NotRun {
    let unjudged = cases.iter().find(|c| c.not_judged.is_some());
    NotRun::Unjudged {
        why: unjudged
            .and_then(|c| c.not_judged)
            .unwrap_or(wirecheck_results::NotJudged::Interrupted),
        reason: unjudged
            .or(cases.first())
            .and_then(|c| c.reason.clone())
            .unwrap_or_else(|| "not judged".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each limitation a run shows keeps its own scenario file: one run of cloud-init 25.1
    /// showed three, which wrote one file over each other.
    #[test]
    fn each_finding_keeps_its_own_scenario_file() {
        let profile = AgentProfile::from_toml_str(
            r#"name = "t"
description = "t"
capabilities = ["xml"]
[commands]
ready = ["t"]
[[limitation]]
property = "schedule.xml"
input = "retry-after"
checks = "behaviour.budget"
verdict = "non-strict"
reason = "r"
[[limitation]]
property = "schedule.xml"
input = "unusable"
checks = "behaviour.retry"
verdict = "non-strict"
reason = "r"
"#,
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!(scenario_file(&profile, Class::Undeclared), "scenario.toml");
        assert_eq!(
            scenario_file(&profile, Class::Declared(0)),
            "scenario-limitation-1-retry-after.toml"
        );
        assert_eq!(
            scenario_file(&profile, Class::Declared(1)),
            "scenario-limitation-2-unusable.toml"
        );
    }
}
