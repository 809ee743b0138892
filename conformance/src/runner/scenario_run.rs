//! One scenario against one agent: start a fake with the scenario's plan, run the agent's
//! invocations one after the other, collect the journal and the pool file, judge, keep the
//! artifacts.

use std::time::Instant;

use wirecheck_oracle::kvp::decode_pool;

use super::attach::{self, SessionError};
use super::lag::LagWatch;
use super::retry::{self, AttemptVerdict};
use super::{
    Planned, RunSettings, apply_deviation, artifacts, case_title, failed_cases, harness_cases,
    not_run, skipped_cases,
};
use crate::agent::AgentProfile;
use crate::catalog::CheckId;
use crate::checks::Judgement;
use crate::disposition::{Disposition, HarnessError};
use crate::observe::Observation;
use crate::scenario::Scenario;
use crate::tools::text::visible;
use wirecheck_results::{CaseResult, Timeline, Verdict};

/// Runs the pair and returns one result per selected case. A pair with a case whose timing the
/// runner's stalls left unjudged runs again, up to [`retry::MAX_ATTEMPTS`] in all (`retry`).
pub async fn run(p: &Planned, settings: &RunSettings, lag: &LagWatch) -> Vec<CaseResult> {
    if let Some(skip) = not_run(p, &settings.bin_dir) {
        return skipped_cases(p, skip);
    }
    let mut attempts: Vec<Vec<Attempted>> = Vec::new();
    loop {
        let attempt = attempts.len() as u32 + 1;
        match execute(p, settings, lag, attempt).await {
            Ok(cases)
                if attempts
                    .first()
                    .is_none_or(|first| same_cases(first, &cases)) =>
            {
                attempts.push(cases);
            }
            // A later attempt that judged nothing (interrupted, the harness failed) leaves the
            // earlier ones standing.
            Ok(_) => break,
            Err(e) if !attempts.is_empty() => {
                let (SessionError::Agent(reason) | SessionError::Harness(reason)) = e;
                eprintln!(
                    "wirecheck: warning: {} {}: attempt {attempt} not judged: {}",
                    visible(&p.profile.name),
                    visible(&p.scenario.id),
                    visible(&reason)
                );
                break;
            }
            Err(SessionError::Agent(reason)) => return failed_cases(p, &reason),
            Err(SessionError::Harness(reason)) => {
                eprintln!(
                    "wirecheck: error: {} {}: {}",
                    visible(&p.profile.name),
                    visible(&p.scenario.id),
                    visible(&reason)
                );
                return harness_cases(p, HarnessError(reason));
            }
        }
        if !retry::run_again(&per_case(&attempts)) {
            break;
        }
    }
    settle(attempts)
}

/// One case as one attempt left it.
struct Attempted {
    case: CaseResult,
    /// Its verdict is informational only because the runner stalled (`Judgement::stalled`).
    stalled: bool,
}

/// Both attempts judged the same cases (an interrupted one is all `not_judged`).
fn same_cases(first: &[Attempted], other: &[Attempted]) -> bool {
    first.len() == other.len()
        && first
            .iter()
            .zip(other)
            .all(|(a, b)| a.case.id == b.case.id && b.case.not_judged.is_none())
}

/// Each case's verdicts, one per attempt.
fn per_case(attempts: &[Vec<Attempted>]) -> Vec<Vec<AttemptVerdict>> {
    let cases = attempts.first().map_or(0, Vec::len);
    (0..cases)
        .map(|i| {
            attempts
                .iter()
                .map(|a| match &a[i] {
                    Attempted { stalled: true, .. } => AttemptVerdict::Stalled,
                    Attempted { case, .. } => AttemptVerdict::Judged(case.verdict),
                })
                .collect()
        })
        .collect()
}

/// One result per case from its attempts: the chosen attempt's, with the attempts recorded
/// and the time of all of them.
fn settle(attempts: Vec<Vec<Attempted>>) -> Vec<CaseResult> {
    let verdicts = per_case(&attempts);
    let mut attempts: Vec<Vec<Option<CaseResult>>> = attempts
        .into_iter()
        .map(|a| a.into_iter().map(|c| Some(c.case)).collect())
        .collect();
    verdicts
        .iter()
        .enumerate()
        .map(|(i, verdicts)| {
            let settled = retry::settle(verdicts);
            let duration_ms = attempts
                .iter()
                .filter_map(|a| a[i].as_ref().map(|c| c.duration_ms))
                .sum();
            let mut case = attempts[settled.chosen][i]
                .take()
                .expect("each case is taken once");
            case.reason = retry::reason(case.reason.take(), settled.attempts.as_ref());
            case.attempts = settled.attempts;
            case.duration_ms = duration_ms;
            case
        })
        .collect()
}

/// One attempt of the pair (its artifacts under `attempt-N/` from the second on).
async fn execute(
    p: &Planned,
    settings: &RunSettings,
    lag: &LagWatch,
    attempt: u32,
) -> Result<Vec<Attempted>, SessionError> {
    let scenario = &*p.scenario;
    let profile = &*p.profile;
    let case_dir = case_folder(settings)?;
    let timing = p.timing().map_err(SessionError::Harness)?;
    let started = Instant::now();
    let session = attach::run(p, settings, case_dir.path(), &timing).await?;
    // An agent stopped half-way says nothing about the agent.
    if let Some(sig) = session.runs.iter().find_map(|r| match r.exit {
        crate::exec::Exit::Interrupted(sig) => Some(sig),
        _ => None,
    }) {
        return Ok(unstalled(skipped_cases(
            p,
            super::interrupted_reason(sig, true),
        )));
    }
    settings.starts.record(
        &profile.name,
        &scenario.id,
        case_dir.path(),
        scenario.agent.wireserver == crate::scenario::Target::Fake,
        !session.journal.is_empty(),
        &session.runs,
    );
    let unjudgeable = session.unjudgeable;
    let pool = session.pool;
    let pool_view = decode_pool(pool.as_deref().unwrap_or_default());
    let imds_vm_id = fake_wireserver::documents::effective_imds(&scenario.fake.imds).vm_id;
    let agent_pids: Vec<u32> = session.runs.iter().filter_map(|r| r.pid).collect();

    let obs = Observation {
        scenario,
        profile,
        journal: session.journal,
        served: session.served,
        imds_vm_id,
        pool,
        pool_view,
        runs: session.runs,
        stalls: lag.stalls_since(started, &session.clock, &agent_pids),
        agent_waited: lag.waited_since(started, &session.clock, &agent_pids),
        agent_working: lag.working_since(started, &session.clock, &agent_pids),
        time_scale: session.clock.scale(),
        deadline: timing.deadline,
        guest_calls: session.guest_calls,
        guest_users: session.guest_users,
    };
    Ok(judge_attempt(
        p,
        settings,
        attempt,
        started,
        &obs,
        unjudgeable.as_deref(),
    ))
}

/// The attempt's cases, judged from what it observed: each selected check's, then the
/// snapshot's, with the artifacts written on the way.
fn judge_attempt(
    p: &Planned,
    settings: &RunSettings,
    attempt: u32,
    started: Instant,
    obs: &Observation,
    unjudgeable: Option<&str>,
) -> Vec<Attempted> {
    let scenario = &*p.scenario;
    let profile = &*p.profile;
    let timeline = crate::timeline::build(obs);
    let artifacts = write_artifacts(p, settings, attempt, obs);
    let duration_ms = started.elapsed().as_millis() as u64;
    let shared = Shared {
        scenario,
        duration_ms,
        timeline,
        artifacts,
    };
    let snapshot = settings
        .snapshots
        .as_ref()
        .filter(|_| p.snapshot)
        .map(|snapshots| {
            let j = match unjudgeable {
                Some(why) => Judgement::fail(why.to_owned(), Vec::new()),
                None => snapshot_judgement(snapshots, obs),
            };
            shared.case(
                super::snapshot_case_id(scenario),
                super::snapshot_case_title(scenario),
                j,
            )
        });

    let mut cases: Vec<Attempted> = p
        .checks
        .iter()
        .map(|check| {
            let id = scenario.case_id(*check);
            let j = check_judgement(profile, &id, *check, unjudgeable, obs);
            shared.case(id, case_title(scenario, *check), j)
        })
        .collect();
    cases.extend(snapshot);
    cases
}

/// A case folder of the attempt's own (in the case root, where there is one): removed when
/// dropped.
fn case_folder(settings: &RunSettings) -> Result<tempfile::TempDir, SessionError> {
    let mut case_dir = tempfile::Builder::new();
    case_dir.prefix("wirecheck-case-");
    match &settings.case_root {
        Some(root) => case_dir.tempdir_in(root),
        None => case_dir.tempdir(),
    }
    .map_err(|e| SessionError::Harness(format!("cannot create a case folder: {e}")))
}

/// Writes the attempt's artifacts where the run keeps them: their folder, relative to the
/// results, or `None` when none were written.
fn write_artifacts(
    p: &Planned,
    settings: &RunSettings,
    attempt: u32,
    obs: &Observation,
) -> Option<String> {
    let scenario = &*p.scenario;
    let profile = &*p.profile;
    let artifacts_rel = match attempt {
        1 => artifacts::relative_dir(&profile.name, &scenario.id),
        n => format!(
            "{}/attempt-{n}",
            artifacts::relative_dir(&profile.name, &scenario.id)
        ),
    };
    let written = if settings.artifacts {
        Some(artifacts::write(&settings.out, &artifacts_rel, obs))
    } else {
        None
    };
    match written {
        None => None,
        Some(Ok(())) => Some(artifacts_rel),
        Some(Err(e)) => {
            eprintln!(
                "wirecheck: warning: cannot write the artifacts of {}: {}",
                visible(&scenario.id),
                visible(&e.to_string())
            );
            None
        }
    }
}

/// One check's judgement of the attempt: failed for the session's reason when it is
/// unjudgeable, else as the profile's disposition of the case says.
fn check_judgement(
    profile: &AgentProfile,
    id: &str,
    check: CheckId,
    unjudgeable: Option<&str>,
    obs: &Observation,
) -> Judgement {
    let def = crate::checks::get(check);
    match (
        unjudgeable,
        Disposition::of_case(profile, id, None, def.needs),
    ) {
        (Some(why), _) => Judgement::fail(why.to_owned(), Vec::new()),
        (None, Disposition::Run { .. }) => apply_deviation(profile, id, (def.run)(obs)),
        (None, not_run) => {
            let (verdict, reason) = not_run
                .not_run()
                .unwrap_or((Verdict::Skipped, String::new()));
            Judgement {
                verdict,
                reason: Some(reason),
                evidence: Vec::new(),
                stalled: false,
            }
        }
    }
}

/// What every case of one attempt holds in common.
struct Shared<'a> {
    scenario: &'a Scenario,
    duration_ms: u64,
    timeline: Timeline,
    artifacts: Option<String>,
}

impl Shared<'_> {
    /// The case `id` of the attempt, judged `j`.
    fn case(&self, id: String, title: String, j: Judgement) -> Attempted {
        let stalled = j.stalled;
        let case = CaseResult {
            id,
            title,
            scenario: self.scenario.name.clone(),
            verdict: j.verdict,
            reason: j.reason,
            evidence: j.evidence,
            duration_ms: self.duration_ms,
            timeline: self.timeline.clone(),
            artifacts: self.artifacts.clone(),
            not_judged: None,
            attempts: None,
        };
        Attempted { case, stalled }
    }
}

/// Cases no check judged (nothing a stall could have left uncertain).
fn unstalled(cases: Vec<CaseResult>) -> Vec<Attempted> {
    cases
        .into_iter()
        .map(|case| Attempted {
            case,
            stalled: false,
        })
        .collect()
}

/// Whether the machine may explain a transcript that differs from the accepted one: in a scenario
/// whose answers move with the clock, any stall of the runner's; otherwise only a difference in
/// exit statuses, when some run's accepted report got its answer within the measured lag of the
/// agent's deadline for it (`checks::behaviour::late_answer`).
fn machine_may_explain(obs: &Observation, accepted: &str, new: &str) -> bool {
    use crate::snapshot::transcript;
    if !transcript::timing_free(obs) {
        return !obs.stalls.is_empty();
    }
    transcript::differs_only_in_exit_status(accepted, new)
        && (0..obs.runs.len()).any(|ri| crate::checks::behaviour::late_answer(obs, ri).is_some())
}

/// The snapshot case: the pair's transcript against its accepted snapshot.
fn snapshot_judgement(snapshots: &super::SnapshotSettings, obs: &Observation) -> Judgement {
    use crate::snapshot::{Outcome, Snapshot, store};
    let transcript = crate::snapshot::transcript(obs);
    let snapshot = Snapshot::new(&obs.profile.name, &obs.scenario.id, transcript);
    let accept = format!("wirecheck snapshots accept {}", snapshots.dir.display());
    match store::compare(&snapshots.dir, &snapshot) {
        Ok(Outcome::Matches) => Judgement {
            verdict: Verdict::Pass,
            reason: None,
            evidence: Vec::new(),
            stalled: false,
        },
        Ok(Outcome::New { pending }) => {
            let reason = format!(
                "new snapshot, written to {} (review it, then `{accept}`)",
                pending.display()
            );
            let evidence = vec![crate::checks::note(
                "the new snapshot",
                Some(snapshot.transcript.clone()),
            )];
            if snapshots.strict {
                Judgement::fail(
                    format!("{reason}; --snapshots-strict wants every snapshot accepted"),
                    evidence,
                )
            } else {
                Judgement {
                    verdict: Verdict::Informational,
                    reason: Some(reason),
                    evidence,
                    stalled: false,
                }
            }
        }
        // The machine's, maybe, as with any timing comparison (`runner::lag`): a scenario whose
        // answers move with the clock, on a machine that stalled the runner; or only an exit
        // status, where a report's answer came within the measured lag of the agent's deadline
        // for it. Stalled: the runner tries the case again.
        Ok(Outcome::Differs {
            diff,
            accepted,
            pending,
        }) if machine_may_explain(obs, &accepted, &snapshot.transcript) => Judgement {
            verdict: Verdict::Informational,
            reason: Some(format!(
                "differs from its accepted snapshot only where time decides (this scenario's answers, or the exit status of a run whose report's answer came within the measured lag of the agent's deadline), and the machine stalled, so the difference may be the machine's; the new one is {}",
                pending.display()
            )),
            evidence: vec![crate::checks::note("diff, accepted → this run", Some(diff))],
            stalled: true,
        },
        Ok(Outcome::Differs { diff, pending, .. }) => Judgement::fail(
            format!(
                "what the agent emitted differs from its accepted snapshot; the new one is {} (`{accept}` if the change is intended)",
                pending.display()
            ),
            vec![crate::checks::note("diff, accepted → this run", Some(diff))],
        ),
        Ok(Outcome::OtherFormat { format, pending }) => Judgement::fail(
            format!(
                "the accepted snapshot is of format {format}, this wirecheck writes format {}: the normalizer changed, so it was not compared; review {} and `{accept}`",
                crate::snapshot::store::FORMAT,
                pending.display()
            ),
            Vec::new(),
        ),
        Err(e) => Judgement::fail(format!("the snapshot cannot be compared: {e}"), Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::tests::{health, observation, profile, run, scenario};
    use crate::exec::Exit;
    use crate::observe::Stall;

    /// An exit status that differs from the accepted snapshot is the machine's only when a run's
    /// report got its answer within the measured lag of the agent's deadline for it (the case then
    /// runs again); a prompt answer, another end than an exit status, a resend or another request
    /// is what the agent emitted, stall or not.
    #[test]
    fn only_an_exit_status_after_a_late_answer_may_differ() {
        let dir = tempfile::tempdir().unwrap();
        let settings = super::super::SnapshotSettings {
            dir: dir.path().to_owned(),
            strict: true,
        };
        let (s, p) = (scenario(""), profile()); // budget 3 s, request timeout 1 s
        let judge = |journal, exit, stalls: Vec<Stall>| {
            let mut obs = observation(&p, &s, journal, vec![run(0, 3000, exit)]);
            obs.stalls = stalls;
            snapshot_judgement(&settings, &obs)
        };
        // Accept the quiet run's transcript.
        let quiet = || vec![health(1, 0, 201)];
        assert_eq!(judge(quiet(), Exit::Code(0), vec![]).verdict, Verdict::Fail);
        let snap = crate::snapshot::store::path(dir.path(), "t", "t");
        std::fs::rename(crate::snapshot::store::pending_path(&snap), &snap).unwrap();
        assert_eq!(judge(quiet(), Exit::Code(0), vec![]).verdict, Verdict::Pass);

        // Its report's answer ended 5 ms before the budget, the request arrived in a 10 ms stall.
        let late = || {
            let mut post = health(1, 2000, 201);
            post.done_ms = Some(2995);
            vec![post]
        };
        let stall = || {
            vec![Stall {
                end_ms: 2000,
                len_ms: 10,
            }]
        };
        let excused = judge(late(), Exit::Code(1), stall());
        assert_eq!(excused.verdict, Verdict::Informational, "{excused:?}");
        assert!(excused.stalled);
        assert!(excused.reason.unwrap().contains("where time decides"));
        assert_eq!(judge(late(), Exit::Code(1), vec![]).verdict, Verdict::Fail);
        assert_eq!(
            judge(quiet(), Exit::Code(1), stall()).verdict,
            Verdict::Fail
        );
        let killed = judge(late(), Exit::KilledAtDeadline, stall());
        assert_eq!(killed.verdict, Verdict::Fail, "{killed:?}");
        // A resend, another request: what the agent emitted, whatever the machine did.
        let resent = vec![health(1, 0, 201), health(2, 300, 201)];
        assert_eq!(judge(resent, Exit::Code(0), stall()).verdict, Verdict::Fail);
        let goal_state = crate::checks::tests::entry(
            2,
            fake_wireserver::EndpointId::WireserverGoalstate,
            10,
            Some(12),
            fake_wireserver::journal::AnswerKind::Default,
            Some(200),
        );
        let other = judge(vec![health(1, 0, 201), goal_state], Exit::Code(0), stall());
        assert_eq!(other.verdict, Verdict::Fail, "{other:?}");
    }
}
