//! behaviour.refresh: on the XML flow a 410 on the health report says the goal state moved on
//! (docs/protocol.md §8.2). An agent whose profile refreshes fetches it again before its next
//! report, and that report echoes the incarnation the refresh was served: a refresh whose
//! result is not used leaves the platform waiting for a report of the current goal state.

use fake_wireserver::EndpointId;
use fake_wireserver::journal::{AnswerKind, Entry, StepRef};
use fake_wireserver::scenario::TriggerAction;
use wirecheck_oracle::id::health::INCARNATION_MISMATCH;

use super::super::{Judgement, Tally, about, line};
use super::requests;
use crate::observe::{Observation, Service};

pub fn refresh(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for ri in 0..obs.runs.len() {
        let reqs = requests(obs, ri, Service::Wireserver);
        for (k, e) in reqs.iter().enumerate() {
            if e.endpoint != EndpointId::WireserverHealthXml || e.answer.status != Some(410) {
                continue;
            }
            t.judged();
            let next = reqs.get(k + 1);
            let refreshed = next.is_some_and(|n| n.endpoint == EndpointId::WireserverGoalstate);
            match (obs.profile.reactions.refresh_goal_state_on_410, next) {
                (true, Some(n)) if !refreshed => t.fail(
                    format!(
                        "after 410 on #{} the next request (#{}) is {}, not the goal state",
                        e.seq, n.seq, n.endpoint
                    ),
                    about(format!("{} then {}", line(e), line(n)), &[e, n], None),
                ),
                (true, Some(n)) => {
                    t.note(about(
                        format!("refreshed: {} then {}", line(e), line(n)),
                        &[e, n],
                        None,
                    ));
                    echo(&mut t, obs, e, &reqs[k + 1..]);
                }
                (_, None) => t.note(about(format!("no request after {}", line(e)), &[e], None)),
                (false, Some(n)) => t.note(about(
                    format!(
                        "after 410: {} (refresh not expected of this agent)",
                        line(n)
                    ),
                    &[e, n],
                    None,
                )),
            }
        }
    }
    t.finish("no health report was answered 410")
}

/// The report after a refresh echoes the incarnation the refresh was served: the last goal
/// state served whole before it (`after` starts at the refresh). The fake's finding compares
/// the echo with the incarnation served when the report arrived, the served goal state's own
/// when nothing moved it in between; a goal state that moved (a step's `then` met in between,
/// or a timer) or none served whole leaves a note.
fn echo(t: &mut Tally, obs: &Observation, gone: &Entry, after: &[&Entry]) {
    let Some(k) = after
        .iter()
        .position(|r| r.endpoint == EndpointId::WireserverHealthXml)
    else {
        return;
    };
    let report = after[k];
    let Some(stale) = report
        .report
        .iter()
        .flat_map(|r| &r.findings)
        .find(|f| f.id == INCARNATION_MISMATCH)
    else {
        return;
    };
    let Some(served) = after[..k].iter().rev().find(|f| served_whole(f)) else {
        t.note(about(
            format!(
                "no goal state was served whole between the 410 on #{} and report #{}: its echo is not judged",
                gone.seq, report.seq
            ),
            &[gone, report],
            None,
        ));
        return;
    };
    let entries = [gone, served, report];
    let what = format!(
        "#{} was served the goal state after the 410 on #{}, yet report #{} does not echo its incarnation: {}",
        served.seq, gone.seq, report.seq, stale.message
    );
    match moved_since(obs, served.seq, report.seq) {
        None => {
            let shown = format!("{} then {}", line(served), line(report));
            t.fail(what, about(shown, &entries, None));
        }
        Some(why) => t.note(about(format!("{what} ({why}: not judged)"), &entries, None)),
    }
}

/// A goal state fetch answered with the whole document: the default answer, late or not (a
/// scripted 200 may be one the agent cannot use).
fn served_whole(e: &Entry) -> bool {
    e.endpoint == EndpointId::WireserverGoalstate
        && e.answer.status == Some(200)
        && matches!(e.answer.kind, AnswerKind::Default | AnswerKind::Delay)
}

/// Why the goal state may have moved on from request `from` (included: a step moves it as it
/// answers, after taking the goal state it answers with) until request `to`, if it may have.
fn moved_since(obs: &Observation, from: u64, to: u64) -> Option<&'static str> {
    let fake = &obs.scenario.fake;
    if fake
        .triggers
        .iter()
        .any(|t| t.action == TriggerAction::BumpIncarnation)
    {
        return Some("the goal state also moves on a timer");
    }
    let bumps = |step: &StepRef| {
        fake.endpoints
            .iter()
            .filter(|plan| plan.id == step.endpoint)
            .filter_map(|plan| plan.steps.get(step.index))
            .any(|s| s.then == Some(TriggerAction::BumpIncarnation))
    };
    obs.journal
        .iter()
        .filter(|e| (from..to).contains(&e.seq))
        .any(|e| e.answer.step.as_ref().is_some_and(bumps))
        .then_some("a request in between moved the goal state on")
}
