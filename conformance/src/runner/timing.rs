//! How long one (agent, scenario) pair may run.
//!
//! A scenario's `deadline` is sized for an agent that takes `{retry_interval}` and `{budget}`
//! from the scenario. Real agents often have fixed timing (cloud-init 22.4.2 sleeps 5 s between
//! attempts and gives up after 20 minutes; afterburn backs off 1, 2, 4, 5 ... s), declared in
//! their profile (`reactions.retry_interval_min` / `retry_interval_max` / `budget`). Killing
//! such an agent at the scenario's deadline would judge the runner's impatience, not the agent,
//! so the deadline grows by the profile's interval for every scripted fault (and by its fixed
//! `request_timeout` for every unanswered request). A scenario that only ends at a fixed budget
//! longer than [`CASE_LIMIT_SECONDS`], or whose faults would take longer than that, is not run
//! (skipped, saying why).

use fake_wireserver::{Action as StepAction, EndPolicy};

use crate::agent::AgentProfile;
use crate::scenario::{Scenario, Target};

/// The longest a case may take when an agent's fixed budget decides its end.
pub const CASE_LIMIT_SECONDS: f64 = 60.0;

/// The timing of one pair.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseTiming {
    /// Seconds after which each invocation is killed.
    pub deadline: f64,
    /// Rough seconds a conforming agent waits (the runner starts the longest first).
    pub expected_wait: f64,
}

/// The timing of `scenario` run by `profile`, or why it cannot be run in reasonable time.
pub fn case_timing(profile: &AgentProfile, scenario: &Scenario) -> Result<CaseTiming, String> {
    let a = &scenario.agent;
    let r = &profile.reactions;
    if let Some(budget) = r.budget
        && budget > CASE_LIMIT_SECONDS
        && never_succeeds(scenario)
    {
        return Err(format!(
            "the scenario never lets the report through, so {} stops only at its fixed {budget} s budget (profile reactions.budget, docs/protocol.md §8); wirecheck runs no case longer than {CASE_LIMIT_SECONDS} s",
            profile.name
        ));
    }
    if let Some(imds_budget) = r.imds_budget
        && imds_budget > CASE_LIMIT_SECONDS
        && imds_never_succeeds(scenario)
    {
        return Err(format!(
            "IMDS never answers with the instance document, so {} gives up on it only after its fixed {imds_budget} s (profile reactions.imds_budget); wirecheck runs no case longer than {CASE_LIMIT_SECONDS} s",
            profile.name
        ));
    }
    let fixed_interval = r.retry_interval_max.or(r.retry_interval_min);
    if fixed_interval.is_none() && r.request_timeout.is_none() {
        return Ok(CaseTiming {
            deadline: a.deadline,
            expected_wait: scenario.expected_wait(),
        });
    }
    // Every scripted fault costs the agent at most one (longest) sleep more than the scenario
    // planned with, and an unanswered request its own timeout instead of the scenario's; a
    // throttled flow (rate limit) about one sleep per request of the flow.
    let extra_sleep = fixed_interval.map_or(0.0, |i| (i - a.retry_interval).max(0.0));
    // After a throttling answer some agents wait much less than their longest backoff.
    let after = |status: Option<u16>| {
        // An answer the agent gives up on costs no sleep.
        let fatal = status.is_some_and(|s| {
            let retried = (200..300).contains(&s)
                || r.retryable.contains(&s)
                || (s == 403 && r.status_403 != crate::agent::Forbidden::Fatal);
            !retried
        });
        if fatal {
            return 0.0;
        }
        let sleep = match status {
            Some(403 | 429 | 503) => r.retry_interval_throttled,
            _ => None,
        }
        .or(match status {
            Some(503) => r.retry_interval_503,
            _ => None,
        });
        sleep.map_or(extra_sleep, |s| (s - a.retry_interval).max(0.0))
    };
    let extra_wait = r
        .request_timeout
        .map_or(0.0, |t| (t - a.request_timeout).max(0.0));
    let mut extra = 0.0;
    for plan in &scenario.fake.endpoints {
        for step in &plan.steps {
            // A delay may end without a retry; counting it only makes the deadline longer.
            let waits = matches!(
                step.action,
                StepAction::Hang | StepAction::Slow { .. } | StepAction::Delay { .. }
            );
            let status = match &step.action {
                StepAction::Respond(reply) => reply.status.or(reply.preset.map(|p| p.status())),
                StepAction::Delay { .. }
                | StepAction::Hang
                | StepAction::Reset
                | StepAction::Close
                | StepAction::Malformed { .. }
                | StepAction::Partial { .. }
                | StepAction::Slow { .. } => None,
            };
            let each = after(status) + if waits { extra_wait } else { 0.0 };
            extra += each * f64::from(step.times);
        }
    }
    if scenario.fake.rate_limit.is_some() {
        // The rate limiter answers with the platform's 403 throttle reply.
        extra += after(Some(403)) * f64::from(RATE_LIMITED_RETRIES);
    }
    let deadline = a.deadline + extra;
    if deadline > CASE_LIMIT_SECONDS.max(a.deadline) {
        return Err(format!(
            "with {}'s fixed timing (profile reactions) this scenario's faults take about {deadline:.0} s; wirecheck runs no case longer than {CASE_LIMIT_SECONDS} s",
            profile.name
        ));
    }
    let runs = a.runs.len().max(1) as f64;
    Ok(CaseTiming {
        deadline,
        expected_wait: (scenario.expected_wait() + extra * runs).min(deadline * runs),
    })
}

/// Retries allowed for under a rate limit: one per request of a goal state + health flow.
const RATE_LIMITED_RETRIES: u32 = 3;

/// True when no report can ever be accepted: the wireserver refuses connections, or a
/// wireserver endpoint repeats or cycles its faults forever.
fn never_succeeds(scenario: &Scenario) -> bool {
    scenario.agent.wireserver == Target::Closed
        || scenario
            .fake
            .plans_for(fake_wireserver::Service::Wireserver)
            .iter()
            .any(|p| p.end != EndPolicy::Default)
}

/// True when IMDS never serves its documents: refused connections, or an IMDS plan that
/// repeats or cycles its faults forever.
fn imds_never_succeeds(scenario: &Scenario) -> bool {
    scenario.agent.imds == Target::Closed
        || scenario
            .fake
            .plans_for(fake_wireserver::Service::Imds)
            .iter()
            .any(|p| p.end != EndPolicy::Default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scenario(extra: &str) -> Scenario {
        let text = format!(
            "id = \"s\"\ntitle = \"t\"\nchecks = [\"behaviour.exit\"]\n[agent]\naction = \"ready\"\nprotocol = \"xml\"\n{extra}"
        );
        Scenario::from_toml_str(&text, Path::new("s.toml"))
            .unwrap()
            .remove(0)
    }

    fn profile(reactions: &str) -> AgentProfile {
        let text = format!(
            "name = \"p\"\ndescription = \"p\"\ncapabilities = [\"xml\"]\n[commands]\nready = [\"true\"]\n[reactions]\nretryable = [500]\ntransport_errors = \"retry\"\nstatus_403 = \"throttling\"\n{reactions}"
        );
        AgentProfile::from_toml_str(&text, Path::new("p.toml")).unwrap()
    }

    const THREE_500S: &str = "[[fake.endpoint]]\nid = \"wireserver.health.xml\"\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 500\ntimes = 3\n";

    #[test]
    fn agents_taking_the_scenarios_timing_keep_its_deadline() {
        let s = scenario(THREE_500S);
        let t = case_timing(&profile(""), &s).unwrap();
        assert_eq!(t.deadline, s.agent.deadline);
        assert_eq!(t.expected_wait, s.expected_wait());
    }

    #[test]
    fn a_fixed_interval_adds_one_sleep_per_scripted_fault() {
        let s = scenario(THREE_500S);
        let t = case_timing(&profile("retry_interval_min = 5.0\nbudget = 1200.0"), &s).unwrap();
        // 3 faults, each 5 s instead of the scenario's 0.2 s.
        assert!(
            (t.deadline - (s.agent.deadline + 3.0 * 4.8)).abs() < 1e-9,
            "{t:?}"
        );
        let backoff = profile("retry_interval_min = 1.0\nretry_interval_max = 5.0");
        assert_eq!(case_timing(&backoff, &s).unwrap().deadline, t.deadline);
    }

    #[test]
    fn scenarios_too_long_for_fixed_timing_are_not_run() {
        let many = scenario(&THREE_500S.replace("times = 3", "times = 100"));
        let why = case_timing(&profile("retry_interval_min = 5.0"), &many).unwrap_err();
        assert!(why.contains("no case longer than 60 s"), "{why}");
        // A fixed 60 s read timeout makes one hang too long.
        let hang = scenario(
            "[[fake.endpoint]]\nid = \"wireserver.goalstate\"\n[[fake.endpoint.step]]\nkind = \"hang\"\n",
        );
        assert!(case_timing(&profile("request_timeout = 60.0"), &hang).is_err());
        let t = case_timing(&profile("request_timeout = 30.0"), &hang).unwrap();
        assert!(
            (t.deadline - (hang.agent.deadline + 29.0)).abs() < 1e-9,
            "{t:?}"
        );
    }

    #[test]
    fn endless_scenarios_are_not_run_against_long_fixed_budgets() {
        let closed = scenario("wireserver = \"closed\"\n");
        let why = case_timing(&profile("budget = 1200.0"), &closed).unwrap_err();
        assert!(why.contains("fixed 1200 s budget"), "{why}");
        let repeat = scenario(&THREE_500S.replace(
            "id = \"wireserver.health.xml\"",
            "id = \"wireserver.health.xml\"\nend = \"repeat-last\"",
        ));
        assert!(case_timing(&profile("budget = 1200.0"), &repeat).is_err());
        // Decided on the endpoints a pattern matches, not on how it starts: `*` and
        // `?ireserver.*` script the wireserver too; an IMDS-only plan does not.
        for (pattern, endless) in [
            ("*", true),
            ("?ireserver.health.*", true),
            ("imds.*", false),
        ] {
            let s = scenario(&THREE_500S.replace(
                "id = \"wireserver.health.xml\"",
                &format!("id = \"{pattern}\"\nend = \"repeat-last\""),
            ));
            assert_eq!(
                case_timing(&profile("budget = 1200.0"), &s).is_err(),
                endless,
                "{pattern}"
            );
        }
        // A plan shadowed by an earlier one for every wireserver endpoint never answers it.
        let shadowed = scenario(&format!(
            "{}[[fake.endpoint]]\nid = \"*\"\nend = \"repeat-last\"\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 500\n",
            THREE_500S.replace("wireserver.health.xml", "wireserver.*")
        ));
        assert!(case_timing(&profile("budget = 1200.0"), &shadowed).is_ok());
        // A short fixed budget, or the scenario's own budget: run it.
        assert!(case_timing(&profile("budget = 30.0"), &closed).is_ok());
        assert!(case_timing(&profile(""), &closed).is_ok());
    }

    #[test]
    fn an_imds_that_never_answers_is_not_run_against_a_long_fixed_imds_budget() {
        let closed = scenario("imds = \"closed\"\n");
        let why = case_timing(&profile("imds_budget = 300.0"), &closed).unwrap_err();
        assert!(
            why.contains("fixed 300 s (profile reactions.imds_budget)"),
            "{why}"
        );
        let endless = scenario(&THREE_500S.replace(
            "id = \"wireserver.health.xml\"",
            "id = \"imds.*\"\nend = \"repeat-last\"",
        ));
        assert!(case_timing(&profile("imds_budget = 300.0"), &endless).is_err());
        // IMDS answers in the end, or the agent's IMDS patience fits in a case: run it.
        let three = scenario(&THREE_500S.replace("wireserver.health.xml", "imds.instance"));
        assert!(case_timing(&profile("imds_budget = 300.0"), &three).is_ok());
        assert!(case_timing(&profile("imds_budget = 30.0"), &closed).is_ok());
    }
}
