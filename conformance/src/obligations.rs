//! What a profile obliges its agent to do with each answer, and what that costs in time: the one
//! model the checks (`observe`: the interval after an answer), the runner (`runner::timing`:
//! deadlines, expected waits, the speed of agent time) and the benches (`mandated_wait`) read,
//! so a new reaction is decided here once; what a fault kind costs derives from how its answer
//! reaches the client (its `Delivery`, stated in the fake's `answer_kinds!` row).
//!
//! * [`taken`]: whether an answer's status ends the agent's loop (success), sends it round again
//!   (retry) or makes it give up (fatal), by the profile's reactions (docs/protocol.md §8.2);
//! * [`wait_after`]: the seconds between an answer and the next attempt, at least (what
//!   `behaviour.interval` holds the agent to) and at most (what a deadline allows for);
//! * [`step_cost`]: what one scripted step of the fake costs the agent: how it takes the answer,
//!   and the seconds the answer itself takes (a delay, or an unanswered request's timeout);
//! * [`tries_exhausted_after`]: how long an agent that counts its tries takes to use them all;
//! * [`plan_reached`]: whether a scripted plan can meet the agent at all (one that sends no
//!   health report never meets a plan for health reports alone).

use fake_wireserver::{Action as StepAction, Delivery, Preset, Reply, Service};

use crate::agent::{Forbidden, HealthReporting, Reaction, Reactions};
use crate::scenario::AgentPlan;

/// How the agent takes one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// It is what the agent asked for: the loop moves on.
    Success,
    /// The agent tries again after its interval.
    Retry,
    /// The agent gives up on it.
    Fatal,
}

/// How an agent with reactions `r` takes `status` from `service`; `throttle_body`: the body is
/// the platform's throttle reply (`RequestRateLimitExceeded`).
pub fn taken(r: &Reactions, service: Service, status: u16, throttle_body: bool) -> Taken {
    if (200..300).contains(&status) {
        return Taken::Success;
    }
    let imds = service == Service::Imds;
    let retried = if status == 403 {
        let forbidden = if imds {
            r.imds_status_403.unwrap_or(r.status_403)
        } else {
            r.status_403
        };
        match forbidden {
            Forbidden::Throttling => true,
            Forbidden::ThrottleBody => throttle_body,
            Forbidden::Fatal => false,
        }
    } else if imds {
        r.imds_retryable
            .as_ref()
            .unwrap_or(&r.retryable)
            .contains(&status)
    } else {
        r.retryable.contains(&status)
    };
    if retried { Taken::Retry } else { Taken::Fatal }
}

/// How a transport failure (no answer, a reset, a reply cut short) is taken.
pub fn transport_taken(r: &Reactions) -> Taken {
    match r.transport_errors {
        Reaction::Retry => Taken::Retry,
        Reaction::Fatal => Taken::Fatal,
    }
}

/// Seconds between an answer and the agent's next attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wait {
    /// At least this: a shorter wait fails `behaviour.interval`.
    pub min: f64,
    /// At most this, for sizing deadlines (an agent backing off: its longest sleep).
    pub max: f64,
}

/// The wait after an answer with `status` (`None`: no status, a transport failure) from
/// `service`: the throttled or 503 wait when the profile fixes one, IMDS's own interval, else
/// the profile's fixed interval, else the one the scenario passes (`a.retry_interval`).
pub fn wait_after(r: &Reactions, a: &AgentPlan, service: Service, status: Option<u16>) -> Wait {
    let special = match status {
        Some(403 | 429) => r.retry_interval_throttled,
        Some(503) => r.retry_interval_throttled.or(r.retry_interval_503),
        _ => None,
    };
    if let Some(wait) = special {
        return Wait {
            min: wait,
            max: wait,
        };
    }
    let fixed_min = r.retry_interval_min.unwrap_or(a.retry_interval);
    let fixed_max = r.retry_interval_max.unwrap_or(fixed_min);
    match (service, r.imds_retry_interval_min) {
        (Service::Imds, Some(imds)) => Wait {
            min: imds,
            max: fixed_max.max(imds),
        },
        _ => Wait {
            min: fixed_min,
            max: fixed_max,
        },
    }
}

/// The `n`-th sleep (from 0) of an agent whose sleeps double from its first interval up to its
/// longest (afterburn's `retry::Retry`: 1, 2, 4, 5, 5 ... s).
fn doubling_sleep(r: &Reactions, a: &AgentPlan, n: u32) -> f64 {
    let first = r.retry_interval_min.unwrap_or(a.retry_interval);
    let longest = r.retry_interval_max.unwrap_or(first);
    (first * 2f64.powi(n.min(30) as i32)).min(longest)
}

/// Seconds an agent that counts its tries (`reactions.tries`) takes to use them all when every
/// attempt takes `busy` seconds (an unanswered request: its timeout): each sequence tries the
/// request that never succeeds `per_request` times with a sleep between tries, and the
/// sequences sleep between them too. `None`: its loops are bounded by time, not counts.
pub fn tries_exhausted_after(r: &Reactions, a: &AgentPlan, busy: f64) -> Option<f64> {
    let tries = r.tries?;
    let sleeps = |n: u32| -> f64 {
        (0..n.saturating_sub(1))
            .map(|k| doubling_sleep(r, a, k))
            .sum()
    };
    let sequence = f64::from(tries.per_request) * busy + sleeps(tries.per_request);
    Some(f64::from(tries.sequences) * sequence + sleeps(tries.sequences))
}

/// The attempts an agent that counts its tries makes before it gives up on a wireserver that
/// never lets its report through: each sequence's failing request `per_request` times and the
/// goal state before it, and the versions check once.
pub fn tries_attempts(r: &Reactions) -> Option<u32> {
    let tries = r.tries?;
    Some(tries.sequences * (tries.per_request + 1) + 1)
}

/// Seconds the agent waits for an answer: its fixed timeout, else the scenario's.
pub fn request_timeout(r: &Reactions, a: &AgentPlan) -> f64 {
    r.request_timeout.unwrap_or(a.request_timeout)
}

/// What one scripted step costs the agent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    pub taken: Taken,
    /// The answer's status, when it has one.
    pub status: Option<u16>,
    /// Seconds the answer itself takes the agent: a delay shorter than its timeout, or its
    /// whole timeout for an answer that never comes in time.
    pub busy: f64,
}

/// What `action`, scripted on `service`, costs an agent with reactions `r` run as `a` says.
pub fn step_cost(r: &Reactions, a: &AgentPlan, service: Service, action: &StepAction) -> StepCost {
    let timeout = request_timeout(r, a);
    let transport = |busy: f64| StepCost {
        taken: transport_taken(r),
        status: None,
        busy,
    };
    match action.kind().delivery() {
        Delivery::AtOnce => match action.reply() {
            Some(reply) => reply_cost(r, a, service, reply),
            None => StepCost {
                taken: Taken::Success,
                status: None,
                busy: 0.0,
            },
        },
        Delivery::AfterWait | Delivery::OverTime | Delivery::Never => {
            match action.held_seconds(timeout) {
                busy if busy < timeout => StepCost {
                    taken: Taken::Success,
                    status: None,
                    busy,
                },
                _ => transport(timeout),
            }
        }
        Delivery::Broken(_) => transport(0.0),
    }
}

/// What a scripted reply costs: how the profile takes its status, and the `Retry-After` it
/// honours.
fn reply_cost(r: &Reactions, a: &AgentPlan, service: Service, reply: &Reply) -> StepCost {
    let status = reply
        .status
        .or(reply.preset.map(|p| p.status()))
        .unwrap_or(200);
    let throttle_body = reply.preset == Some(Preset::Throttled) && reply.body.is_none();
    let taken = taken(r, service, status, throttle_body);
    // An agent that honours Retry-After sleeps it before the retry: the answer costs that long,
    // up to its budget (a deadline allows for it; past the budget the runner ends it, and
    // behaviour.budget judges a sleep the budget did not end).
    let busy = if taken == Taken::Retry && r.honours_retry_after.contains(&status) {
        retry_after_seconds(&reply.headers).min(r.budget.unwrap_or(a.budget))
    } else {
        0.0
    };
    StepCost {
        taken,
        status: Some(status),
        busy,
    }
}

/// The seconds of a `Retry-After: N` among `headers` (0 without one, or with an HTTP date).
fn retry_after_seconds(headers: &[(String, String)]) -> f64 {
    headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, value)| value.trim().parse::<u32>().ok())
        .map_or(0.0, f64::from)
}

/// The service a plan of the scenario's fake scripts: IMDS when it answers only IMDS, else the
/// wireserver (a plan for both, `"*"`, counts as the wireserver's).
pub fn plan_service(
    fake: &fake_wireserver::Scenario,
    plan: &fake_wireserver::EndpointPlan,
) -> Service {
    let answers = |service| {
        fake.plans_for(service)
            .iter()
            .any(|p| std::ptr::eq(*p, plan))
    };
    if answers(Service::Imds) && !answers(Service::Wireserver) {
        Service::Imds
    } else {
        Service::Wireserver
    }
}

/// Whether an agent that reports `health` can ever be answered by `plan`: not when every
/// endpoint the plan answers is a health report and the agent sends none (`health_report =
/// "none"`): its faults never play, so they cost it no time. An agent that reports anyway
/// fails behaviour.terminal whatever its deadline.
pub fn plan_reached(
    health: HealthReporting,
    fake: &fake_wireserver::Scenario,
    plan: &fake_wireserver::EndpointPlan,
) -> bool {
    health != HealthReporting::None
        || fake_wireserver::EndpointId::ALL
            .into_iter()
            .any(|id| !id.is_health() && fake.plan_for(id).is_some_and(|p| std::ptr::eq(p, plan)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn reactions(extra: &str) -> Reactions {
        let text = format!(
            "name = \"p\"\ndescription = \"p\"\ncapabilities = [\"xml\"]\n[commands]\nready = [\"true\"]\n[reactions]\nretryable = [500, 503]\ntransport_errors = \"retry\"\nstatus_403 = \"throttle-body\"\n{extra}"
        );
        crate::agent::AgentProfile::from_toml_str(&text, Path::new("p.toml"))
            .unwrap()
            .reactions
    }

    #[test]
    fn imds_overrides_and_the_throttle_body_decide_how_an_answer_is_taken() {
        let r = reactions("imds_retryable = [404]\nimds_status_403 = \"throttling\"\n");
        assert_eq!(taken(&r, Service::Wireserver, 200, false), Taken::Success);
        assert_eq!(taken(&r, Service::Wireserver, 500, false), Taken::Retry);
        assert_eq!(taken(&r, Service::Imds, 500, false), Taken::Fatal);
        assert_eq!(taken(&r, Service::Imds, 404, false), Taken::Retry);
        assert_eq!(taken(&r, Service::Wireserver, 403, false), Taken::Fatal);
        assert_eq!(taken(&r, Service::Wireserver, 403, true), Taken::Retry);
        assert_eq!(taken(&r, Service::Imds, 403, false), Taken::Retry);
    }

    #[test]
    fn waits_follow_the_profile_then_the_scenario() {
        let plan = crate::scenario::Scenario::from_toml_str(
            "id = \"s\"\ntitle = \"t\"\nchecks = [\"behaviour.exit\"]\n[agent]\naction = \"ready\"\nprotocol = \"xml\"\nretry_interval = 0.2\n",
            Path::new("s.toml"),
        )
        .unwrap()
        .remove(0)
        .agent;
        let scenario_only = reactions("");
        let w = wait_after(&scenario_only, &plan, Service::Wireserver, Some(500));
        assert_eq!((w.min, w.max), (0.2, 0.2));
        let r = reactions(
            "retry_interval_min = 1.0\nretry_interval_max = 30.0\nimds_retry_interval_min = 2.0\nretry_interval_503 = 5.0\n",
        );
        let w = wait_after(&r, &plan, Service::Wireserver, Some(500));
        assert_eq!((w.min, w.max), (1.0, 30.0));
        let w = wait_after(&r, &plan, Service::Wireserver, Some(503));
        assert_eq!((w.min, w.max), (5.0, 5.0));
        let w = wait_after(&r, &plan, Service::Imds, None);
        assert_eq!((w.min, w.max), (2.0, 30.0));
    }

    /// A scripted `Retry-After` costs an agent that honours it its seconds, up to its budget
    /// (the case's deadline allows for the sleep: cloud-init 25.1 was killed 7.8 s into a
    /// generated 503 with `Retry-After: 30`), and nothing to one that ignores it or gives up on
    /// the answer.
    #[test]
    fn a_retry_after_costs_what_it_says_only_to_an_agent_that_honours_it() {
        let plan = crate::scenario::Scenario::from_toml_str(
            "id = \"s\"\ntitle = \"t\"\nchecks = [\"behaviour.exit\"]\n[agent]\naction = \"ready\"\nprotocol = \"xml\"\n",
            Path::new("s.toml"),
        )
        .unwrap()
        .remove(0)
        .agent;
        let reply = |status: u16| {
            StepAction::Respond(fake_wireserver::Reply {
                status: Some(status),
                headers: vec![("retry-after".into(), "30".into())],
                ..Default::default()
            })
        };
        let honours = reactions("honours_retry_after = [503]\n");
        let cost = |r: &Reactions, status| step_cost(r, &plan, Service::Wireserver, &reply(status));
        assert_eq!(
            cost(&honours, 503).busy,
            3.0,
            "capped at the scenario's 3 s budget"
        );
        let patient = reactions("honours_retry_after = [503]\nbudget = 1200.0\n");
        assert_eq!(cost(&patient, 503).busy, 30.0);
        assert_eq!(cost(&reactions(""), 503).busy, 0.0);
        // A 404 is fatal to it: nothing to sleep; a 500's Retry-After it does not honour.
        assert_eq!(cost(&honours, 404).busy, 0.0);
        assert_eq!(cost(&honours, 500).busy, 0.0);
    }
}
