//! What a run and a property search report as they go, for whoever shows it: the runner and
//! `wirecheck prop`'s search draw nothing. The `wirecheck` command line draws its progress bars
//! from these events (its `console`); a library user may pass none.

use wirecheck_results::CaseResult;

/// The events of [`crate::runner::run`].
pub trait RunProgress: Send + Sync + std::fmt::Debug {
    /// The run is prepared (its warnings printed) and `pairs` (agent, scenario) pairs start.
    fn started(&self, pairs: usize);
    /// One (agent, scenario) pair was run: its cases.
    fn pair_done(&self, agent: &str, scenario: &str, cases: &[CaseResult]);
    /// Every pair is done (before the results are gathered).
    fn finished(&self);
}

/// The events of [`crate::prop::run_property`].
pub trait PropProgress {
    /// `n` more generated inputs were run.
    fn ran(&self, n: u64);
    /// What the search does now (`failure.json: shrinking a failure`).
    fn phase(&self, message: String);
}
