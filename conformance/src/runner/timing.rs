//! How long one (agent, scenario) pair may run, and how fast its agent's clock runs.
//!
//! A scenario's `deadline` is sized for an agent that takes `{retry_interval}` and `{budget}`
//! from the scenario. Real agents often have fixed timing (cloud-init 22.4.2 sleeps 5 s between
//! attempts and gives up after 20 minutes; afterburn backs off 1, 2, 4, 5 ... s), declared in
//! their profile (`reactions.retry_interval_min` / `retry_interval_max` / `budget`). Killing
//! such an agent at the scenario's deadline would judge the runner's impatience, not the agent,
//! so the deadline grows by the profile's interval for every scripted fault (and by its fixed
//! `request_timeout` for every unanswered request), and a scenario that only ends at a fixed
//! budget gets that budget (or, for an agent that counts its tries, the time they take, each
//! attempt as long as the answer that never comes, and each allowed its own work). All of that
//! is agent time. An agent that never gives up
//! (`gives_up = false`: WALinuxAgent's daemon starts its loop over) runs such a scenario to a
//! horizon instead: two of its longest waits and one request timeout past the deadline.
//!
//! Agent time ([`fake_wireserver::clock`]): an agent whose profile says its clock is
//! `scalable` runs a case whose deadline is longer than [`WALL_TARGET_SECONDS`] at the speed
//! that brings it there (at most [`TimeScale::MAX`], and no faster than the finest interval the
//! case judges allows), or at the run's `--time-scale`; a shorter case keeps the wall clock,
//! where its timings are judged most finely. A pair whose deadline would still take longer than
//! [`CASE_LIMIT_SECONDS`] of the wall clock is not run (skipped, saying why).

use fake_wireserver::EndPolicy;
use fake_wireserver::clock::TimeScale;

use crate::agent::AgentProfile;
use crate::obligations::{self, Taken};
use crate::scenario::{Scenario, Target};

/// The longest a case may take on the wall clock (its kill deadline, own-work allowance
/// included). 60 s until afterburn's endless hang (66 reports, each waiting out its 30 s timeout:
/// 79 s of deadline at x50, the speed its 1 s back-off allows) was found to run in 49 s and be
/// judged: a case skipped for its length judges nothing.
pub const CASE_LIMIT_SECONDS: f64 = 90.0;

/// The longest deadline a case keeps the wall clock for; a longer one is sped up to fit it. At
/// the wall clock timings are judged most finely (a stall counts once, not N times), so only a
/// case that would otherwise be slow or not run at all is sped up.
pub const WALL_TARGET_SECONDS: f64 = 10.0;

/// The least wall time a sped-up agent gets for its own work besides its waits. Measured:
/// WALinuxAgent 2.7.3 against an XML 500 took 5.5 s of the wall's beyond its waits at x20 and
/// 11 s at x5 on a loaded 2-core machine (an openssl key pair per goal state); the scenario's
/// 7 s deadline left it killed before its report.
const OWN_WORK_SECONDS: f64 = 12.0;

/// The wall time each attempt of an agent that makes many (`tries`) is allowed for its own work
/// besides the whole case's [`OWN_WORK_SECONDS`]. Measured: afterburn's 73 attempts at x16 took
/// 10.8 s of the wall's beyond their sleeps (150 ms each, a new HTTP client per attempt) on an
/// idle 2-core machine; twice that leaves room for a loaded one.
const OWN_WORK_PER_ATTEMPT_SECONDS: f64 = 0.3;

/// The timing of one pair. `deadline`, `expected_wait` and `planned_wait` are agent seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseTiming {
    /// Seconds of agent time after which each invocation is killed.
    pub deadline: f64,
    /// Rough seconds of agent time a conforming agent waits.
    pub expected_wait: f64,
    /// Seconds of agent time the runner plans the pair for (it starts the longest first): the
    /// expected wait, or the whole deadline for a daemon that will not report ([`planned_wait`]).
    pub planned_wait: f64,
    /// How fast the agent's clock (and the fake's) runs in this case.
    pub scale: TimeScale,
}

impl CaseTiming {
    /// The deadline on the wall clock.
    pub fn wall_deadline(&self) -> f64 {
        self.deadline / self.scale.factor()
    }

    /// The planned wait on the wall clock: the runner starts the longest first.
    pub fn wall_planned(&self) -> f64 {
        self.planned_wait / self.scale.factor()
    }
}

/// The timing of `scenario` run by `profile`, or why it cannot be run in reasonable time.
pub fn case_timing(profile: &AgentProfile, scenario: &Scenario) -> Result<CaseTiming, String> {
    let FaultTiming {
        deadline,
        expected_wait,
        finest_wait,
        ends_at_horizon,
        attempts,
    } = agent_timing(profile, scenario);
    let scale = profile
        .clock
        .scale(wanted_scale(deadline).min(finest_scale(finest_wait)));
    // The agent's own work (start-up, parsing, key generation, exit) is not sped up: sped up,
    // it gets the scenario's own deadline of the wall clock more to do it in, and at least
    // OWN_WORK_SECONDS. A kill is the runner's patience, not a judged tolerance: the checks
    // judge what reached the fake. An agent the runner ends at its horizon has nothing to
    // finish: the kill is its normal end.
    // Many attempts each cost their own work too (afterburn: a new HTTP client per attempt).
    let own_work = if ends_at_horizon {
        0.0
    } else {
        scenario.agent.deadline.max(OWN_WORK_SECONDS)
            + f64::from(attempts) * OWN_WORK_PER_ATTEMPT_SECONDS
    };
    let deadline = deadline + own_work * (scale.factor() - 1.0);
    let planned_wait = planned_wait(profile, scenario, deadline, expected_wait);
    let timing = CaseTiming {
        deadline,
        expected_wait,
        planned_wait,
        scale,
    };
    let limit = CASE_LIMIT_SECONDS.max(scenario.agent.deadline);
    if timing.wall_deadline() > limit {
        let at = if scale.is_wall() {
            format!(
                "its clock runs at the wall clock (profile clock = \"{}\")",
                profile.clock.kind.as_str()
            )
        } else {
            format!("even at agent time {scale}")
        };
        return Err(format!(
            "with {}'s fixed timing (profile reactions) this scenario takes about {deadline:.0} s of agent time, and {at} that is {:.0} s of the wall's; wirecheck runs no case longer than {CASE_LIMIT_SECONDS} s",
            profile.name,
            timing.wall_deadline()
        ));
    }
    Ok(timing)
}

/// The agent seconds the runner plans a pair for, to start the longest first: its expected
/// wait, unless it is a daemon (`done = "terminal-report"`) that will not send the terminal
/// report that ends it early: one whose mode sends no health report, or whose profile declares
/// that it does not end this scenario as it should (a deviation on its `behaviour.terminal`).
/// Such a daemon is killed at its `deadline` (its own-work allowance included; one that sends
/// other reports gets its `done_grace` of the wall's after it too, left out here), so it is
/// planned there; a daemon runs in the sandbox, one invocation per pair (an in-progress run
/// that goes on to Ready plays both runs), so the deadline is counted once. Measured: the
/// 14-profile matrix started WALinuxAgent's waagent-mode malformed ovf-env.xml (no fault
/// scripted: an expected wait of 0, its deviation declared) last, and it ran to its deadline
/// for 41 s alone at the end (171-175 s). Replaying five such runs' pair times in the runner's
/// order on its 16 slots: 165-177 s planned at the expected wait, 142-158 s with every daemon
/// at its deadline (a reporting WALinuxAgent, ended seconds after its report, then goes ahead
/// of cloud-init's long cases: the seven-profile matrix 1-10 s slower), 141-154 s with these
/// alone, where knowing every pair's time would give 138-151 s.
fn planned_wait(profile: &AgentProfile, scenario: &Scenario, deadline: f64, expected: f64) -> f64 {
    let terminal_case = format!("{}.behaviour.terminal", scenario.id);
    let never_ended_by_a_report = profile.done == crate::agent::Done::TerminalReport
        && (profile.health_report == crate::agent::HealthReporting::None
            || profile.deviation_for(&terminal_case).is_some());
    // Its expected wait is never more than that: the deadline bounds its one invocation.
    if never_ended_by_a_report {
        deadline
    } else {
        expected
    }
}

/// The speed that brings a `deadline` of agent seconds to [`WALL_TARGET_SECONDS`] of the wall
/// clock: a whole number, from 1 to [`TimeScale::MAX`].
pub fn wanted_scale(deadline: f64) -> TimeScale {
    let factor = (deadline / WALL_TARGET_SECONDS)
        .ceil()
        .clamp(1.0, f64::from(TimeScale::MAX));
    TimeScale::new(factor as u32).unwrap_or(TimeScale::WALL)
}

/// The fastest agent time at which the shortest wait the checks judge (`finest_wait` agent
/// seconds) is still ten times the lag the runner cannot see, scaled
/// ([`crate::observe::UNSEEN_LAG_MS`]): a correct agent's interval is then judged, not left
/// uncertain. Measured: cloud-init 25.1's 1 s waits after a 503 at x100 (2 ms unseen = 200 ms)
/// left 405 of 950 gaps uncertain on a loaded 2-core machine, and the case informational.
pub fn finest_scale(finest_wait: Option<f64>) -> TimeScale {
    let Some(wait) = finest_wait else {
        return TimeScale::new(TimeScale::MAX).unwrap_or(TimeScale::WALL);
    };
    let factor = (wait * 1000.0 / (10.0 * crate::observe::UNSEEN_LAG_MS as f64))
        .floor()
        .clamp(1.0, f64::from(TimeScale::MAX));
    TimeScale::new(factor as u32).unwrap_or(TimeScale::WALL)
}

/// The pair's deadline and expected wait in agent seconds.
fn agent_timing(profile: &AgentProfile, scenario: &Scenario) -> FaultTiming {
    let a = &scenario.agent;
    let r = &profile.reactions;
    let faults = fault_timing(profile, scenario);
    let runs = a.runs.len().max(1) as f64;
    // An agent that never gives up (`gives_up = false`) meets a scenario that never lets its
    // report through by trying on until the runner ends it: long enough after the scenario's
    // own deadline for two of its longest waits and one unanswered request, so its retries are
    // seen; its start-up is not counted (the deadline runs from its first attempt).
    if !r.gives_up && never_succeeds(profile, scenario) {
        let longest = obligations::wait_after(r, a, fake_wireserver::Service::Wireserver, None).max;
        let horizon = a.deadline + 2.0 * longest + obligations::request_timeout(r, a);
        return FaultTiming {
            deadline: faults.deadline.max(horizon),
            expected_wait: faults.expected_wait.max(horizon * runs),
            ends_at_horizon: true,
            ..faults
        };
    }
    // A scenario that never lets the report through ends only at the agent's fixed budget
    // (IMDS's, for an IMDS that never answers): the agent gets that budget and the scenario's
    // own allowance after it for its last request and its exit.
    let mut fixed_end = 0.0_f64;
    let mut attempts = 0;
    if never_succeeds(profile, scenario) {
        // An agent counting its tries ends when they are used up, each as long as the answer
        // that never comes takes; else at its fixed budget.
        let busy = endless_attempt_seconds(profile, scenario);
        if let Some(end) = obligations::tries_exhausted_after(r, a, busy).or(r.budget) {
            fixed_end = end;
        }
        attempts = obligations::tries_attempts(r).unwrap_or(0);
    }
    if let Some(imds_budget) = r.imds_budget
        && imds_never_succeeds(scenario)
    {
        fixed_end = fixed_end.max(imds_budget);
    }
    if fixed_end > 0.0 {
        // After the budget: the last request's timeout, one more sleep, and its exit.
        let wind_down = obligations::request_timeout(r, a)
            + obligations::wait_after(r, a, fake_wireserver::Service::Wireserver, None).max
            + a.deadline;
        return FaultTiming {
            deadline: faults.deadline.max(fixed_end + wind_down),
            expected_wait: faults.expected_wait.max(fixed_end * runs),
            attempts,
            // One that never gives up on what it is answered is still trying then: the
            // runner ends it there, with no exit to wait for.
            ends_at_horizon: retried_past_budget(profile, scenario),
            ..faults
        };
    }
    faults
}

/// What the scripted faults cost, in agent seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct FaultTiming {
    deadline: f64,
    expected_wait: f64,
    /// The shortest wait after a retried answer: the finest interval the checks judge.
    finest_wait: Option<f64>,
    /// The runner ends the agent at the deadline by design (it never gives up).
    ends_at_horizon: bool,
    /// Attempts the agent makes, when it counts them, for the own-work allowance (0: few).
    attempts: u32,
}

/// The deadline and expected wait from the scripted faults: each costs the agent its fixed
/// sleep instead of the scenario's, and an unanswered request its own timeout instead of the
/// scenario's ([`obligations`]: how each answer is taken, and the wait after it).
fn fault_timing(profile: &AgentProfile, scenario: &Scenario) -> FaultTiming {
    let a = &scenario.agent;
    let r = &profile.reactions;
    let extra_busy = (obligations::request_timeout(r, a) - a.request_timeout).max(0.0);
    let mut finest: Option<f64> = None;
    let mut extra = 0.0;
    let mut honoured = 0.0_f64;
    // The sleep after an answer beyond the scenario's own; an answer given up on costs none.
    let mut sleep_after = |service, taken, status| {
        if taken == Taken::Fatal {
            return 0.0;
        }
        let wait = obligations::wait_after(r, a, service, status);
        if taken == Taken::Retry {
            finest = Some(finest.map_or(wait.min, |f: f64| f.min(wait.min)));
        }
        (wait.max - a.retry_interval).max(0.0)
    };
    let reached = |plan: &&fake_wireserver::EndpointPlan| {
        obligations::plan_reached(profile.health_report, &scenario.fake, plan)
    };
    for plan in scenario.fake.endpoints.iter().filter(reached) {
        let service = obligations::plan_service(&scenario.fake, plan);
        for step in &plan.steps {
            let cost = obligations::step_cost(r, a, service, &step.action);
            // A delay may end without a retry; counting it only makes the deadline longer.
            let waits = step.action.kind().delivery().holds_client();
            // An answer itself costs nothing beyond the scenario's own timing, but for a
            // `Retry-After` the agent honours (`obligations::step_cost`), counted apart.
            let times = f64::from(step.times);
            if waits {
                extra += extra_busy * times;
            } else {
                honoured += cost.busy * times;
            }
            extra += sleep_after(service, cost.taken, cost.status) * times;
        }
    }
    // The honoured sleeps together: past the budget the agent's loop is over, or the runner
    // ends it there, whatever more they ask (three of an hour are not three budgets).
    extra += honoured.min(r.budget.unwrap_or(a.budget));
    if scenario.fake.rate_limit.is_some() {
        // The rate limiter answers with the platform's 403 throttle reply.
        let wireserver = fake_wireserver::Service::Wireserver;
        let taken = obligations::taken(r, wireserver, 403, true);
        extra += sleep_after(wireserver, taken, Some(403)) * f64::from(RATE_LIMITED_RETRIES);
    }
    let deadline = a.deadline + extra;
    let runs = a.runs.len().max(1) as f64;
    FaultTiming {
        deadline,
        expected_wait: (scenario.expected_wait() + extra * runs).min(deadline * runs),
        finest_wait: finest,
        ends_at_horizon: false,
        attempts: 0,
    }
}

/// Retries allowed for under a rate limit: one per request of a goal state + health flow.
const RATE_LIMITED_RETRIES: u32 = 3;

/// True when no report can ever be accepted: the wireserver refuses connections, or a
/// wireserver endpoint the agent reaches ([`obligations::plan_reached`]) repeats or cycles its
/// faults forever.
fn never_succeeds(profile: &AgentProfile, scenario: &Scenario) -> bool {
    scenario.agent.wireserver == Target::Closed
        || endless_wireserver_plans(profile, scenario).next().is_some()
}

/// True when every answer of the endless wireserver plans the agent reaches is a status it
/// never gives up on (`never_gives_up_on`: cloud-init 25.1 on a 503): no budget ends its loop.
fn retried_past_budget(profile: &AgentProfile, scenario: &Scenario) -> bool {
    let (r, a) = (&profile.reactions, &scenario.agent);
    if r.never_gives_up_on.is_empty() || a.wireserver == Target::Closed {
        return false;
    }
    let mut steps = endless_wireserver_plans(profile, scenario)
        .flat_map(|p| &p.steps)
        .peekable();
    steps.peek().is_some()
        && steps.all(|step| {
            obligations::step_cost(r, a, fake_wireserver::Service::Wireserver, &step.action)
                .status
                .is_some_and(|status| r.never_gives_up_on.contains(&status))
        })
}

/// The wireserver plans the agent reaches that never end their faults.
fn endless_wireserver_plans<'a>(
    profile: &AgentProfile,
    scenario: &'a Scenario,
) -> impl Iterator<Item = &'a fake_wireserver::EndpointPlan> {
    let health = profile.health_report;
    scenario
        .fake
        .plans_for(fake_wireserver::Service::Wireserver)
        .into_iter()
        .filter(move |p| {
            p.end != EndPolicy::Default && obligations::plan_reached(health, &scenario.fake, p)
        })
}

/// Seconds each attempt at a wireserver that never lets the report through takes the agent: a
/// refused connection none, an endless hang its request timeout, an honoured `Retry-After` its
/// sleep (the longest any endlessly scripted step costs).
fn endless_attempt_seconds(profile: &AgentProfile, scenario: &Scenario) -> f64 {
    let (r, a) = (&profile.reactions, &scenario.agent);
    endless_wireserver_plans(profile, scenario)
        .flat_map(|p| &p.steps)
        .map(|step| {
            obligations::step_cost(r, a, fake_wireserver::Service::Wireserver, &step.action).busy
        })
        .fold(0.0, f64::max)
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
    use crate::agent::HealthReporting;
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

    /// An agent that sends no health report never meets a plan for health reports alone: its
    /// faults cost it nothing, and it keeps the scenario's own deadline. Measured: WALinuxAgent
    /// 2.16 in cloud-init mode, a daemon its deadline ends, waited out 336 s of agent time for
    /// 75 s back-offs after 504s it never met, 24 s of the wall's for each such case. A plan
    /// that answers another endpoint too still counts.
    #[test]
    fn faults_on_health_reports_cost_an_agent_that_sends_none_nothing() {
        let mut daemon = scalable(
            "retry_interval_min = 1.0\nretry_interval_max = 75.0\ngives_up = false\nbudget = 3600.0",
        );
        let health = |id: &str, end: &str| {
            scenario(&THREE_500S.replace(
                "id = \"wireserver.health.xml\"",
                &format!("id = \"{id}\"\n{end}"),
            ))
        };
        let three = health("wireserver.health.*", "");
        let endless = health("wireserver.health.*", "end = \"repeat-last\"");
        let everything = health("wireserver.*", "");
        let met = 3.0 * (75.0 - three.agent.retry_interval);
        for s in [&three, &everything] {
            let t = case_timing(&daemon, s).unwrap();
            assert!(t.deadline >= s.agent.deadline + met, "{t:?}");
        }
        assert!(case_timing(&daemon, &endless).unwrap().deadline > endless.agent.deadline);
        daemon.health_report = HealthReporting::None;
        for s in [&three, &endless] {
            let t = case_timing(&daemon, s).unwrap();
            assert_eq!(t.deadline, s.agent.deadline, "{t:?}");
            assert!(t.scale.is_wall(), "{t:?}");
        }
        let t = case_timing(&daemon, &everything).unwrap();
        assert!(t.deadline >= everything.agent.deadline + met, "{t:?}");
    }

    /// A daemon that will not send its terminal report (no health report in its mode, or a
    /// declared deviation on the scenario's `behaviour.terminal`) is killed at its deadline: the
    /// runner plans it there (started among the first), not at a no-fault scenario's expected
    /// wait of nothing (started last, alone at the end of the run), counted once (one sandbox
    /// invocation plays an in-progress run and its Ready), and sped up with its own-work
    /// allowance (the kill comes after it). One that reports, or exits, is planned at its
    /// expected wait.
    #[test]
    fn a_daemon_that_will_not_report_is_planned_at_its_whole_deadline() {
        use crate::agent::Done::{Exit, TerminalReport};
        let s = scenario("");
        let planned = |p: &AgentProfile, s: &Scenario| {
            let t = case_timing(p, s).unwrap();
            assert_eq!(t.expected_wait, 0.0, "{t:?}");
            t.planned_wait
        };
        let mut daemon = profile("");
        daemon.done = TerminalReport;
        assert_eq!(planned(&profile(""), &s), 0.0);
        assert_eq!(planned(&daemon, &s), 0.0);
        let mut silent = daemon.clone();
        silent.health_report = HealthReporting::None;
        assert_eq!(planned(&silent, &s), s.agent.deadline);
        // Faults on reports it never sends lengthen nothing: the scenario's deadline is its plan.
        let faults = scenario(THREE_500S);
        let t = case_timing(&silent, &faults).unwrap();
        assert_eq!(
            (t.deadline, t.planned_wait),
            (faults.agent.deadline, faults.agent.deadline)
        );
        // Sped up, it is killed after its own-work allowance too.
        silent.clock.kind = crate::agent::clock::ClockKind::Scalable;
        let t = case_timing(&silent, &scenario("deadline = 30.0\n")).unwrap();
        assert!(!t.scale.is_wall() && t.deadline > 30.0, "{t:?}");
        assert_eq!(t.wall_planned(), t.wall_deadline(), "{t:?}");
        let deviates = |id: &str, done| {
            let mut p = profile(&format!(
                "[[deviation]]\ncases = \"{id}.behaviour.terminal\"\nverdict = \"non-strict\"\nreason = \"never reports\"\n"
            ));
            p.done = done;
            p
        };
        assert_eq!(
            planned(&deviates("s", TerminalReport), &s),
            s.agent.deadline
        );
        // An in-progress run that goes on to Ready is one invocation: one deadline.
        let mut goes_on = deviates("s", TerminalReport);
        goes_on.in_progress_continues_to_ready = true;
        let mut two_runs = s.clone();
        two_runs
            .agent
            .runs
            .insert(0, two_runs.agent.runs[0].clone());
        two_runs.agent.runs[0].action = crate::agent::Action::InProgress;
        assert_eq!(planned(&goes_on, &two_runs), s.agent.deadline);
        assert_eq!(planned(&deviates("other", TerminalReport), &s), 0.0);
        assert_eq!(planned(&deviates("s", Exit), &s), 0.0);
    }

    /// An agent that never gives up on a 503 (`never_gives_up_on`, cloud-init 25.1) meets an
    /// endless one at its budget and its wind-down still trying: the runner ends it there,
    /// its exit's own-work allowance unspent (12 s of the wall's idled per such case at x50).
    /// Endless answers it does give up on (a 500, a hang) keep the allowance for its exit.
    #[test]
    fn an_agent_that_never_gives_up_on_a_503_ends_at_its_budgets_wind_down() {
        let mut gives_up = scalable(
            "retry_interval_min = 5.0\nretry_interval_503 = 1.0\nbudget = 1200.0\nrequest_timeout = 60.0",
        );
        gives_up.reactions.retryable.insert(503);
        let mut retries_503 = gives_up.clone();
        retries_503.reactions.never_gives_up_on = vec![503];
        let endless = |kind: &str| {
            scenario(&format!(
                "[[fake.endpoint]]\nid = \"wireserver.health.*\"\nend = \"repeat-last\"\n[[fake.endpoint.step]]\n{kind}\n"
            ))
        };
        let unavailable = endless("kind = \"respond\"\nstatus = 503");
        let a = &unavailable.agent;
        let wound_down = 1200.0 + 60.0 + 5.0 + a.deadline;
        let t = case_timing(&retries_503, &unavailable).unwrap();
        assert_eq!(t.deadline, wound_down, "{t:?}");
        let with_exit = case_timing(&gives_up, &unavailable).unwrap();
        assert!(with_exit.deadline > wound_down + 100.0, "{with_exit:?}");
        assert_eq!(with_exit.scale, t.scale);
        // A cycle of a 503 and a 500 ends the loop at its budget: the 500 is given up on.
        let mixed = scenario(
            "[[fake.endpoint]]\nid = \"wireserver.health.*\"\nend = \"cycle\"\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 503\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 500\n",
        );
        for other in [
            endless("kind = \"respond\"\nstatus = 500"),
            endless("kind = \"hang\""),
            mixed,
        ] {
            assert_eq!(
                case_timing(&retries_503, &other).unwrap(),
                case_timing(&gives_up, &other).unwrap()
            );
        }
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
        assert!(why.contains("no case longer than 90 s"), "{why}");
        // At the wall clock, a fixed 90 s read timeout makes one hang too long; 60 s does not.
        let hang = scenario(
            "[[fake.endpoint]]\nid = \"wireserver.goalstate\"\n[[fake.endpoint.step]]\nkind = \"hang\"\n",
        );
        assert!(case_timing(&profile("request_timeout = 90.0"), &hang).is_err());
        assert!(case_timing(&profile("request_timeout = 60.0"), &hang).is_ok());
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
        // The budget, then the last request's timeout, one more sleep and the exit allowance.
        let a = &closed.agent;
        let end = 1200.0 + a.request_timeout + a.retry_interval + a.deadline;
        assert!(
            why.contains(&format!("about {end:.0} s of agent time"))
                && why.contains("runs at the wall clock"),
            "{why}"
        );
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

    /// WALinuxAgent never gives up (detection starts over): a scenario that never lets its
    /// report through is not skipped for its 3600 s budget but run to a horizon, two of its
    /// longest waits and a request timeout past the deadline, its own work not added (the kill
    /// is its end). One whose report gets through keeps the usual timing.
    #[test]
    fn an_agent_that_never_gives_up_runs_an_endless_scenario_to_a_horizon() {
        let wala = "retry_interval_min = 1.0\nretry_interval_max = 75.0\nrequest_timeout = 10.0\nbudget = 3600.0";
        let endless = |gives_up: bool| {
            let mut p = scalable(wala);
            p.reactions.gives_up = gives_up;
            p.clock.fastest = TimeScale::new(20).unwrap();
            p
        };
        let closed = scenario("wireserver = \"closed\"\n");
        assert!(case_timing(&endless(true), &closed).is_err());
        let t = case_timing(&endless(false), &closed).unwrap();
        let horizon = closed.agent.deadline + 2.0 * 75.0 + 10.0;
        assert_eq!(t.deadline, horizon, "{t:?}");
        // 167 s of agent time in 10 s of the wall's.
        assert_eq!(t.scale.times(), 17, "{t:?}");
        // Three 500s, then the report: its own timing, own work and all, as before.
        let three = scenario(THREE_500S);
        assert_eq!(
            case_timing(&endless(false), &three),
            case_timing(&endless(true), &three)
        );
    }

    /// afterburn counts its tries (11 per request, the exchange 6 times, sleeps doubling from
    /// 1 s to 5 s): a wireserver answering 403 forever ends when they are used up (6 × 42 s of
    /// sleeps + 17 s between sequences), and each of its 73 attempts gets its own work on top
    /// of the case's; a hang forever costs each of its 66 reports a 30 s timeout besides: 40
    /// minutes of its clock, run at x50 (its 1 s back-off allows no more) in 79 s of the wall's
    /// at most, under the case limit; at x20, its fastest clock before, it was not run.
    #[test]
    fn an_agent_counting_its_tries_runs_until_they_are_used_up() {
        let mut afterburn = scalable(
            "retry_interval_min = 1.0\nretry_interval_max = 5.0\nrequest_timeout = 30.0\nbudget = 270.0\ntries = 11\nsequence_tries = 6",
        );
        let forbidden = scenario(
            &THREE_500S
                .replace("status = 500\ntimes = 3", "status = 403")
                .replace(
                    "id = \"wireserver.health.xml\"",
                    "id = \"wireserver.health.xml\"\nend = \"repeat-last\"",
                ),
        );
        let a = &forbidden.agent;
        let t = case_timing(&afterburn, &forbidden).unwrap();
        let exhausted = 6.0 * 42.0 + 17.0;
        let before_own_work = exhausted + 30.0 + 5.0 + a.deadline;
        // As fast as its work between attempts lets it go.
        // 311 s of agent time in 10 s of the wall's.
        assert_eq!(t.scale.times(), 32, "{t:?}");
        let own_work = OWN_WORK_SECONDS.max(a.deadline) + 73.0 * OWN_WORK_PER_ATTEMPT_SECONDS;
        let expected = before_own_work + own_work * (t.scale.factor() - 1.0);
        assert!((t.deadline - expected).abs() < 1e-9, "{t:?}");
        let hang = scenario(
            "[[fake.endpoint]]\nid = \"wireserver.health.xml\"\nend = \"repeat-last\"\n[[fake.endpoint.step]]\nkind = \"hang\"\n",
        );
        let t = case_timing(&afterburn, &hang).unwrap();
        assert_eq!(t.scale.times(), 50, "{t:?}");
        let with_timeouts = 6.0 * (11.0 * 30.0 + 42.0) + 17.0;
        let expected = with_timeouts + 30.0 + 5.0 + a.deadline + own_work * 49.0;
        assert!((t.deadline - expected).abs() < 1e-9, "{t:?}");
        assert!((78.0..80.0).contains(&t.wall_deadline()), "{t:?}");
        assert!(t.wall_deadline() < CASE_LIMIT_SECONDS, "{t:?}");
        afterburn.clock.fastest = TimeScale::new(20).unwrap();
        let why = case_timing(&afterburn, &hang).unwrap_err();
        assert!(why.contains("even at agent time x20"), "{why}");
    }

    #[test]
    fn an_imds_that_never_answers_is_not_run_against_a_long_fixed_imds_budget() {
        let closed = scenario("imds = \"closed\"\n");
        let why = case_timing(&profile("imds_budget = 300.0"), &closed).unwrap_err();
        let a = &closed.agent;
        let end = 300.0 + a.request_timeout + a.retry_interval + a.deadline;
        assert!(
            why.contains(&format!("about {end:.0} s of agent time")),
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

    fn scalable(reactions: &str) -> AgentProfile {
        let mut p = profile(reactions);
        p.clock.kind = crate::agent::clock::ClockKind::Scalable;
        p
    }

    #[test]
    fn a_scalable_agent_runs_its_fixed_budget_in_agent_time() {
        let closed = scenario("wireserver = \"closed\"\n");
        let t = case_timing(
            &scalable("budget = 1200.0\nretry_interval_min = 5.0"),
            &closed,
        )
        .unwrap();
        // The whole budget and its wind-down (the last request's timeout, one more sleep, the
        // scenario's allowance), in agent time, at the speed that fits it in WALL_TARGET_SECONDS
        // of the wall clock, at most x100; sped up, the agent gets the scenario's deadline of
        // the wall clock more, and at least OWN_WORK_SECONDS.
        let a = &closed.agent;
        let budget_end = 1200.0 + a.request_timeout + 5.0 + a.deadline;
        let scale = (budget_end / WALL_TARGET_SECONDS)
            .ceil()
            .min(f64::from(TimeScale::MAX));
        let own_work = a.deadline.max(OWN_WORK_SECONDS);
        assert_eq!(t.scale.factor(), scale, "{t:?}");
        assert_eq!(t.deadline, budget_end + own_work * (scale - 1.0));
        assert_eq!(t.expected_wait, 1200.0);
        // 1,216 s does not fit 10 s even at x100: 24 s of the wall's, own work included.
        assert_eq!(t.scale.times(), 100, "{t:?}");
        assert!((t.wall_deadline() - 24.01).abs() < 1e-9, "{t:?}");
        // A short case keeps the wall clock; a few seconds of waits run a little faster.
        let quick = scenario("");
        assert!(case_timing(&scalable(""), &quick).unwrap().scale.is_wall());
        let one = scenario(&THREE_500S.replace("times = 3", "times = 1"));
        let t = case_timing(&scalable("retry_interval_min = 5.0"), &one).unwrap();
        assert_eq!(
            t.scale.times(),
            2,
            "{t:?}: one 5 s sleep beside the scenario's own deadline runs at the least speed that fits"
        );
        let thirty = scenario(&THREE_500S.replace("times = 3", "times = 30"));
        let t = case_timing(&scalable("retry_interval_min = 5.0"), &thirty).unwrap();
        assert!(t.scale.factor() > 1.0, "{t:?}");
        // --time-scale fixes the speed; a wall-clock agent ignores it.
        let mut fixed = scalable("budget = 1200.0");
        fixed.clock.fixed = Some(TimeScale::new(30).unwrap());
        assert_eq!(case_timing(&fixed, &closed).unwrap().scale.factor(), 30.0);
        fixed.clock.kind = crate::agent::clock::ClockKind::Wall;
        assert!(case_timing(&fixed, &closed).is_err());
    }

    #[test]
    fn a_case_too_long_even_at_the_fastest_agent_time_is_not_run() {
        let closed = scenario("wireserver = \"closed\"\n");
        let why = case_timing(&scalable("budget = 36000.0"), &closed).unwrap_err();
        assert!(why.contains("even at agent time x100"), "{why}");
    }

    #[test]
    fn the_finest_judged_wait_bounds_the_speed() {
        // 0.2 s intervals: x10, where the unseen 2 ms of lag is 20 ms, a tenth of them.
        assert_eq!(finest_scale(Some(0.2)).times(), 10);
        assert_eq!(finest_scale(Some(1.0)).times(), 50);
        assert_eq!(finest_scale(Some(5.0)).times(), TimeScale::MAX);
        assert_eq!(finest_scale(None).times(), TimeScale::MAX);
        // A scalable agent retrying every 0.2 s after three 500s: its many-second budget case
        // runs no faster than that.
        let endless = scenario(&THREE_500S.replace(
            "id = \"wireserver.health.xml\"",
            "id = \"wireserver.health.xml\"\nend = \"repeat-last\"",
        ));
        let t = case_timing(
            &scalable("budget = 300.0\nretry_interval_min = 0.2"),
            &endless,
        )
        .unwrap();
        assert_eq!(t.scale.times(), 10, "{t:?}");
    }
}
