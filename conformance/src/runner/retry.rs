//! Timing a user can trust: a pair whose case the machine's stalls left unjudged (a check's
//! timing within the runner's measured lag of its limit, `checks::Tally::uncertain`) is run
//! again, up to [`MAX_ATTEMPTS`], until every case is judged. Like cargo-nextest's retries,
//! the attempts are recorded and a verdict that changed between judged attempts is shown as
//! flaky; unlike them, a later pass never hides an earlier failure: the case gets the worst
//! judged verdict. `informational` is left only when every attempt stalled.

use wirecheck_results::{Attempts, Verdict};

/// Attempts of a pair in all, at most. Three: a stall long enough to leave a timing unjudged
/// is rare even on a loaded machine (seconds of it in minutes of run), so a third stalled
/// attempt says the machine cannot keep time for this case at all; a fourth would only make a
/// loaded run slower still (each attempt takes the scenario's whole wait again).
pub const MAX_ATTEMPTS: u32 = 3;

/// What one attempt made of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptVerdict {
    Judged(Verdict),
    /// Informational only because the runner stalled around a timing it compares.
    Stalled,
}

/// Whether the pair must run again: some case has no judged attempt yet, and the bound allows
/// another. `cases[i]` is case i's verdicts so far, one per attempt.
pub fn run_again(cases: &[Vec<AttemptVerdict>]) -> bool {
    let attempts = cases.first().map_or(0, Vec::len);
    attempts < MAX_ATTEMPTS as usize
        && cases
            .iter()
            .any(|a| a.iter().all(|v| *v == AttemptVerdict::Stalled))
}

/// What a case's attempts come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The attempt (index) whose result the case reports: the first with the worst judged
    /// verdict, else (all stalled) the last.
    pub chosen: usize,
    /// `None` for a case run once.
    pub attempts: Option<Attempts>,
}

/// How bad a judged verdict is, for choosing among attempts: a failure is never hidden by a
/// later pass, and a judged verdict beats having had nothing to judge.
fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Fail => 5,
        Verdict::NonStrict => 4,
        Verdict::Pass => 3,
        Verdict::Informational => 2,
        Verdict::Unimplemented => 1,
        Verdict::Skipped => 0,
    }
}

/// Settles one case from its attempts, in order (at least one).
pub fn settle(attempts: &[AttemptVerdict]) -> Settled {
    let judged: Vec<(usize, Verdict)> = attempts
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a {
            AttemptVerdict::Judged(v) => Some((i, *v)),
            AttemptVerdict::Stalled => None,
        })
        .collect();
    let chosen = judged
        .iter()
        .rev()
        .max_by_key(|(_, v)| severity(*v))
        .map_or(attempts.len().saturating_sub(1), |(i, _)| *i);
    let verdicts: Vec<Verdict> = judged.iter().map(|(_, v)| *v).collect();
    let flaky = verdicts.windows(2).any(|w| w[0] != w[1]);
    let attempts = (attempts.len() > 1).then(|| Attempts {
        count: attempts.len() as u32,
        stalled: (attempts.len() - judged.len()) as u32,
        judged: verdicts,
        flaky,
    });
    Settled { chosen, attempts }
}

/// The reason a settled case reports: the chosen attempt's, saying when the attempts
/// disagreed or all stalled.
pub fn reason(chosen: Option<String>, attempts: Option<&Attempts>) -> Option<String> {
    let Some(a) = attempts else {
        return chosen;
    };
    let note = if a.flaky {
        let list: Vec<&str> = a.judged.iter().map(|v| v.as_str()).collect();
        format!(
            "flaky: its {} attempts were judged {} (the worst is the verdict)",
            a.count,
            list.join(", ")
        )
    } else if a.all_stalled() {
        format!(
            "every one of its {} attempts stalled, so this machine could not judge it",
            a.count
        )
    } else {
        return chosen;
    };
    Some(match chosen {
        Some(r) => format!("{r} ({note})"),
        None => note,
    })
}

#[cfg(test)]
mod tests {
    use super::AttemptVerdict::{Judged, Stalled};
    use super::*;

    #[test]
    fn a_case_judged_at_once_is_run_once() {
        let s = settle(&[Judged(Verdict::Pass)]);
        assert_eq!(s.chosen, 0);
        assert_eq!(s.attempts, None);
        assert!(!run_again(&[vec![Judged(Verdict::Fail)]]));
    }

    #[test]
    fn a_stalled_case_runs_again_until_judged_up_to_the_bound() {
        assert!(run_again(&[vec![Judged(Verdict::Pass)], vec![Stalled]]));
        assert!(!run_again(&[
            vec![Judged(Verdict::Pass), Judged(Verdict::Pass)],
            vec![Stalled, Judged(Verdict::Fail)]
        ]));
        assert!(run_again(&[vec![Stalled, Stalled]]));
        assert!(!run_again(&[vec![Stalled, Stalled, Stalled]]));

        let s = settle(&[Stalled, Judged(Verdict::Fail)]);
        assert_eq!(s.chosen, 1);
        assert_eq!(
            s.attempts,
            Some(Attempts {
                count: 2,
                stalled: 1,
                judged: vec![Verdict::Fail],
                flaky: false
            })
        );
    }

    #[test]
    fn informational_only_when_every_attempt_stalled() {
        let s = settle(&[Stalled, Stalled, Stalled]);
        assert_eq!(s.chosen, 2);
        let a = s.attempts.unwrap();
        assert!(a.all_stalled() && !a.flaky && a.judged.is_empty());
        assert_eq!(
            reason(Some("not judged".into()), Some(&a)).unwrap(),
            "not judged (every one of its 3 attempts stalled, so this machine could not judge it)"
        );
    }

    #[test]
    fn a_verdict_that_changed_is_flaky_and_the_worst_one_stands() {
        let s = settle(&[
            Judged(Verdict::Pass),
            Judged(Verdict::Fail),
            Judged(Verdict::Pass),
        ]);
        assert_eq!(s.chosen, 1);
        let a = s.attempts.unwrap();
        assert!(a.flaky);
        assert_eq!(a.judged, [Verdict::Pass, Verdict::Fail, Verdict::Pass]);
        assert_eq!(
            reason(Some("over budget".into()), Some(&a)).unwrap(),
            "over budget (flaky: its 3 attempts were judged pass, fail, pass (the worst is the verdict))"
        );
        // Stalled attempts between judged ones do not make it flaky; equal verdicts do not.
        let steady = settle(&[Judged(Verdict::Pass), Stalled, Judged(Verdict::Pass)]);
        assert_eq!(steady.chosen, 0);
        assert!(!steady.attempts.as_ref().unwrap().flaky);
        assert_eq!(reason(None, steady.attempts.as_ref()), None);
    }
}
