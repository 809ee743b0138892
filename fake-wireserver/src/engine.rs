//! The scenario engine: given a classified request, decide what the fake does — IMDS's own
//! per-VM limit first (docs/protocol.md §1.2), then the `[rate_limit]`, then the first plan
//! whose id matches the endpoint. Also answers the time triggers (incarnation bumps,
//! reprovision data availability). Pure state machine: the transport executes its decisions.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::documents::Documents;
use crate::endpoint::{EndpointId, Patterns, Service};
use crate::journal::StepRef;
use crate::oracle::ServedIds;
use crate::scenario::{Action, EndPolicy, Scenario, TriggerAction};

/// Bound on the number of client IPs the rate limiter remembers.
const MAX_TRACKED_CLIENTS: usize = 4096;

/// What to do with one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Answer with the default documents.
    Default,
    /// The `[rate_limit]` refused it: the platform's 403.
    Throttled,
    /// IMDS's per-VM limit refused it: the platform's 429 (docs/protocol.md §1.2). Throttled
    /// requests reach no plan, so they consume no scripted step.
    ImdsThrottled,
    /// A scripted step answers.
    Step { step: StepRef, action: Action },
}

struct PlanState {
    patterns: Patterns,
    /// Index of the next step; `steps.len()` once the plan ran out.
    next: usize,
    /// How many requests the current step consumed so far.
    used: u32,
    rng: StdRng,
}

struct RateState {
    patterns: Patterns,
    requests: usize,
    window: Duration,
    clients: HashMap<IpAddr, VecDeque<Instant>>,
}

/// IMDS's per-VM limit: one sliding second over every IMDS request the fake admitted (a fake
/// serves one VM, whatever address its agent's requests come from).
struct ImdsLimit {
    requests: usize,
    seen: VecDeque<Instant>,
}

/// The length of IMDS's window.
const IMDS_WINDOW: Duration = Duration::from_secs(1);

pub(crate) struct Engine {
    scenario: Scenario,
    documents: Documents,
    loaded_at: Instant,
    plans: Vec<PlanState>,
    rate: Option<RateState>,
    imds_limit: Option<ImdsLimit>,
    /// Trigger actions done by steps that answered (`then`), counted per action.
    fired: HashMap<TriggerAction, u64>,
}

impl Engine {
    pub(crate) fn new(scenario: Scenario, now: Instant) -> Self {
        let documents = Documents::new(&scenario);
        let seed = scenario.seed.unwrap_or(0);
        let plans = scenario
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, plan)| PlanState {
                patterns: Patterns::new([plan.id.as_str()]),
                next: 0,
                used: 0,
                // One stream per plan: draws for one endpoint do not depend on traffic to others.
                rng: StdRng::seed_from_u64(seed.wrapping_add(i as u64)),
            })
            .collect();
        let rate = scenario.rate_limit.as_ref().map(|rl| RateState {
            patterns: Patterns::new(rl.endpoints.iter().map(String::as_str)),
            requests: rl.requests as usize,
            window: crate::scenario::seconds(rl.window),
            clients: HashMap::new(),
        });
        let imds_limit = scenario
            .imds
            .rate_limit
            .unwrap_or_default()
            .per_second()
            .map(|n| ImdsLimit {
                requests: n as usize,
                seen: VecDeque::new(),
            });
        Engine {
            scenario,
            documents,
            loaded_at: now,
            plans,
            rate,
            imds_limit,
            fired: HashMap::new(),
        }
    }

    /// Back to the state right after loading: cursors, random streams, rate limiter, trigger
    /// clock.
    pub(crate) fn rewind(&mut self, now: Instant) {
        *self = Engine::new(self.scenario.clone(), now);
    }

    pub(crate) fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    pub(crate) fn documents(&self) -> &Documents {
        &self.documents
    }

    /// How often `action` has happened by `now`: the time triggers passed, and the steps with
    /// it as their `then` that answered.
    fn triggers_passed(&self, action: TriggerAction, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.loaded_at).as_secs_f64();
        let timed = self
            .scenario
            .triggers
            .iter()
            .filter(|t| t.action == action && t.after <= elapsed)
            .count() as u64;
        timed + self.fired.get(&action).copied().unwrap_or(0)
    }

    /// The goal state ids in effect at `now`.
    pub(crate) fn served_ids(&self, now: Instant) -> ServedIds {
        self.documents
            .served_ids(self.triggers_passed(TriggerAction::BumpIncarnation, now))
    }

    pub(crate) fn reprovision_available(&self, now: Instant) -> bool {
        self.triggers_passed(TriggerAction::ReprovisionAvailable, now) > 0
    }

    pub(crate) fn decide(
        &mut self,
        endpoint: EndpointId,
        client: IpAddr,
        now: Instant,
    ) -> Decision {
        if endpoint.service() == Some(Service::Imds)
            && let Some(limit) = self.imds_limit.as_mut()
            && !admit(&mut limit.seen, limit.requests, IMDS_WINDOW, now)
        {
            return Decision::ImdsThrottled;
        }
        let endpoint = endpoint.as_str();
        if let Some(rate) = self.rate.as_mut()
            && rate.patterns.matches(endpoint)
            && !rate.admit(client, now)
        {
            return Decision::Throttled;
        }
        let Some(index) = self.plans.iter().position(|p| p.patterns.matches(endpoint)) else {
            return Decision::Default;
        };
        let plan = &self.scenario.endpoints[index];
        let state = &mut self.plans[index];
        let n = plan.steps.len();
        // Validation refuses an empty plan; never index into one (a panic here holds the lock).
        if n == 0 {
            return Decision::Default;
        }
        if state.next >= n {
            match plan.end {
                EndPolicy::Default => return Decision::Default,
                EndPolicy::Cycle => {
                    state.next = 0;
                    state.used = 0;
                }
                EndPolicy::RepeatLast => {}
            }
        }
        let (step_index, repeat) = if state.next >= n {
            // repeat-last after the plan ran out: keep counting repetitions of the last step.
            state.used = state.used.saturating_add(1);
            (n - 1, state.used)
        } else {
            let i = state.next;
            state.used += 1;
            let repeat = state.used;
            if state.used >= plan.steps[i].times {
                state.next = i + 1;
                if !(state.next == n && plan.end == EndPolicy::RepeatLast) {
                    state.used = 0;
                }
            }
            (i, repeat)
        };
        let step = &plan.steps[step_index];
        if step.probability < 1.0 && state.rng.random::<f64>() >= step.probability {
            return Decision::Default;
        }
        // The platform moves as the fault is met; this request's own answer (and a report's
        // comparison) keeps the goal state taken before it, as the server took it.
        if let Some(action) = step.then {
            *self.fired.entry(action).or_default() += 1;
        }
        Decision::Step {
            step: StepRef {
                endpoint: plan.id.clone(),
                index: step_index,
                repeat,
            },
            action: step.action.clone(),
        }
    }
}

impl RateState {
    /// Sliding window per client IP; only admitted requests count.
    fn admit(&mut self, client: IpAddr, now: Instant) -> bool {
        if self.clients.len() >= MAX_TRACKED_CLIENTS && !self.clients.contains_key(&client) {
            let window = self.window;
            self.clients
                .retain(|_, seen| seen.back().is_some_and(|t| now.duration_since(*t) < window));
            if self.clients.len() >= MAX_TRACKED_CLIENTS {
                self.clients.clear();
            }
        }
        let seen = self.clients.entry(client).or_default();
        admit(seen, self.requests, self.window, now)
    }
}

/// One sliding window: admits a request at `now` unless `requests` were admitted within the
/// `window` before it. Only admitted requests count.
fn admit(seen: &mut VecDeque<Instant>, requests: usize, window: Duration, now: Instant) -> bool {
    while seen
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= window)
    {
        seen.pop_front();
    }
    if seen.len() >= requests {
        return false;
    }
    seen.push_back(now);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::AnswerKind;
    use crate::scenario::{ImdsRateLimit, Preset, Step};
    use std::net::Ipv4Addr;

    const IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn kinds(engine: &mut Engine, endpoint: EndpointId, n: usize) -> Vec<String> {
        let now = Instant::now();
        (0..n)
            .map(|_| match engine.decide(endpoint, IP, now) {
                Decision::Default => AnswerKind::Default.to_string(),
                Decision::Throttled => AnswerKind::Throttled.to_string(),
                Decision::ImdsThrottled => "imds-throttled".to_owned(),
                Decision::Step { step, action } => {
                    format!("{}#{}.{}", action.kind(), step.index, step.repeat)
                }
            })
            .collect()
    }

    fn plan(end: EndPolicy) -> Scenario {
        Scenario::new().endpoint(
            "wireserver.goalstate",
            end,
            vec![
                Step::preset(Preset::Throttled).times(2),
                Step::new(Action::Reset),
            ],
        )
    }

    #[test]
    fn end_policies() {
        let mut e = Engine::new(plan(EndPolicy::Default), Instant::now());
        assert_eq!(
            kinds(&mut e, EndpointId::WireserverGoalstate, 5),
            [
                "respond#0.1",
                "respond#0.2",
                "reset#1.1",
                "default",
                "default"
            ]
        );
        let mut e = Engine::new(plan(EndPolicy::Cycle), Instant::now());
        assert_eq!(
            kinds(&mut e, EndpointId::WireserverGoalstate, 5),
            [
                "respond#0.1",
                "respond#0.2",
                "reset#1.1",
                "respond#0.1",
                "respond#0.2"
            ]
        );
        let mut e = Engine::new(plan(EndPolicy::RepeatLast), Instant::now());
        assert_eq!(
            kinds(&mut e, EndpointId::WireserverGoalstate, 5),
            [
                "respond#0.1",
                "respond#0.2",
                "reset#1.1",
                "reset#1.2",
                "reset#1.3"
            ]
        );
        assert_eq!(
            kinds(&mut e, EndpointId::WireserverVersions, 1),
            ["default"]
        );
    }

    #[test]
    fn probability_replays_with_the_same_seed() {
        // 64 requests at one instant: IMDS's own limit off, the plan is what is tested.
        let scenario = Scenario::new()
            .seed(7)
            .imds_rate_limit(ImdsRateLimit::Off)
            .endpoint(
                "imds.*",
                EndPolicy::RepeatLast,
                vec![Step::new(Action::Close).probability(0.5)],
            );
        let a = kinds(
            &mut Engine::new(scenario.clone(), Instant::now()),
            EndpointId::ImdsInstance,
            64,
        );
        let b = kinds(
            &mut Engine::new(scenario.clone(), Instant::now()),
            EndpointId::ImdsInstance,
            64,
        );
        assert_eq!(a, b);
        assert!(a.iter().any(|k| k == "default") && a.iter().any(|k| k.starts_with("close")));
        let c = kinds(
            &mut Engine::new(scenario.seed(8), Instant::now()),
            EndpointId::ImdsInstance,
            64,
        );
        assert_ne!(a, c);
    }

    #[test]
    fn rate_limit_per_window() {
        let scenario = Scenario::new().rate_limit(2, 10.0, ["wireserver.*"]);
        let mut e = Engine::new(scenario, Instant::now());
        assert_eq!(
            kinds(&mut e, EndpointId::WireserverGoalstate, 3),
            ["default", "default", "throttled"]
        );
        assert_eq!(kinds(&mut e, EndpointId::ImdsInstance, 3), ["default"; 3]);
        let later = Instant::now() + Duration::from_secs(11);
        assert_eq!(
            e.decide(EndpointId::WireserverGoalstate, IP, later),
            Decision::Default
        );
    }

    #[test]
    fn imds_allows_five_requests_a_second_per_vm_by_default() {
        let t0 = Instant::now();
        let scenario = Scenario::new().endpoint(
            EndpointId::ImdsInstance,
            EndPolicy::Default,
            vec![Step::preset(Preset::Gone)],
        );
        let mut e = Engine::new(scenario, t0);
        let other = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        // Twenty requests 40 ms apart, from two addresses: one VM, one budget.
        let got: Vec<Decision> = (0..20u64)
            .map(|i| {
                let client = if i % 2 == 0 { IP } else { other };
                e.decide(
                    EndpointId::ImdsInstance,
                    client,
                    t0 + Duration::from_millis(40 * i),
                )
            })
            .collect();
        assert!(matches!(got[0], Decision::Step { .. }), "{got:?}");
        assert!(got[1..5].iter().all(|d| *d == Decision::Default), "{got:?}");
        assert!(
            got[5..].iter().all(|d| *d == Decision::ImdsThrottled),
            "{got:?}"
        );
        // The wireserver is not IMDS.
        assert_eq!(
            kinds(&mut e, EndpointId::WireserverGoalstate, 8),
            ["default"; 8]
        );
        // One second after the first admitted request, one more is admitted.
        let later = t0 + Duration::from_millis(1000);
        assert_eq!(
            e.decide(EndpointId::ImdsVersions, IP, later),
            Decision::Default
        );
        assert_eq!(
            e.decide(EndpointId::ImdsVersions, IP, later),
            Decision::ImdsThrottled
        );
    }

    #[test]
    fn imds_limit_switched_off_or_set_per_scenario() {
        let off = Scenario::new().imds_rate_limit(ImdsRateLimit::Off);
        let mut e = Engine::new(off, Instant::now());
        assert_eq!(kinds(&mut e, EndpointId::ImdsInstance, 50), ["default"; 50]);
        let two = Scenario::new().imds_rate_limit(ImdsRateLimit::PerSecond(2));
        let mut e = Engine::new(two, Instant::now());
        assert_eq!(
            kinds(&mut e, EndpointId::ImdsInstance, 3),
            ["default", "default", "imds-throttled"]
        );
        // A rewind starts a new second.
        e.rewind(Instant::now());
        assert_eq!(kinds(&mut e, EndpointId::ImdsUnknown, 1), ["default"]);
    }

    #[test]
    fn extreme_numbers_from_code_do_not_panic() {
        // The engine also serves what validation would refuse (it must never panic on it).
        let mut scenario = Scenario::new().endpoint(
            "imds.*",
            EndPolicy::Default,
            vec![Step::new(Action::Delay {
                seconds: f64::NAN,
                reply: None,
            })],
        );
        scenario.rate_limit = Some(crate::scenario::RateLimit {
            requests: 1,
            window: 1e300,
            endpoints: vec!["*".to_owned()],
        });
        let mut e = Engine::new(scenario, Instant::now());
        assert_eq!(
            kinds(&mut e, EndpointId::ImdsInstance, 2),
            ["delay#0.1", "throttled"]
        );
        assert_eq!(crate::scenario::seconds(-1.0), Duration::ZERO);
        assert_eq!(crate::scenario::seconds(1e300).as_secs(), 86_400);
    }

    #[test]
    fn an_empty_plan_gives_the_default_answer() {
        let mut scenario = Scenario::new();
        for end in [EndPolicy::RepeatLast, EndPolicy::Cycle, EndPolicy::Default] {
            scenario.endpoints.push(crate::scenario::EndpointPlan {
                id: "imds.*".to_owned(),
                end,
                steps: Vec::new(),
            });
            let mut e = Engine::new(scenario.clone(), Instant::now());
            assert_eq!(kinds(&mut e, EndpointId::ImdsInstance, 2), ["default"; 2]);
            scenario.endpoints.clear();
        }
    }

    #[test]
    fn triggers_follow_the_clock() {
        let t0 = Instant::now();
        let scenario = Scenario::new()
            .incarnation("5")
            .trigger(2.0, TriggerAction::BumpIncarnation)
            .trigger(3.0, TriggerAction::ReprovisionAvailable);
        let e = Engine::new(scenario, t0);
        assert_eq!(e.served_ids(t0).incarnation, "5");
        assert!(!e.reprovision_available(t0));
        let t = t0 + Duration::from_secs(4);
        assert_eq!(e.served_ids(t).incarnation, "6");
        assert!(e.reprovision_available(t));
    }

    #[test]
    fn a_step_moves_the_goal_state_as_it_answers() {
        let t0 = Instant::now();
        let scenario = Scenario::new().incarnation("5").endpoint(
            "wireserver.health.*",
            EndPolicy::Default,
            vec![
                Step::respond(503),
                Step::gone().then(TriggerAction::BumpIncarnation).times(2),
                Step::gone()
                    .then(TriggerAction::BumpIncarnation)
                    .probability(0.0),
            ],
        );
        scenario.validate().unwrap();
        let mut e = Engine::new(scenario, t0);
        kinds(&mut e, EndpointId::WireserverHealthXml, 1);
        assert_eq!(e.served_ids(t0).incarnation, "5", "a step without `then`");
        kinds(&mut e, EndpointId::WireserverHealthXml, 1);
        assert_eq!(
            e.served_ids(t0).incarnation,
            "6",
            "moved as the 410 is given"
        );
        kinds(&mut e, EndpointId::WireserverHealthXml, 1);
        assert_eq!(e.served_ids(t0).incarnation, "7", "each time it answers");
        // A step whose draw gives the default answer does not move it; nor does the default.
        kinds(&mut e, EndpointId::WireserverHealthXml, 2);
        assert_eq!(e.served_ids(t0).incarnation, "7");
        e.rewind(t0);
        assert_eq!(e.served_ids(t0).incarnation, "5", "rewound with the rest");
    }
}
