//! behaviour.refresh: on the XML flow a 410 on the health report says the goal state moved on
//! (docs/protocol.md §8.2). An agent whose profile refreshes fetches it again before its next
//! report, and that report echoes the incarnation the refresh was served: a refresh whose
//! result is not used leaves the platform waiting for a report of the current goal state.

use fake_wireserver::EndpointId;
use fake_wireserver::journal::Entry;
use fake_wireserver::scenario::TriggerAction;
use wirecheck_oracle::id::health::INCARNATION_MISMATCH;

use super::super::{Judgement, Tally, about, line};
use super::requests;
use crate::observe::{Observation, Service};
use crate::scenario::Scenario;

pub fn refresh(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    let exact = moves_only_as_reports_are_answered(obs.scenario);
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
                    echo(&mut t, e, n, &reqs[k + 2..], exact);
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

/// The report after a refresh echoes the incarnation the refresh was served. The fake's finding
/// compares it with the incarnation served when the report arrived, the refresh's own when only
/// health answers move the goal state on (`exact`): none lies between the refresh and the next
/// report. A goal state that also moves on a timer or on another answer leaves it a note.
fn echo(t: &mut Tally, gone: &Entry, refresh: &Entry, after: &[&Entry], exact: bool) {
    let Some(report) = after
        .iter()
        .find(|r| r.endpoint == EndpointId::WireserverHealthXml)
    else {
        return;
    };
    let Some(stale) = report
        .report
        .iter()
        .flat_map(|r| &r.findings)
        .find(|f| f.id == INCARNATION_MISMATCH)
    else {
        return;
    };
    let what = format!(
        "#{} fetched the goal state again after the 410 on #{}, yet report #{} does not echo the incarnation it was served: {}",
        refresh.seq, gone.seq, report.seq, stale.message
    );
    let entries = [gone, refresh, report];
    if exact {
        let shown = format!("{} then {}", line(refresh), line(report));
        t.fail(what, about(shown, &entries, None));
    } else {
        t.note(about(
            format!("{what} (the goal state also moves on a timer or another answer: not judged)"),
            &entries,
            None,
        ));
    }
}

/// Whether the goal state's incarnation moves only as health reports are answered (a step's
/// `then` on a health plan), never on a timer or on another endpoint's answer.
fn moves_only_as_reports_are_answered(scenario: &Scenario) -> bool {
    let fake = &scenario.fake;
    let bumps = |plan: &fake_wireserver::scenario::EndpointPlan| {
        plan.steps
            .iter()
            .any(|s| s.then == Some(TriggerAction::BumpIncarnation))
    };
    !fake
        .triggers
        .iter()
        .any(|t| t.action == TriggerAction::BumpIncarnation)
        && EndpointId::ALL.into_iter().all(|id| {
            matches!(
                id,
                EndpointId::WireserverHealthXml | EndpointId::WireserverHealthJson
            ) || fake.plan_for(id).is_none_or(|plan| !bumps(plan))
        })
}
