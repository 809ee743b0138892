//! The request timeline of a scenario run (for the report's SVG): requests and answers from the
//! journal, injected faults marked, the budget, the deadline and the agent's exit.

use crate::exec::Exit;
use crate::observe::{Observation, answer_label};
use wirecheck_results::{RunEnd, Timeline, TimelineEvent};

/// Builds the timeline; every case of the scenario shares it.
pub fn build(obs: &Observation) -> Timeline {
    let events = obs
        .journal
        .iter()
        .map(|e| TimelineEvent {
            at_ms: e.at_ms,
            done_ms: e.done_ms,
            closed_ms: e.client_closed_ms,
            endpoint: e.endpoint.to_string(),
            label: format!("{} {}", e.method, short_target(&e.target)),
            answer: answer_label(e),
            fault: obs.is_injected(e)
                && (e.answer.status.is_none_or(|s| s >= 400)
                    || !e.answer.kind.is_immediate_reply()),
        })
        .collect();
    let last = obs.runs.last();
    Timeline {
        budget_ms: Some((obs.budget() * 1000.0).round() as u64),
        deadline_ms: last.map_or(0, |r| r.clock_ms + (obs.deadline * 1000.0).round() as u64),
        agent_exit_ms: last.and_then(|r| match r.exit {
            Exit::KilledAtDeadline | Exit::SpawnFailed(_) | Exit::ContainmentFailed(_) => None,
            // The harness ended it after its report: that moment is where the run ended.
            _ => Some(r.end_ms),
        }),
        events,
        runs: obs.runs.iter().map(run_end).collect(),
        time_scale: (!obs.time_scale.is_wall()).then(|| obs.time_scale.times()),
    }
}

/// How one invocation ended and the bounded end of its stderr (the whole output is in the
/// artifacts, `run-N.stderr`).
fn run_end(run: &crate::observe::RunRecord) -> RunEnd {
    RunEnd {
        exit: run.exit.describe(),
        exit_code: run.exit.code(),
        stderr_tail: RunEnd::tail(&run.stderr.text()),
        stderr_bytes: run.stderr.total as u64,
    }
}

/// `http://168.63.129.16/machine?comp=health` → `/machine?comp=health` (proxy mode sends
/// absolute-form targets; the label wants the path).
fn short_target(target: &str) -> &str {
    match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_targets_are_shortened() {
        assert_eq!(
            short_target("http://168.63.129.16/machine?comp=health"),
            "/machine?comp=health"
        );
        assert_eq!(short_target("http://169.254.169.254"), "/");
        assert_eq!(short_target("/provisioning/health"), "/provisioning/health");
    }
}
