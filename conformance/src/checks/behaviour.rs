//! Behaviour checks: retries, intervals, rate, budget, terminal report, exit status, request
//! timeout and goal-state refresh, judged against the agent's profile (docs/protocol.md §8).
//!
//! Interval and timeout margins are generous on purpose: they catch an agent that ignores a rule
//! (retries in a tight loop), not scheduler jitter. The budget has none (`budget.rs`): it is
//! judged by `observe::LoopBudget`, whose only slack is what was measured (the in-flight
//! request, the runner's lag), or by counts for an agent that counts its tries.

use fake_wireserver::EndpointId;
use fake_wireserver::journal::{Delivery, Entry};

use super::{Judgement, Tally, about, line, note, stderr_tail};
use crate::agent::{Done, HealthReporting};
use crate::exec::Exit;
use crate::observe::{
    Class, LoopBudget, Observation, RunRecord, Service, Within, is_health, service_of,
};
use crate::scenario::{Outcome, Target};
use wirecheck_results::{Evidence, Verdict};

mod budget;
mod refresh;
pub use budget::budget;
pub use refresh::refresh;

/// Slack below a declared minimum interval that still counts as honouring it (timer and
/// clock granularity).
fn interval_tolerance_ms(interval_ms: u64) -> u64 {
    (interval_ms / 20).max(25)
}

/// Slack over a per-request timeout before it counts as exceeded (process start, scheduling).
/// Budgets have no such margin: [`LoopBudget`] allows only what was measured.
fn overrun_margin_ms(limit_ms: u64) -> u64 {
    1000 + limit_ms / 10
}

/// When a stall of the runner could put a measured span on the other side of `threshold`:
/// the lag that could. Stalls only delay what is recorded, so the span's start may really have
/// been up to `start_late` earlier (the span longer) and its end up to `end_late` earlier
/// (shorter). `None`: the comparison stands whatever the stalls did.
fn stall_flips(measured: u64, threshold: u64, start_late: u64, end_late: u64) -> Option<u64> {
    if measured >= threshold {
        (measured.saturating_sub(end_late) < threshold).then_some(end_late)
    } else {
        (measured + start_late >= threshold).then_some(start_late)
    }
}

/// How much earlier than the request's arrival an agent may have started its per-request
/// timer (connection set-up, sending the request).
const UNANSWERED_SLACK_MS: u64 = 150;

fn ms(seconds: f64) -> u64 {
    (seconds * 1000.0).round() as u64
}

fn secs(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

/// When run `run`'s attempts on `service` came while it was refused (the runner's or the
/// sandbox's watch saw their SYNs; the fake saw nothing), in order.
fn refused_attempts(obs: &Observation, run: usize, service: Service) -> Vec<u64> {
    obs.runs[run]
        .refused
        .iter()
        .filter(|a| a.service == service)
        .map(|a| a.at_ms)
        .collect()
}

/// The requests of one run to one service, in order.
fn requests<'a>(obs: &'a Observation, run: usize, service: Service) -> Vec<&'a Entry> {
    obs.journal
        .iter()
        .filter(|e| service_of(e) == service && obs.run_of(e) == run)
        .collect()
}

/// When the agent was done with a request: the answer's end, or, when no answer came within
/// the per-request timeout, the moment the timeout expired (an estimate: see
/// [`timed_out`]), or earlier, when the agent closed a hung connection before that.
///
/// An immediate answer (`respond`, `default`, `throttled`) counts as finished when the request
/// arrived: the fake records `done_ms` after writing, which on a loaded machine can be well
/// after the agent already has the answer.
fn finished_ms(obs: &Observation, e: &Entry) -> u64 {
    if e.answer.kind.is_immediate_reply() && e.done_ms.is_some() {
        return e.at_ms;
    }
    let timeout_end = e.at_ms + ms(obs.request_timeout());
    let end = e.done_ms.or(e.client_closed_ms).unwrap_or(timeout_end);
    end.min(timeout_end)
}

/// How much longer the wait from `from` to its retry `next` may measure than the agent waited.
/// A stall only makes an end the fake recorded (an answer written, a close, a timeout
/// estimated from the arrival) late, so when the kernel stamped the retry's arrival, all that
/// is left is what the exact waits allow too: the agent had the end up to the lag the runner
/// cannot see later ([`Observation::unseen_lag_ms`]; an agent the machine kept from noticing
/// it longer waited less than measured, as there). An immediate answer's end is its arrival:
/// the agent had the answer up to the fake's write of it, and its delivery, later (a stall
/// between the read and the write is in that span), besides what an unstamped retry may be late.
fn retry_may_seem_late_ms(obs: &Observation, from: &Entry, next: &Entry) -> u64 {
    let immediate_done = from
        .done_ms
        .filter(|_| from.answer.kind.is_immediate_reply());
    match immediate_done {
        Some(done) => {
            done.saturating_sub(from.at_ms) + obs.unseen_lag_ms() + obs.arrival_uncertainty_ms(next)
        }
        None if next.received_by_kernel => obs.unseen_lag_ms(),
        None => obs.uncertainty_ms(next.at_ms),
    }
}

/// True when the agent's side of `e` ended by its own timeout, not by the answer.
fn timed_out(obs: &Observation, e: &Entry) -> bool {
    e.done_ms
        .is_none_or(|d| d > e.at_ms + ms(obs.request_timeout()))
}

fn killed(run: &RunRecord) -> bool {
    matches!(run.exit, Exit::KilledAtDeadline)
}

/// Whether run `ri` was ended by the harness once its terminal report was accepted (`done =
/// "terminal-report"`, a daemon that never exits) and `e` came after that acceptance: what
/// the agent would have done next was cut off, not decided (WALinuxAgent reads IMDS for its
/// telemetry after its report).
fn ended_when_done_after(obs: &Observation, ri: usize, e: &Entry) -> bool {
    matches!(obs.runs[ri].exit, Exit::StoppedWhenDone)
        && requests(obs, ri, Service::Wireserver)
            .into_iter()
            .find(|p| obs.is_flow_health(p) && obs.classify(p).is_success())
            .is_some_and(|accepted| accepted.seq < e.seq)
}

/// When the agent's retry loop for `service` started in run `ri`: its first attempt there (a
/// request, or a refused connection), or (neither seen) when it was done with IMDS, or the
/// run's start.
fn loop_start(obs: &Observation, ri: usize, service: Service) -> u64 {
    let run = &obs.runs[ri];
    // Its first attempt, served or refused.
    let first_request = requests(obs, ri, service).first().map(|e| e.at_ms);
    let first_refused = refused_attempts(obs, ri, service).first().copied();
    if let Some(first) = first_request.into_iter().chain(first_refused).min() {
        return first;
    }
    if service == Service::Wireserver
        && let Some(last_imds) = requests(obs, ri, Service::Imds).last()
    {
        return finished_ms(obs, last_imds).max(run.start_ms);
    }
    run.start_ms
}

/// The earliest moment the agent's retry loop for `service` can have started: the end of what
/// came before it (IMDS, for the wireserver), else the run's start. Its first request may reach
/// the fake much later on a loaded machine, so "gave up with budget left" counts from here.
fn earliest_loop_start(obs: &Observation, ri: usize, service: Service) -> u64 {
    let run = &obs.runs[ri];
    if service == Service::Wireserver
        && let Some(last_imds) = requests(obs, ri, Service::Imds).last()
    {
        return finished_ms(obs, last_imds).max(run.start_ms);
    }
    run.start_ms
}

/// How much budget may be left when an agent stops without it counting as giving up early:
/// one interval (the next attempt would not fit) plus scheduling slack.
fn early_stop_slack_ms(interval: u64, budget: u64) -> u64 {
    interval + 250 + budget / 10
}

/// When the agent stopped working on `service` after `after`: for IMDS, its first request to
/// another service (it moved on); otherwise its exit.
fn moved_on_at(obs: &Observation, ri: usize, service: Service, after: &Entry) -> u64 {
    let run = &obs.runs[ri];
    if service == Service::Imds
        && let Some(next) = obs
            .journal
            .iter()
            .find(|e| e.seq > after.seq && obs.run_of(e) == ri && service_of(e) != Service::Imds)
    {
        return next.at_ms;
    }
    run.end_ms
}

/// The IMDS api-version agents fall back to after a 400 (docs/protocol.md §1.2).
const IMDS_FALLBACK_VERSION: &str = "2019-06-01";

/// Whether `next` is the one request with the older api-version an agent sends after IMDS
/// refused `e`'s newer one with a 400 (docs/protocol.md §1.2): a fallback, not a retry. Once:
/// an agent that has fallen back before (`earlier`) has nothing older left to try.
fn is_api_fallback(e: &Entry, next: &Entry, earlier: &[&Entry]) -> bool {
    let older = |x: &Entry| x.query("api-version").as_deref() == Some(IMDS_FALLBACK_VERSION);
    e.endpoint == EndpointId::ImdsInstance
        && next.endpoint == EndpointId::ImdsInstance
        && e.answer.status == Some(400)
        && !older(e)
        && older(next)
        && !earlier
            .iter()
            .any(|x| x.endpoint == EndpointId::ImdsInstance && older(x))
}

pub fn retry(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    let budget = ms(obs.budget());
    let interval = ms(obs.interval_min());
    let agent = &obs.profile.name;
    for (ri, run) in obs.runs.iter().enumerate() {
        for service in [Service::Wireserver, Service::Imds] {
            let reqs = requests(obs, ri, service);
            let start = earliest_loop_start(obs, ri, service);
            for (k, e) in reqs.iter().enumerate() {
                let later = &reqs[k + 1..];
                match obs.classify(e) {
                    Class::Success => {}
                    Class::Fatal(why) => {
                        t.judged();
                        if let Some(next) =
                            later.first().filter(|n| is_api_fallback(e, n, &reqs[..k]))
                        {
                            t.note(about(
                                format!("fell back to api-version {IMDS_FALLBACK_VERSION} after a 400 (docs/protocol.md §1.2)"),
                                &[e, next],
                                None,
                            ));
                        } else if let Some(next) = later.first() {
                            t.fail(
                                format!(
                                    "retried after {why} (#{}), which {agent} treats as fatal",
                                    e.seq
                                ),
                                about(format!("{} then {}", line(e), line(next)), &[e, next], None),
                            );
                        } else {
                            t.note(about(
                                format!("stopped after {why}: {}", line(e)),
                                &[e],
                                None,
                            ));
                        }
                    }
                    Class::Retryable(why) => {
                        t.judged();
                        let at = Attempts {
                            run: ri,
                            service,
                            reqs: &reqs,
                            start,
                        };
                        retryable(&mut t, obs, &at, k, &why);
                    }
                }
            }
        }
        // A wireserver that refuses connections leaves no journal: judge by how long the agent
        // kept trying.
        if obs.scenario.agent.wireserver == Target::Closed && !killed(run) {
            t.judged();
            let retries = obs.profile.reactions.transport_errors == crate::agent::Reaction::Retry;
            let start = earliest_loop_start(obs, ri, Service::Wireserver);
            let left = (start + budget).saturating_sub(run.end_ms);
            if retries && left > early_stop_slack_ms(interval, budget) {
                t.fail(
                    format!(
                        "gave up on a refused connection after {}, with {} of its {} budget left; {agent} retries transport errors",
                        secs(run.end_ms.saturating_sub(start)),
                        secs(left),
                        secs(budget)
                    ),
                    note(format!("run {}: {}", ri + 1, run.exit.describe()), None),
                );
            } else {
                t.note(note(
                    format!(
                        "run {}: kept trying the refused wireserver for {}",
                        ri + 1,
                        secs(run.end_ms.saturating_sub(start))
                    ),
                    None,
                ));
            }
        }
    }
    t.finish("no answer called for a retry decision")
}

/// The platform's bound on retrying an IMDS 410: retry it "for a max of 70 seconds"
/// (docs/protocol.md §1.2). A ceiling: an agent stops retrying a 410 by then, and need not
/// retry it past its own budget either.
pub const IMDS_GONE_RETRY_MS: u64 = 70_000;

/// One retry loop of one run: the requests of run `run` to `service`, in order, and the
/// earliest moment the loop can have started.
struct Attempts<'a> {
    run: usize,
    service: Service,
    reqs: &'a [&'a Entry],
    start: u64,
}

/// When the streak of IMDS 410s that `reqs[k]` ends began: the arrival of the first 410 with
/// no other answer between it and `reqs[k]`. `None` unless `reqs[k]` is an IMDS 410.
fn imds_gone_since(at: &Attempts, k: usize) -> Option<u64> {
    let gone = |e: &Entry| e.answer.status == Some(410);
    if at.service != Service::Imds || !gone(at.reqs[k]) {
        return None;
    }
    let first = at.reqs[..=k]
        .iter()
        .rposition(|e| !gone(e))
        .map_or(0, |i| i + 1);
    Some(at.reqs[first].at_ms)
}

/// A retryable answer `at.reqs[k]`: retried (within the 70 s an IMDS 410 allows), or given up
/// on only when the next attempt would not fit the budget (or those 70 s).
fn retryable(t: &mut Tally, obs: &Observation, at: &Attempts, k: usize, why: &str) {
    let e = at.reqs[k];
    let gone_since = imds_gone_since(at, k);
    if let Some(next) = at.reqs.get(k + 1) {
        if let Some(since) = gone_since {
            gone_retry_bound(t, obs, at.reqs[k], next, since);
        }
        t.note(about(
            format!("retried after {why}: {} then {}", line(e), line(next)),
            &[e, next],
            None,
        ));
        return;
    }
    let run = &obs.runs[at.run];
    if killed(run) {
        return; // budget and exit judge a run that never ended
    }
    if ended_when_done_after(obs, at.run, e) {
        return; // the harness ended it (`done`), with this request's retries still to come
    }
    let agent = &obs.profile.name;
    let budget = ms(obs.budget_for(at.service));
    let interval = ms(obs.interval_min());
    // Stopping is fine when the next attempt would not fit in the budget, nor, for an IMDS
    // 410, in the 70 s the platform allows.
    let stopped = moved_on_at(obs, at.run, at.service, e);
    let (end, limit, what) = match gone_since {
        Some(since) if since + IMDS_GONE_RETRY_MS < at.start + budget => (
            since + IMDS_GONE_RETRY_MS,
            IMDS_GONE_RETRY_MS,
            "the platform's 70 s for an IMDS 410 (docs/protocol.md §1.2)".to_owned(),
        ),
        _ => (
            at.start + budget,
            budget,
            format!("its {} budget", secs(budget)),
        ),
    };
    let left = end.saturating_sub(stopped);
    if left > early_stop_slack_ms(interval, limit) {
        t.fail(
            format!(
                "gave up after {why} (#{}) with {} of {what} left; {agent} retries it",
                e.seq,
                secs(left),
            ),
            about(
                format!(
                    "{}; it stopped {} after its first attempt",
                    line(e),
                    secs(stopped.saturating_sub(at.start))
                ),
                &[e],
                None,
            ),
        );
    } else {
        t.note(about(
            format!("last attempt {} ran into the end of {what}", line(e)),
            &[e],
            None,
        ));
    }
}

/// Fails the first retry of an IMDS 410 streak that began more than 70 s before it
/// ([`IMDS_GONE_RETRY_MS`]); `e` is the 410 it retried, `since` the streak's first arrival.
fn gone_retry_bound(t: &mut Tally, obs: &Observation, e: &Entry, next: &Entry, since: u64) {
    let span = next.at_ms.saturating_sub(since);
    // Only the first retry past the bound: one finding per streak.
    if span <= IMDS_GONE_RETRY_MS || e.at_ms.saturating_sub(since) > IMDS_GONE_RETRY_MS {
        return;
    }
    let evidence = about(format!("{} then {}", line(e), line(next)), &[e, next], None);
    let late = stall_flips(
        span,
        IMDS_GONE_RETRY_MS + 1,
        obs.uncertainty_ms(since),
        obs.uncertainty_ms(next.at_ms),
    );
    if let Some(late) = late {
        t.uncertain(
            format!(
                "retried an IMDS 410 {} after the first 410, over the platform's 70 s, and the runner's wake-ups around then came up to {late} ms late",
                secs(span)
            ),
            evidence,
        );
    } else {
        t.fail(
            format!(
                "retried an IMDS 410 (#{}) {} after the first 410 of the streak; the platform allows retrying a 410 for at most 70 s (docs/protocol.md §1.2)",
                next.seq,
                secs(span)
            ),
            evidence,
        );
    }
}

pub fn interval(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for ri in 0..obs.runs.len() {
        for service in [Service::Wireserver, Service::Imds] {
            let gaps = retry_gaps(obs, &requests(obs, ri, service));
            judge_gaps(&mut t, gaps);
        }
    }
    t.finish("no retry happened")
}

/// One wait between a retryable answer and the next request to its endpoint.
struct Gap<'a> {
    from: &'a Entry,
    to: &'a Entry,
    /// Milliseconds from the end of `from` to the arrival of `to`.
    gap: u64,
    /// The least wait the profile obliges (`interval_min_after`).
    interval: u64,
    /// The least gap that passes (the interval less its tolerance).
    floor: u64,
    /// Why the verdict could go either way, when it could.
    stalled: Option<Unsure>,
}

/// What left one wait unjudged.
#[derive(Clone, Copy)]
enum Unsure {
    /// A stall of the runner this late (ms) around either end could flip the verdict.
    Stall(u64),
    /// Both ends are the kernel's arrival times, but the fake took this long (ms) over the
    /// answer in between, and its delivery may have taken up to the second (ms, the lag the
    /// runner cannot see, at agent time) more: the agent had it somewhere in that span.
    SlowAnswer(u64, u64),
}

impl Unsure {
    fn text(self) -> String {
        match self {
            Unsure::Stall(late) => {
                format!("the runner's wake-ups around then came up to {late} ms late")
            }
            Unsure::SlowAnswer(took, 0) => format!(
                "the fake took {took} ms over its answer, and the agent had it somewhere in that span"
            ),
            Unsure::SlowAnswer(took, unseen) => format!(
                "the fake took {took} ms over its answer and its delivery up to {unseen} ms more, and the agent had it somewhere in that span"
            ),
        }
    }
}

/// A wait between two arrivals the kernel stamped (`received_by_kernel`), after an answer the
/// fake gave as it read the request: exact at both ends, whatever the runner's stalls. The
/// agent had the answer no earlier than the first arrival and no later than the fake's end of
/// it, `answer_ms` later, plus what its delivery may have taken (`unseen_ms`); `measured`
/// runs from the arrival ([`finished_ms`] of a reply) or from the fake's end (of a transport
/// fault). The verdict stands when both readings agree.
fn exact_wait_flips(
    measured: u64,
    threshold: u64,
    (answer_ms, unseen_ms): (u64, u64),
    from_arrival: bool,
) -> Option<Unsure> {
    let (least, most) = if from_arrival {
        (measured.saturating_sub(answer_ms + unseen_ms), measured)
    } else {
        (measured.saturating_sub(unseen_ms), measured + answer_ms)
    };
    (least < threshold && most >= threshold).then_some(Unsure::SlowAnswer(answer_ms, unseen_ms))
}

fn retry_gaps<'a>(obs: &Observation, reqs: &[&'a Entry]) -> Vec<Gap<'a>> {
    let mut gaps = Vec::new();
    for (k, e) in reqs.iter().enumerate() {
        if !matches!(obs.classify(e), Class::Retryable(_)) {
            continue;
        }
        // Its retry came after it: a request that arrived before it, on another connection
        // the fake read later (so journaled after it), is not one.
        let Some(next) = reqs[k + 1..]
            .iter()
            .find(|n| n.endpoint == e.endpoint && n.at_ms >= e.at_ms)
        else {
            continue;
        };
        let interval = ms(obs.interval_min_after(e));
        let floor = interval.saturating_sub(interval_tolerance_ms(interval));
        // An unanswered request's end is estimated from its arrival plus the timeout; the
        // agent's own clock started earlier (connect, send), so allow for that.
        let floor = if timed_out(obs, e) {
            floor.saturating_sub(UNANSWERED_SLACK_MS)
        } else {
            floor
        };
        let gap = next.at_ms.saturating_sub(finished_ms(obs, e));
        let stalled = match exact_answer_ms(obs, e, next) {
            Some(answer_ms) => exact_wait_flips(
                gap,
                floor,
                (answer_ms, obs.unseen_lag_ms()),
                e.answer.kind.is_immediate_reply(),
            ),
            None => stall_flips(
                gap,
                floor,
                obs.uncertainty_ms(finished_ms(obs, e)),
                retry_may_seem_late_ms(obs, e, next),
            )
            .map(Unsure::Stall),
        };
        gaps.push(Gap {
            from: e,
            to: next,
            gap,
            interval,
            floor,
            stalled,
        });
    }
    gaps
}

/// The fewest waits of one kind (endpoint, obliged interval) judged clear of any stall that
/// let the stalled ones of that kind go unjudged instead of leaving the case unjudged.
const CLEAR_GAPS_TO_SAMPLE: usize = 10;

/// How long the fake took over `from`'s answer, when the wait from it to `next` (a later
/// arrival, [`retry_gaps`]) is exact: both arrivals are the kernel's, and the fake answered
/// `from` as it read it, before the agent's own timeout ended its side ([`finished_ms`] is
/// then the arrival or that answer's end).
fn exact_answer_ms(obs: &Observation, from: &Entry, next: &Entry) -> Option<u64> {
    let done = from.done_ms?;
    let exact = from.received_by_kernel
        && next.received_by_kernel
        && from.answer.kind.acts_on_arrival()
        && !timed_out(obs, from);
    exact.then(|| done.saturating_sub(from.at_ms))
}

/// Judges each wait. A wait a stall could flip is not judged; the case is left unjudged for it
/// (informational, run again) unless it measured long enough and its kind was judged often
/// enough without a stall: at least [`CLEAR_GAPS_TO_SAMPLE`] waits and three quarters of that
/// kind's (a failing clear one fails the case whatever). A loop's waits of one kind come from
/// one decision, so a wrong one shows in the waits no stall touched (an agent 30 % short fails
/// on every one of them); before, one stall among cloud-init's 1,640 retries of a 503 left the
/// whole case unjudged on every attempt. A wait measured short stays unjudged: at agent time
/// the unseen lag makes every wait just under the floor "stalled", and an agent short on a
/// few of its waits must not hide there.
fn judge_gaps(t: &mut Tally, gaps: Vec<Gap<'_>>) {
    // Per kind: (waits, waits clear of any stall).
    let mut kinds: std::collections::HashMap<(EndpointId, u64), (usize, usize)> =
        std::collections::HashMap::new();
    for g in &gaps {
        let counts = kinds.entry((g.from.endpoint, g.interval)).or_default();
        counts.0 += 1;
        counts.1 += usize::from(g.stalled.is_none());
    }
    let sampled = |g: &Gap<'_>| {
        let (all, clear) = kinds[&(g.from.endpoint, g.interval)];
        clear >= CLEAR_GAPS_TO_SAMPLE && clear * 4 >= all * 3
    };
    for g in &gaps {
        t.judged();
        let pair = || {
            about(
                format!("{} then {}", line(g.from), line(g.to)),
                &[g.from, g.to],
                None,
            )
        };
        match g.stalled {
            Some(why) if g.gap >= g.floor && sampled(g) => t.note(about(
                format!(
                    "#{} → #{}: {} ms, not judged ({}); its kind was judged on the waits without a stall",
                    g.from.seq,
                    g.to.seq,
                    g.gap,
                    why.text()
                ),
                &[g.from, g.to],
                None,
            )),
            Some(why) => t.uncertain(
                format!(
                    "retried {} {} ms after #{} ended, the interval is at least {} ms, and {}",
                    g.from.endpoint,
                    g.gap,
                    g.from.seq,
                    g.interval,
                    why.text()
                ),
                pair(),
            ),
            None if g.gap < g.floor => t.fail(
                format!(
                    "retried {} only {} ms after #{} ended; the interval is at least {} ms",
                    g.from.endpoint, g.gap, g.from.seq, g.interval
                ),
                pair(),
            ),
            None => t.note(about(
                format!("#{} → #{}: waited {} ms", g.from.seq, g.to.seq, g.gap),
                &[g.from, g.to],
                None,
            )),
        }
    }
}

pub fn rate(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    const WINDOW_MS: u64 = 1000;
    let allowed = match obs.profile.reactions.max_rate {
        Some(rate) => rate.floor() as usize + 1,
        None => (WINDOW_MS / ms(obs.interval_min()).max(1)) as usize + 1,
    };
    let mut endpoints: Vec<EndpointId> = obs
        .journal
        .iter()
        .filter(|e| service_of(e) == Service::Wireserver)
        .map(|e| e.endpoint)
        .collect();
    // In the order of the id strings, as the evidence always listed them.
    endpoints.sort_unstable_by_key(|e| e.as_str());
    endpoints.dedup();
    for endpoint in endpoints {
        let mut reqs: Vec<&Entry> = obs
            .journal
            .iter()
            .filter(|e| e.endpoint == endpoint)
            .collect();
        if reqs.len() < 2 {
            continue;
        }
        // By arrival: the journal's order (`seq`) is when each request was journaled, later
        // for a body that took longer to read or parse.
        reqs.sort_by_key(|e| e.at_ms);
        t.judged();
        // The busiest one-second window.
        let (mut best, mut best_at) = (0usize, 0usize);
        for i in 0..reqs.len() {
            let n = reqs[i..]
                .iter()
                .take_while(|e| e.at_ms < reqs[i].at_ms + WINDOW_MS)
                .count();
            if n > best {
                (best, best_at) = (n, i);
            }
        }
        let window: Vec<&Entry> = reqs[best_at..best_at + best].to_vec();
        // A stall can bunch requests that came apart: the first may have been earlier.
        let span = window[window.len() - 1].at_ms - window[0].at_ms;
        let late = obs.uncertainty_ms(window[0].at_ms);
        if best > allowed && late > 0 && span + late >= WINDOW_MS {
            t.uncertain(
                format!(
                    "{best} requests to {endpoint} within one second (at most {allowed} expected), and the runner's wake-ups around then came up to {late} ms late"
                ),
                about(format!("window from +{} ms", window[0].at_ms), &window, None),
            );
        } else if best > allowed {
            t.fail(
                format!(
                    "{best} requests to {endpoint} within one second; at most {allowed} expected"
                ),
                about(
                    format!("window from +{} ms", window[0].at_ms),
                    &window,
                    Some(
                        window
                            .iter()
                            .map(|e| line(e))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    ),
                ),
            );
        } else {
            t.note(about(
                format!("{endpoint}: at most {best} requests in any second (allowed {allowed})"),
                &window,
                None,
            ));
        }
    }
    t.finish("no endpoint was asked more than once")
}

pub fn terminal(obs: &Observation) -> Judgement {
    if obs.profile.health_report == HealthReporting::None {
        return silent(obs);
    }
    let mut t = Tally::new();
    let mut delivered_total = 0usize;
    let mut last_terminal = None;
    for (ri, run) in obs.runs.iter().enumerate() {
        if !obs.is_terminal(&run.run) {
            continue;
        }
        last_terminal = Some(ri);
        t.judged();
        let posts: Vec<&Entry> = requests(obs, ri, Service::Wireserver)
            .into_iter()
            .filter(|e| obs.is_flow_health(e))
            .collect();
        let accepted: Vec<&Entry> = posts
            .iter()
            .copied()
            .filter(|e| obs.classify(e).is_success())
            .collect();
        if let Some(first) = accepted.first() {
            delivered_total += 1;
            after_acceptance(&mut t, obs, &posts, first);
        } else if posts.is_empty() && obs.scenario.agent.wireserver == Target::Fake {
            // An agent that gave up on IMDS's instance document, or on the goal state its
            // health document echoes (XML flow), by its profile's reactions, has nothing it
            // may report: only when that fatal answer was the last thing it asked for.
            let last = obs
                .journal
                .iter()
                .filter(|e| obs.run_of(e) == ri)
                .max_by_key(|e| e.seq);
            let gave_up_fetching = last.is_some_and(|e| {
                matches!(
                    e.endpoint,
                    EndpointId::ImdsInstance | EndpointId::WireserverGoalstate
                ) && matches!(obs.classify(e), Class::Fatal(_))
            });
            if !gave_up_fetching {
                t.fail(
                    format!("run {} never sent its health report", ri + 1),
                    note(
                        format!("run {}: {}", ri + 1, run.exit.describe()),
                        stderr_tail(run),
                    ),
                );
            }
        } else if let Some(last) = posts.last() {
            t.note(about(
                format!("no report accepted; last attempt {}", line(last)),
                &[last],
                None,
            ));
        }
    }
    if last_terminal.is_none() {
        return t.finish("no terminal report was requested");
    }
    match obs.scenario.expect.outcome {
        Some(Outcome::Reported) if delivered_total == 0 => t.fail(
            "the scenario lets a conforming agent deliver its report, but none was accepted",
            note("expect.outcome = \"reported\"", None),
        ),
        Some(Outcome::NotReported) if delivered_total > 0 => t.fail(
            "a report was accepted although the scenario never lets one through",
            note("expect.outcome = \"not-reported\"", None),
        ),
        _ => {}
    }
    t.finish("no terminal report was requested")
}

/// A run's health reports `posts` after `first`, the first one accepted: there must be none.
fn after_acceptance(t: &mut Tally, obs: &Observation, posts: &[&Entry], first: &Entry) {
    let after: Vec<&Entry> = posts
        .iter()
        .copied()
        .filter(|e| e.seq > first.seq)
        .collect();
    // The acceptance may have reached the agent only after it stopped waiting for it
    // (its per-request timeout), on a machine that held the fake back: a resend then
    // says nothing about the agent.
    let timeout = ms(obs.request_timeout());
    // As recorded: the latest the answer can have left (`finished_ms` takes the
    // earliest, for intervals).
    let answered_at = first.done_ms.unwrap_or(first.at_ms);
    let answered_in = answered_at.saturating_sub(first.at_ms);
    let late = obs
        .uncertainty_ms(first.at_ms)
        .max(obs.uncertainty_ms(answered_at));
    let gave_up =
        |again: &Entry| again.at_ms >= first.at_ms + timeout.saturating_sub(UNANSWERED_SLACK_MS);
    if let Some(again) = after.first()
        && gave_up(again)
        && late > 0
        && answered_in + late + UNANSWERED_SLACK_MS >= timeout
    {
        t.uncertain(
            format!(
                "sent another health report (#{}) after #{} was accepted, but the fake took {answered_in} ms to answer #{} and the runner's wake-ups around then came up to {late} ms late, against the agent's {timeout} ms request timeout: the acceptance may have come too late for it",
                again.seq, first.seq, first.seq
            ),
            about(
                format!("{} then {}", line(first), line(again)),
                &[first, again],
                None,
            ),
        );
    } else if let Some(again) = after.first() {
        t.fail(
            format!(
                "sent another health report (#{}) after #{} was accepted",
                again.seq, first.seq
            ),
            about(
                format!("{} then {}", line(first), line(again)),
                &[first, again],
                None,
            ),
        );
    } else {
        t.note(about(format!("delivered: {}", line(first)), &[first], None));
    }
}

/// behaviour.terminal for an agent whose profile says it sends no health report in this mode
/// (`health_report = "none"`): every run is judged, and any health report, on either flow,
/// accepted or not, fails. The scenario's `expect.outcome` is about an agent that reports.
fn silent(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for (ri, run) in obs.runs.iter().enumerate() {
        t.judged();
        let posts: Vec<&Entry> = requests(obs, ri, Service::Wireserver)
            .into_iter()
            .filter(|e| is_health(e))
            .collect();
        match posts.first() {
            Some(first) => t.fail(
                format!(
                    "run {} sent a health report (#{}), but {} sends none in this mode (health_report = \"none\")",
                    ri + 1,
                    first.seq,
                    obs.profile.name
                ),
                about(line(first), &posts, None),
            ),
            None => t.note(note(
                format!(
                    "run {} ({}): no health report, as the profile declares (health_report = \"none\"); {}",
                    ri + 1,
                    run.run.action,
                    run.exit.describe()
                ),
                None,
            )),
        }
    }
    t.finish("no run")
}

pub fn exit(obs: &Observation) -> Judgement {
    let codes = &obs.profile.exit;
    let mut t = Tally::new();
    let mut described = Vec::new();
    for (ri, run) in obs.runs.iter().enumerate() {
        t.judged();
        let accepted = accepted_report(obs, ri);
        let what = format!(
            "run {} ({}): {}",
            ri + 1,
            run.run.action,
            run.exit.describe()
        );
        described.push(what.clone());
        let ending = Ending {
            ri,
            run,
            accepted,
            what,
        };
        if let Some(code) = exit_code(&mut t, obs, &ending) {
            code_as_declared(&mut t, obs, &ending, code);
        }
    }
    let mut j = t.finish("the agent was not run");
    // A daemon (done = "terminal-report") is judged by its declaration, not by exit statuses.
    if j.verdict == Verdict::Pass
        && codes.reported.is_empty()
        && codes.failed.is_empty()
        && obs.profile.done == Done::Exit
    {
        j.verdict = Verdict::Informational;
        j.reason = Some(format!(
            "the profile declares no exit statuses; {}",
            described.join("; ")
        ));
    }
    j
}

/// How one run ended, as behaviour.exit judges it.
struct Ending<'a> {
    ri: usize,
    run: &'a RunRecord,
    /// Its first accepted health report.
    accepted: Option<&'a Entry>,
    /// `run N (action): how it ended`.
    what: String,
}

impl Ending<'_> {
    /// Without a delivered report, the agent's own words (its stderr) say why.
    fn evidence(&self, msg: String) -> Evidence {
        match self.accepted {
            Some(e) => about(msg, &[e], None),
            None => note(msg, stderr_tail(self.run)),
        }
    }

    /// How the run ended, as evidence.
    fn end_evidence(&self) -> Evidence {
        self.evidence(self.what.clone())
    }
}

/// The run's exit code; `None` when it ended otherwise, which is judged here.
fn exit_code(t: &mut Tally, obs: &Observation, ending: &Ending) -> Option<i32> {
    let Ending {
        ri, run, accepted, ..
    } = *ending;
    match &run.exit {
        Exit::Code(c) => Some(*c),
        // A daemon that never exits (done = "terminal-report") and delivered no terminal
        // report is still running at the deadline: that is its normal end, not a hang.
        // Whether it retried or gave up is behaviour.retry's and behaviour.terminal's.
        Exit::KilledAtDeadline
            if obs.profile.done == Done::TerminalReport && accepted.is_none() =>
        {
            t.note(ending.evidence(format!(
                "{}: {} never exits on its own (done = \"terminal-report\"), and no report was delivered",
                ending.what, obs.profile.name
            )));
            None
        }
        // Read the declaration: the profile says the agent is done at its terminal report,
        // and the harness ended it for that reason. Only a delivered report makes it a pass.
        Exit::StoppedWhenDone => {
            match (obs.profile.done, accepted) {
                (Done::TerminalReport, Some(_)) => t.note(ending.end_evidence()),
                (Done::TerminalReport, None) => t.fail(
                    format!(
                        "run {}: stopped as done, but no terminal report was accepted",
                        ri + 1
                    ),
                    ending.end_evidence(),
                ),
                (Done::Exit, _) => t.fail(
                    format!(
                        "run {}: stopped by the harness, but the profile says it ends by exiting",
                        ri + 1
                    ),
                    ending.end_evidence(),
                ),
            }
            None
        }
        other => {
            t.fail(
                format!("run {}: {}", ri + 1, other.describe()),
                ending.end_evidence(),
            );
            None
        }
    }
}

/// Exit `code` against the statuses the profile declares for a run that did, or did not,
/// deliver its report.
fn code_as_declared(t: &mut Tally, obs: &Observation, ending: &Ending, code: i32) {
    let codes = &obs.profile.exit;
    let (ri, accepted) = (ending.ri, ending.accepted);
    if codes.reported.is_empty() && codes.failed.is_empty() {
        if obs.profile.done == Done::TerminalReport {
            t.fail(
                format!(
                    "run {}: exited by itself with {code}, but its profile says it never exits (done = \"terminal-report\")",
                    ri + 1
                ),
                ending.end_evidence(),
            );
        }
        return;
    }
    let ok = match accepted {
        Some(_) => codes.reported.contains(&code),
        None if !codes.failed.is_empty() => codes.failed.contains(&code),
        None => !codes.reported.contains(&code),
    };
    if ok {
        t.note(ending.end_evidence());
    } else if let Some(lateness) = accepted
        // Its "not reported" status: any other is wrong whatever the timing.
        .filter(|_| codes.failed.is_empty() || codes.failed.contains(&code))
        .and_then(|e| answer_maybe_past_deadline(obs, ri, e))
    {
        t.uncertain(
            format!(
                "run {} exited with {code} (not reported), though its report was accepted; {lateness}",
                ri + 1
            ),
            ending.end_evidence(),
        );
    } else {
        let expected = match accepted {
            Some(_) => format!("one of {:?} (report delivered)", codes.reported),
            None if !codes.failed.is_empty() => {
                format!("one of {:?} (no report delivered)", codes.failed)
            }
            None => format!("anything but {:?} (no report delivered)", codes.reported),
        };
        t.fail(
            format!("run {} exited with {code}; expected {expected}", ri + 1),
            ending.end_evidence(),
        );
    }
}

/// Why run `ri`'s accepted report may have got its answer only after the agent stopped waiting
/// for it, if it may ([`answer_maybe_past_deadline`]): what the snapshot comparison excuses an
/// exit status by.
pub(crate) fn late_answer(obs: &Observation, ri: usize) -> Option<String> {
    let accepted = accepted_report(obs, ri)?;
    answer_maybe_past_deadline(obs, ri, accepted)
}

/// Run `ri`'s first accepted health report of the flow, if any.
fn accepted_report<'o>(obs: &'o Observation, ri: usize) -> Option<&'o Entry> {
    requests(obs, ri, Service::Wireserver)
        .into_iter()
        .find(|e| obs.is_flow_health(e) && obs.classify(e).is_success())
}

/// Why the accepting answer to `accepted` may have reached the agent only after it had stopped
/// waiting for it, if it may. The agent's deadline for it is its request timeout from when it
/// sent it, or its budget from the earliest moment its loop can have started, whichever is
/// first; the answer may have come too late when it ended (`done_ms`, recorded once written)
/// within the lag measured before that deadline: the runner's stall around the request's arrival
/// (it may have been sent that much earlier than recorded) and the agent's waits for a CPU from
/// its loop's start to the deadline (a held agent reads its answer late). Waits after the
/// deadline, or a stall after the answer was written, cannot make it late. An agent that says
/// "not reported" of an answer that came in time, by more than that lag, fails.
fn answer_maybe_past_deadline(obs: &Observation, ri: usize, accepted: &Entry) -> Option<String> {
    let done = accepted.done_ms?;
    let start = earliest_loop_start(obs, ri, Service::Wireserver);
    let deadline = (accepted.at_ms + ms(obs.request_timeout()))
        .min(start + ms(obs.budget_for(Service::Wireserver)));
    let lag = obs.uncertainty_ms(accepted.at_ms) + obs.agent_waited_ms(start, deadline);
    (done + lag >= deadline).then(|| {
        format!(
            "the answer ended {} after the request, within the {lag} ms the machine lagged of the agent's deadline for it ({} after the request), so it may have come too late for the agent",
            secs(done.saturating_sub(accepted.at_ms)),
            secs(deadline.saturating_sub(accepted.at_ms))
        )
    })
}

/// How close to a deadline kill a hung connection's close counts as caused by the kill.
const KILL_CLOSE_MS: u64 = 250;

pub fn timeout(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    let timeout = ms(obs.request_timeout());
    let interval = ms(obs.interval_min());
    let allowed = timeout + interval + overrun_margin_ms(timeout);
    for (ri, run) in obs.runs.iter().enumerate() {
        for service in [Service::Wireserver, Service::Imds] {
            let reqs = requests(obs, ri, service);
            for (k, e) in reqs.iter().enumerate() {
                if !unanswered_in_time(e, timeout) {
                    continue;
                }
                // The agent closing the hung connection is the moment it gave up, exactly;
                // otherwise its next request (or its exit) is the first sign it did. A close
                // that came with the deadline's kill is not giving up.
                let closed = e.client_closed_ms.filter(|c| {
                    let before = reqs.get(k + 1).map_or(run.end_ms, |next| next.at_ms);
                    *c <= before && !(killed(run) && *c + KILL_CLOSE_MS >= run.end_ms)
                });
                let (gave_up_after, what) = match (closed, reqs.get(k + 1)) {
                    (Some(c), _) => (
                        c.saturating_sub(e.at_ms),
                        "closed the connection".to_owned(),
                    ),
                    (None, Some(next)) => (
                        next.at_ms.saturating_sub(e.at_ms),
                        format!("next request #{}", next.seq),
                    ),
                    (None, None) if killed(run) => {
                        let waited = run.end_ms.saturating_sub(e.at_ms);
                        if waited <= allowed {
                            let gave_up_before = (0..k).any(|j| {
                                unanswered_in_time(reqs[j], timeout) && left_unanswered(&reqs, j)
                            });
                            cut_short(&mut t, obs, e, (waited, allowed), gave_up_before);
                            continue;
                        }
                        (waited, "killed at the deadline".to_owned())
                    }
                    (None, None) => (run.end_ms.saturating_sub(e.at_ms), "agent exit".to_owned()),
                };
                t.judged();
                // The budget may end a hung attempt before its own timeout does: its last
                // attempt, over within the budget rule.
                let rule = LoopBudget {
                    start_ms: loop_start(obs, ri, service),
                    budget_ms: ms(obs.budget()),
                };
                let cut_by_budget = reqs.get(k + 1).is_none()
                    && !(killed(run) && closed.is_none())
                    && rule.loop_end(
                        run.end_ms,
                        obs.request_span_ms(e),
                        obs.uncertainty_ms(run.end_ms),
                    ) == Within::Inside;
                let limits = Limits { allowed, timeout };
                give_up(
                    &mut t,
                    obs,
                    e,
                    (gave_up_after, &what),
                    limits,
                    cut_by_budget,
                );
            }
        }
    }
    t.finish("no request went unanswered")
}

/// Whether request `e` went unanswered for longer than the agent's `timeout_ms`: never
/// answered, or answered (a delay, a trickle) only after it.
fn unanswered_in_time(e: &Entry, timeout_ms: u64) -> bool {
    match e.answer.kind.delivery() {
        Delivery::Never => true,
        Delivery::AfterWait | Delivery::OverTime => e
            .done_ms
            .is_none_or(|d| d.saturating_sub(e.at_ms) > timeout_ms + 100),
        Delivery::AtOnce | Delivery::Broken(_) => false,
    }
}

/// Whether the agent left request `reqs[j]` before any answer came: it closed the connection,
/// or asked again, while the fake still held the request (an agent that took a late answer
/// gave up on nothing).
fn left_unanswered(reqs: &[&Entry], j: usize) -> bool {
    let e = reqs[j];
    let left = e
        .client_closed_ms
        .into_iter()
        .chain(reqs.get(j + 1).map(|next| next.at_ms))
        .min();
    match (left, e.done_ms) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(left), Some(done)) => left < done,
    }
}

/// An unanswered request the runner's kill cut short, `waited` ms after it, before the agent's
/// limit for it (`allowed`) was over. Where in its loop an agent is at a horizon depends on its
/// speed (WALinuxAgent at x17 sent its fourth report 5.7 s into its 10 s timeout, and failed as
/// never giving up), so it is not judged when the agent showed it gives up: it left an earlier
/// request of the run before its answer came ([`left_unanswered`]), or it never stops on its
/// own (`gives_up = false`) and the kill is its horizon (elsewhere `behaviour.budget` fails
/// such an agent for still running). Otherwise nothing shows it would ever have given up: informational,
/// not a pass (a deadline inside the limit of its first hang must not pass an agent that hangs
/// forever).
fn cut_short(
    t: &mut Tally,
    obs: &Observation,
    e: &Entry,
    (waited, allowed): (u64, u64),
    gave_up_before: bool,
) {
    let what = format!(
        "the runner ended the agent {} after unanswered request #{}, within its limit of {}",
        secs(waited),
        e.seq,
        secs(allowed)
    );
    if gave_up_before || !obs.profile.reactions.gives_up {
        t.note(about(format!("#{} not judged: {what}", e.seq), &[e], None));
    } else {
        t.cut_short(
            format!("{what}, and it had given up on no earlier one"),
            about(line(e), &[e], None),
        );
    }
}

/// A hung request's limits: what the agent may wait in all, and its own timeout.
#[derive(Clone, Copy)]
struct Limits {
    allowed: u64,
    timeout: u64,
}

/// Judges when the agent gave up on the unanswered request `e` (`gave_up_after` ms after it,
/// seen as `what`): within the limit passes; past it fails, unless the runner's stalls or the
/// agent's waits for a CPU could have made it so, or the budget ended the attempt.
fn give_up(
    t: &mut Tally,
    obs: &Observation,
    e: &Entry,
    (gave_up_after, what): (u64, &str),
    Limits { allowed, timeout }: Limits,
    cut_by_budget: bool,
) {
    // A stall only makes the fake's end of the wait late (the wait measured longer): from an
    // arrival the kernel stamped, a wait measured within the limit was so in fact.
    let late = stall_flips(
        gave_up_after,
        allowed + 1,
        obs.arrival_uncertainty_ms(e),
        obs.uncertainty_ms(e.at_ms + gave_up_after),
    );
    // Giving up is CPU-bound work too: an agent the machine kept off the CPU meanwhile (waits
    // the runner measured, short ones added up) may notice its timeout late by as much.
    let held = obs.agent_waited_ms(e.at_ms, e.at_ms + gave_up_after);
    let over = gave_up_after.saturating_sub(allowed);
    if let Some(late) = late.filter(|_| !cut_by_budget) {
        t.uncertain(
            format!(
                "waited {} on unanswered request #{} ({what}), the limit is {}, and the runner's wake-ups around then came up to {late} ms late",
                secs(gave_up_after),
                e.seq,
                secs(allowed)
            ),
            about(line(e), &[e], None),
        );
    } else if over > 0 && !cut_by_budget && held >= over {
        t.uncertain(
            format!(
                "waited {} on unanswered request #{} ({what}), {over} ms past the limit of {}, and its processes waited {held} ms for a CPU meanwhile: the machine, not the agent, may have made it late",
                secs(gave_up_after),
                e.seq,
                secs(allowed)
            ),
            about(line(e), &[e], None),
        );
    } else if over > 0 && !cut_by_budget {
        t.fail(
            format!(
                "waited {} on unanswered request #{} ({what}); the per-request timeout is {}",
                secs(gave_up_after),
                e.seq,
                secs(timeout)
            ),
            about(line(e), &[e], None),
        );
    } else {
        t.note(about(
            format!(
                "gave up on #{} within {} ({what})",
                e.seq,
                secs(gave_up_after)
            ),
            &[e],
            None,
        ));
    }
}
