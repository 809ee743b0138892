//! behaviour.budget's wireserver loop for an agent that ends it after a count of attempts
//! (`reactions.tries`: afterburn), judged by counting what reached the fake: no endpoint asked
//! more than `tries` × `sequence_tries` times in a run, none after the goal state more than
//! `tries` times in one round (a round starts at a goal-state request), and the agent gone
//! after its last attempt within one interval, its own start-up and the runner's lag. Counts
//! are what agent time cannot stretch: sped up, the agent's own work between attempts makes a
//! sum of sleeps (a time budget) run late, not its counts. The goal state's own tries per
//! round cannot be told apart when it fails in every round (where a round starts is not seen
//! then): only its total is counted.

use std::collections::BTreeMap;

use fake_wireserver::EndpointId;
use fake_wireserver::journal::Entry;

use super::super::super::{Tally, about, line};
use super::super::{ms, requests};
use super::{exit_evidence, exit_held_text, held_back, last_request_end, own_start_up_ms};
use crate::agent::Tries;
use crate::observe::{Observation, Service};

/// Judges run `ri`'s wireserver loop for an agent that counts its tries; `false` when nothing
/// of it reached the fake (a refused wireserver: nothing to count, its time budget judges).
pub(super) fn counted(t: &mut Tally, obs: &Observation, ri: usize, tries: Tries) -> bool {
    let wire = requests(obs, ri, Service::Wireserver);
    let Some((last, last_end)) = last_request_end(obs, ri, &wire) else {
        return false;
    };
    per_endpoint(t, ri, &wire, tries);
    per_round(t, ri, &wire, tries.per_request);
    exit_after_last(t, obs, ri, last, last_end);
    true
}

/// No request after the goal state tried more than `per_request` times in one round; a round
/// starts at each goal-state request (the exchange's first), whatever comes between.
fn per_round(t: &mut Tally, ri: usize, reqs: &[&Entry], per_request: u32) {
    let rounds = reqs.split(|e| e.endpoint == EndpointId::WireserverGoalstate);
    for (endpoint, asked) in rounds.flat_map(by_endpoint) {
        if asked.len() > per_request as usize {
            let first_over = asked[per_request as usize];
            t.fail(
                format!(
                    "run {}: {endpoint} tried {} times in one round of the exchange (#{} to #{}, no goal state between); its profile allows {per_request} tries of a request (reactions.tries)",
                    ri + 1,
                    asked.len(),
                    asked[0].seq,
                    asked[asked.len() - 1].seq
                ),
                about(line(first_over), &[first_over], None),
            );
        }
    }
}

/// No endpoint asked more than `per_request` × `sequences` times in the run.
fn per_endpoint(t: &mut Tally, ri: usize, reqs: &[&Entry], tries: Tries) {
    let allowed = u64::from(tries.per_request) * u64::from(tries.sequences);
    for (endpoint, asked) in by_endpoint(reqs) {
        if asked.len() as u64 > allowed {
            let over = asked[allowed as usize];
            t.fail(
                format!(
                    "run {}: {endpoint} asked {} times; its profile allows {} tries of a request in each of {} tries of the exchange, {allowed} in all (reactions.tries, sequence_tries)",
                    ri + 1,
                    asked.len(),
                    tries.per_request,
                    tries.sequences
                ),
                about(line(over), &[over], None),
            );
        }
    }
}

/// `reqs` grouped by endpoint, each in the order asked.
fn by_endpoint<'a>(reqs: &[&'a Entry]) -> BTreeMap<EndpointId, Vec<&'a Entry>> {
    let mut asked: BTreeMap<EndpointId, Vec<&'a Entry>> = BTreeMap::new();
    for e in reqs {
        asked.entry(e.endpoint).or_default().push(e);
    }
    asked
}

/// Gone after its last attempt (done with at `last_end`) within one interval, its own start-up
/// and the runner's lag; later only unjudged when its processes waited for a CPU that long.
fn exit_after_last(t: &mut Tally, obs: &Observation, ri: usize, last: &Entry, last_end: u64) {
    let run = &obs.runs[ri];
    let interval = ms(obs.interval_min());
    let own_work = own_start_up_ms(obs, ri).unwrap_or(0);
    let lag = obs.uncertainty_ms(run.end_ms);
    let limit = last_end + interval + own_work + lag;
    let after = run.end_ms.saturating_sub(last_end);
    if run.end_ms <= limit {
        t.note(about(
            format!(
                "run {}: gone {after} ms after its last attempt (#{})",
                ri + 1,
                last.seq
            ),
            &[last],
            None,
        ));
        return;
    }
    let by = run.end_ms - limit;
    let text = format!(
        "run {}: exited {after} ms after its last attempt (#{}), {by} ms past one {interval} ms interval plus its own start-up's {own_work} ms plus the runner's {lag} ms lag",
        ri + 1,
        last.seq,
    );
    let evidence = exit_evidence(obs, ri, &[last]);
    match held_back(obs, ri, last_end, by) {
        Some(held) => t.uncertain(format!("{text}, {}", exit_held_text(held)), evidence),
        None => t.fail(text, evidence),
    }
}
