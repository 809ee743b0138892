//! behaviour.budget for an agent whose loops end after a count of attempts (`reactions.tries`:
//! afterburn), judged by counting what reached the fake: no request tried more than `tries`
//! times in a row, no endpoint more than `tries` × `sequence_tries` times in a run, and the
//! agent gone after its last attempt within one interval, its own start-up and the runner's
//! lag. Counts are what agent time cannot stretch: sped up, the agent's own work between its
//! attempts makes a sum of sleeps (its time budget) run late, not its counts.

use std::collections::BTreeMap;

use fake_wireserver::EndpointId;
use fake_wireserver::journal::Entry;

use super::super::super::{Tally, about, line};
use super::super::{ms, requests};
use super::own_start_up_ms;
use crate::agent::Tries;
use crate::observe::{Observation, Service};

/// Judges run `ri` of an agent that counts its tries; `false` when nothing of its wireserver
/// loop reached the fake (a refused wireserver: nothing to count, its time budget judges).
pub(super) fn counted(t: &mut Tally, obs: &Observation, ri: usize, tries: Tries) -> bool {
    let wire = requests(obs, ri, Service::Wireserver);
    let Some(last) = wire
        .iter()
        .max_by_key(|e| obs.request_end_ms(e).unwrap_or(obs.runs[ri].end_ms))
    else {
        return false;
    };
    for service in [Service::Imds, Service::Wireserver] {
        let reqs = requests(obs, ri, service);
        in_a_row(t, ri, &reqs, tries.per_request);
        per_endpoint(t, ri, &reqs, tries);
    }
    exit_after_last(t, obs, ri, last);
    true
}

/// No request tried more than `per_request` times in a row (a streak of one endpoint).
fn in_a_row(t: &mut Tally, ri: usize, reqs: &[&Entry], per_request: u32) {
    for streak in reqs.chunk_by(|a, b| a.endpoint == b.endpoint) {
        if streak.len() > per_request as usize {
            let first = streak[0];
            let over = streak[per_request as usize];
            t.fail(
                format!(
                    "run {}: {} tried {} times in a row (#{} to #{}); its profile allows {per_request} tries of a request (reactions.tries)",
                    ri + 1,
                    first.endpoint,
                    streak.len(),
                    first.seq,
                    streak[streak.len() - 1].seq
                ),
                about(line(over), &[over], None),
            );
        }
    }
}

/// No endpoint asked more than `per_request` × `sequences` times in the run.
fn per_endpoint(t: &mut Tally, ri: usize, reqs: &[&Entry], tries: Tries) {
    let allowed = u64::from(tries.per_request) * u64::from(tries.sequences);
    let mut seen: BTreeMap<EndpointId, Vec<&Entry>> = BTreeMap::new();
    for e in reqs {
        seen.entry(e.endpoint).or_default().push(e);
    }
    for (endpoint, asked) in seen {
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

/// Gone after its last attempt within one interval, its own start-up and the runner's lag;
/// later only when its processes waited for a CPU at least that much longer.
fn exit_after_last(t: &mut Tally, obs: &Observation, ri: usize, last: &Entry) {
    let run = &obs.runs[ri];
    let last_end = obs.request_end_ms(last).unwrap_or(run.end_ms);
    let interval = ms(obs.interval_min());
    let own_work = own_start_up_ms(obs, ri).unwrap_or(0);
    let lag = obs.uncertainty_ms(run.end_ms);
    let limit = last_end + interval + own_work + lag;
    let after = run.end_ms.saturating_sub(last_end);
    let what = format!("run {}: {}", ri + 1, run.exit.describe());
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
    let held = obs.agent_waited_ms(last_end, run.end_ms);
    let text = format!(
        "run {}: exited {after} ms after its last attempt (#{}), {by} ms past one {} ms interval plus its own start-up's {own_work} ms plus the runner's {lag} ms lag",
        ri + 1,
        last.seq,
        interval
    );
    if held >= by {
        t.uncertain(
            format!("{text}, and its processes waited {held} ms for a CPU meanwhile: the machine, not the agent, may have made it late"),
            about(what, &[last], None),
        );
    } else {
        t.fail(text, about(what, &[last], None));
    }
}
