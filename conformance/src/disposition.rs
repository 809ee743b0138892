//! What becomes of a case before any check judges it: it runs (perhaps graded by a deviation
//! its profile declares), it is skipped and why, the profile declares it unimplemented, or
//! wirecheck's own machinery failed (a harness error). The runner, the scenario run,
//! `wirecheck list` (its `case_status`) and `wirecheck prop` all decide here, and the reasons
//! are rendered here only: results.json, JUnit and HTML carry these texts, byte for byte as
//! they always were. How they begin, and reading a reason back (`is_harness_error`,
//! `is_unjudged`, `is_unclaimed`), is the results contract's (`wirecheck_results::reason`).

use std::fmt;

use crate::agent::{AgentProfile, Capability, Deviation, DeviationVerdict};
use wirecheck_results::reason::{HARNESS_PREFIX, NOT_JUDGED, NOT_RUN, UNCLAIMED};
use wirecheck_results::{NotJudged, Verdict};

/// Why a case is not run (its verdict is `skipped`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The scenario needs capabilities (its flow, its report kinds) the agent does not claim.
    Unclaimed {
        agent: String,
        missing: Vec<Capability>,
    },
    /// The check needs a capability the agent does not claim (the scenario itself runs).
    CheckUnclaimed {
        agent: String,
        capability: Capability,
    },
    /// The agent's attach mode cannot arrange this scenario.
    CannotArrange(CannotArrange),
    /// The pair would take longer than a case may (`runner::timing`): why.
    TooLong(String),
    /// The attach mode cannot run on this machine.
    Unavailable(Unavailable),
    /// wirecheck was interrupted (`signal` as `runner::signal_name` spells it) before the
    /// case ran, or while it ran (the agent was stopped).
    Interrupted {
        signal: &'static str,
        while_running: bool,
    },
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::Unclaimed { agent, missing } => {
                let missing: Vec<String> = missing.iter().map(|c| claim(*c)).collect();
                write!(f, "agent {agent}{UNCLAIMED}{}", missing.join(", "))
            }
            Skip::CheckUnclaimed { agent, capability } => {
                write!(f, "agent {agent}{UNCLAIMED}{}", claim(*capability))
            }
            Skip::CannotArrange(why) => why.fmt(f),
            Skip::TooLong(why) => f.write_str(why),
            Skip::Unavailable(why) => why.fmt(f),
            Skip::Interrupted {
                signal,
                while_running: true,
            } => write!(
                f,
                "{NOT_JUDGED}: wirecheck was interrupted ({signal}) while the case ran; the agent was stopped"
            ),
            Skip::Interrupted {
                signal,
                while_running: false,
            } => write!(f, "{NOT_RUN}: wirecheck was interrupted ({signal})"),
        }
    }
}

/// A scenario shape the agent's attach mode cannot arrange (`runner::attach::unsupported`);
/// it depends only on the profile and the scenario, so `wirecheck list` shows it too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CannotArrange {
    /// The agent's in-progress invocation always goes on to Ready
    /// (`in_progress_continues_to_ready`), and the scenario asks otherwise.
    InProgressAlwaysGoesOn { agent: String },
    /// The sandbox runs one invocation per scenario; this many were asked for.
    InvocationsInSandbox(usize),
}

impl fmt::Display for CannotArrange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CannotArrange::InProgressAlwaysGoesOn { agent } => write!(
                f,
                "{agent}'s in-progress report is always followed by Ready from the same invocation; only in-progress then ready can be arranged"
            ),
            CannotArrange::InvocationsInSandbox(n) => write!(
                f,
                "the sandbox runs one agent invocation per scenario; this one has {n}"
            ),
        }
    }
}

/// Why the attach mode cannot run on this machine (`runner::attach::unavailable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// `fake-wireserver sandbox` makes namespaces, which needs root.
    SandboxNeedsRoot,
    /// A binary the attach mode runs is neither next to wirecheck nor on PATH.
    MissingBinary {
        binary: &'static str,
        bin_dir: std::path::PathBuf,
    },
    /// The agent cannot be contained here (network namespace, mounts, PID namespace): the
    /// probe's explanation (`containment::unavailable`).
    Containment(String),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::SandboxNeedsRoot => f.write_str(
                "sandbox attach needs root (fake-wireserver sandbox creates network and mount namespaces); run wirecheck as root",
            ),
            Unavailable::MissingBinary { binary, bin_dir } => write!(
                f,
                "sandbox attach needs the {binary} binary next to wirecheck ({}) or on PATH (cargo build --workspace --bins)",
                bin_dir.display()
            ),
            Unavailable::Containment(why) => f.write_str(why),
        }
    }
}

impl Skip {
    /// Whether the reason is the agent's own (it does not claim what the case needs, or it
    /// cannot do what the scenario asks: its in-progress report always goes on to Ready), so
    /// its profile may declare the case unimplemented instead. The machine's or wirecheck's
    /// reasons (root, a binary, an interruption) are never the agent's.
    pub fn is_the_agents(&self) -> bool {
        match self {
            Skip::Unclaimed { .. }
            | Skip::CheckUnclaimed { .. }
            | Skip::CannotArrange(CannotArrange::InProgressAlwaysGoesOn { .. }) => true,
            Skip::CannotArrange(CannotArrange::InvocationsInSandbox(_))
            | Skip::TooLong(_)
            | Skip::Unavailable(_)
            | Skip::Interrupted { .. } => false,
        }
    }

    /// The scenario's capabilities the agent does not claim, if any.
    pub fn unclaimed(profile: &AgentProfile, scenario: &crate::scenario::Scenario) -> Option<Skip> {
        let missing: Vec<Capability> = scenario
            .required_capabilities()
            .into_iter()
            .filter(|c| !profile.claims(*c))
            .collect();
        (!missing.is_empty()).then(|| Skip::Unclaimed {
            agent: profile.name.clone(),
            missing,
        })
    }
}

/// `"kvp" (writes the KVP pool)`.
fn claim(c: Capability) -> String {
    format!("\"{}\" ({})", c.as_str(), c.describe())
}

/// wirecheck's own machinery failed (the fake, the sandbox, a file of its own): the case is
/// `skipped`, never a verdict about the agent, and `wirecheck run`/`prop` exit 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessError(pub String);

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{HARNESS_PREFIX}{}", self.0)
    }
}

/// What becomes of one case.
#[derive(Debug, Clone)]
pub enum Disposition<'a> {
    /// It runs and is judged; a declared deviation, if any, grades the judgement
    /// ([`Disposition::grade`]).
    Run { deviation: Option<&'a Deviation> },
    /// It is not run.
    Skipped(Skip),
    /// It is not run because the agent does not claim what it needs or cannot do what it asks
    /// ([`Skip::is_the_agents`]), and the profile declares that unimplemented (with what the
    /// agent does instead).
    Unimplemented {
        deviation: &'a Deviation,
        skip: Skip,
    },
    /// It could not be run: wirecheck's fault, not the agent's.
    Harness(HarnessError),
}

impl<'a> Disposition<'a> {
    /// The disposition of case `case_id` of an agent: `pair` is why its whole scenario does
    /// not run (if it does not), `needs` the capability its check needs.
    pub fn of_case(
        profile: &'a AgentProfile,
        case_id: &str,
        pair: Option<Skip>,
        needs: Option<Capability>,
    ) -> Disposition<'a> {
        let skip = pair.or_else(|| {
            needs
                .filter(|cap| !profile.claims(*cap))
                .map(|capability| Skip::CheckUnclaimed {
                    agent: profile.name.clone(),
                    capability,
                })
        });
        let deviation = profile.deviation_for(case_id);
        match (skip, deviation) {
            (Some(skip), Some(d))
                if skip.is_the_agents() && d.verdict == DeviationVerdict::Unimplemented =>
            {
                Disposition::Unimplemented { deviation: d, skip }
            }
            (Some(skip), _) => Disposition::Skipped(skip),
            (None, deviation) => Disposition::Run { deviation },
        }
    }

    /// Why the case has no verdict about the agent, if that is what this disposition means.
    pub fn not_judged(&self) -> Option<NotJudged> {
        match self {
            Disposition::Harness(_) => Some(NotJudged::Harness),
            Disposition::Skipped(Skip::Interrupted { .. }) => Some(NotJudged::Interrupted),
            _ => None,
        }
    }

    /// The verdict and reason of a case that is not run; `None` for [`Disposition::Run`].
    pub fn not_run(&self) -> Option<(Verdict, String)> {
        match self {
            Disposition::Run { .. } => None,
            Disposition::Skipped(skip) => Some((Verdict::Skipped, skip.to_string())),
            Disposition::Unimplemented { deviation, skip } => Some((
                Verdict::Unimplemented,
                format!(
                    "known deviation ({}): {}; {skip}",
                    deviation.cases, deviation.reason
                ),
            )),
            Disposition::Harness(e) => Some((Verdict::Skipped, e.to_string())),
        }
    }

    /// A run case's judgement as its declared deviation grades it: `unimplemented` turns any
    /// verdict but skipped into `unimplemented`, `non-strict` turns a failure into
    /// `non-strict`; the reason says so and keeps what was observed.
    pub fn grade(
        deviation: Option<&Deviation>,
        verdict: Verdict,
        reason: Option<String>,
    ) -> (Verdict, Option<String>) {
        let Some(d) = deviation else {
            return (verdict, reason);
        };
        let declared = |reason: Option<String>| {
            let observed = reason
                .as_deref()
                .map(|r| format!("; observed: {r}"))
                .unwrap_or_default();
            Some(format!(
                "known deviation ({}): {}{observed}",
                d.cases, d.reason
            ))
        };
        match d.verdict {
            DeviationVerdict::Unimplemented if verdict != Verdict::Skipped => {
                (Verdict::Unimplemented, declared(reason))
            }
            DeviationVerdict::NonStrict if verdict == Verdict::Fail => {
                (Verdict::NonStrict, declared(reason))
            }
            _ => (verdict, reason),
        }
    }

    /// The case's status as `wirecheck list --agent` shows it; `None`: it runs as any other.
    pub fn list_status(&self) -> Option<String> {
        match self {
            Disposition::Run { deviation: None } => None,
            Disposition::Run { deviation: Some(d) } => {
                let verdict = match d.verdict {
                    DeviationVerdict::NonStrict => "non-strict if it fails",
                    DeviationVerdict::Unimplemented => "unimplemented",
                };
                Some(format!("{verdict}: {}", d.reason))
            }
            Disposition::Unimplemented { deviation, .. } => {
                Some(format!("unimplemented: {}", deviation.reason))
            }
            Disposition::Skipped(Skip::CheckUnclaimed { capability, .. }) => Some(format!(
                "skipped: does not claim \"{}\"",
                capability.as_str()
            )),
            Disposition::Skipped(skip) => Some(format!("skipped: {skip}")),
            Disposition::Harness(e) => Some(format!("skipped: {e}")),
        }
    }
}

/// Why a property of `wirecheck prop` was not run or not judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRun {
    /// Its scenario is not run for this agent.
    Skipped(Skip),
    Harness(HarnessError),
    /// A generated case was not judged: why, and that case's reason.
    Unjudged {
        why: NotJudged,
        reason: String,
    },
}

impl NotRun {
    pub fn is_harness_error(&self) -> bool {
        match self {
            NotRun::Harness(_) => true,
            NotRun::Unjudged { why, .. } => *why == NotJudged::Harness,
            NotRun::Skipped(_) => false,
        }
    }

    /// Why the property has no verdict about the agent, if it has none for that reason.
    pub fn not_judged(&self) -> Option<NotJudged> {
        match self {
            NotRun::Harness(_) => Some(NotJudged::Harness),
            NotRun::Unjudged { why, .. } => Some(*why),
            NotRun::Skipped(Skip::Interrupted { .. }) => Some(NotJudged::Interrupted),
            NotRun::Skipped(_) => None,
        }
    }
}

impl fmt::Display for NotRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRun::Skipped(skip) => skip.fmt(f),
            NotRun::Harness(e) => e.fmt(f),
            NotRun::Unjudged { reason, .. } => f.write_str(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirecheck_results::reason::{is_harness_error, is_unclaimed, is_unjudged};

    fn profile(deviation: &str) -> AgentProfile {
        let text = format!(
            "name = \"a\"\ndescription = \"d\"\ncapabilities = [\"json\"]\n[commands]\nready = [\"true\"]\n{deviation}"
        );
        AgentProfile::from_toml_str(&text, std::path::Path::new("a.toml")).unwrap()
    }

    #[test]
    fn skip_reasons_render_as_results_json_has_them() {
        let unclaimed = Skip::Unclaimed {
            agent: "a".into(),
            missing: vec![Capability::Xml, Capability::Kvp],
        };
        assert_eq!(
            unclaimed.to_string(),
            format!(
                "agent a does not claim \"xml\" ({}), \"kvp\" ({})",
                Capability::Xml.describe(),
                Capability::Kvp.describe()
            )
        );
        let check = Skip::CheckUnclaimed {
            agent: "a".into(),
            capability: Capability::Kvp,
        };
        assert_eq!(
            check.to_string(),
            format!(
                "agent a does not claim \"kvp\" ({})",
                Capability::Kvp.describe()
            )
        );
        let stopped = Skip::Interrupted {
            signal: "SIGTERM",
            while_running: true,
        };
        assert_eq!(
            stopped.to_string(),
            "not judged: wirecheck was interrupted (SIGTERM) while the case ran; the agent was stopped"
        );
        let before = Skip::Interrupted {
            signal: "SIGINT",
            while_running: false,
        };
        assert_eq!(
            before.to_string(),
            "not run: wirecheck was interrupted (SIGINT)"
        );
        assert!(is_unjudged(&stopped.to_string()) && is_unjudged(&before.to_string()));
        assert!(!is_unjudged(&unclaimed.to_string()));
        assert!(is_unclaimed(&unclaimed.to_string()) && is_unclaimed(&check.to_string()));
        assert!(!is_unclaimed(&stopped.to_string()));
        let harness = HarnessError("fake did not start".into()).to_string();
        assert_eq!(harness, "harness error: fake did not start");
        assert!(is_harness_error(&harness) && is_unjudged(&harness));
        assert!(!is_harness_error("nothing to judge: no requests"));
    }

    #[test]
    fn attach_reasons_render_as_results_json_has_them() {
        let cases = [
            (
                Skip::CannotArrange(CannotArrange::InProgressAlwaysGoesOn {
                    agent: "wala".into(),
                }),
                "wala's in-progress report is always followed by Ready from the same invocation; only in-progress then ready can be arranged",
            ),
            (
                Skip::CannotArrange(CannotArrange::InvocationsInSandbox(3)),
                "the sandbox runs one agent invocation per scenario; this one has 3",
            ),
            (
                Skip::Unavailable(Unavailable::SandboxNeedsRoot),
                "sandbox attach needs root (fake-wireserver sandbox creates network and mount namespaces); run wirecheck as root",
            ),
            (
                Skip::Unavailable(Unavailable::MissingBinary {
                    binary: "fake-wireserver",
                    bin_dir: "/opt/bin".into(),
                }),
                "sandbox attach needs the fake-wireserver binary next to wirecheck (/opt/bin) or on PATH (cargo build --workspace --bins)",
            ),
            (
                Skip::Unavailable(Unavailable::Containment("no namespaces".into())),
                "no namespaces",
            ),
            (Skip::TooLong("over 60 s".into()), "over 60 s"),
        ];
        for (skip, text) in cases {
            assert_eq!(skip.to_string(), text);
            assert!(
                !matches!(skip, Skip::Unclaimed { .. } | Skip::CheckUnclaimed { .. })
                    && !is_unjudged(text)
                    && !is_unclaimed(text),
                "{text}"
            );
        }
    }

    #[test]
    fn an_unclaimed_case_is_unimplemented_only_when_declared_so() {
        let plain = profile("");
        let d = Disposition::of_case(&plain, "s.kvp.report", None, Some(Capability::Kvp));
        assert!(matches!(
            d,
            Disposition::Skipped(Skip::CheckUnclaimed { .. })
        ));
        assert_eq!(
            d.list_status().as_deref(),
            Some("skipped: does not claim \"kvp\"")
        );
        assert_eq!(d.not_run().unwrap().0, Verdict::Skipped);

        let declared = profile(
            "[[deviation]]\ncases = \"*.kvp.*\"\nverdict = \"unimplemented\"\nreason = \"no KVP\"\n",
        );
        let d = Disposition::of_case(&declared, "s.kvp.report", None, Some(Capability::Kvp));
        let (verdict, reason) = d.not_run().unwrap();
        assert_eq!(verdict, Verdict::Unimplemented);
        assert!(
            reason.starts_with("known deviation (*.kvp.*): no KVP; agent a does not claim \"kvp\""),
            "{reason}"
        );
        assert_eq!(d.list_status().as_deref(), Some("unimplemented: no KVP"));

        // A skip that is not the agent's (the sandbox's limit, wirecheck's patience, the
        // machine) stays a skip, whatever the profile declares, even for a check the agent
        // does not claim either: the scenario does not run at all (as `wirecheck run` has it;
        // `wirecheck list` used to say "unimplemented" here).
        for not_the_agents in [
            Skip::CannotArrange(CannotArrange::InvocationsInSandbox(2)),
            Skip::TooLong("over 60 s".into()),
            Skip::Unavailable(Unavailable::SandboxNeedsRoot),
        ] {
            let d = Disposition::of_case(
                &declared,
                "s.kvp.report",
                Some(not_the_agents.clone()),
                Some(Capability::Kvp),
            );
            assert!(
                matches!(&d, Disposition::Skipped(skip) if *skip == not_the_agents),
                "{d:?}"
            );
        }
        // What the agent itself cannot do (its in-progress report always goes on to Ready) is
        // its own limit: declared unimplemented, it is that, and says why; undeclared, a skip.
        let always_ready = || {
            Some(Skip::CannotArrange(CannotArrange::InProgressAlwaysGoesOn {
                agent: "a".into(),
            }))
        };
        let lone = profile(
            "[[deviation]]\ncases = \"s.*\"\nverdict = \"unimplemented\"\nreason = \"always Ready\"\n",
        );
        let (verdict, reason) = Disposition::of_case(&lone, "s.report.state", always_ready(), None)
            .not_run()
            .unwrap();
        assert_eq!(verdict, Verdict::Unimplemented);
        assert!(
            reason.starts_with("known deviation (s.*): always Ready; a's in-progress report"),
            "{reason}"
        );
        assert!(matches!(
            Disposition::of_case(&plain, "s.report.state", always_ready(), None),
            Disposition::Skipped(_)
        ));
        // A claimed check runs, graded by the declared deviation.
        let d = Disposition::of_case(&declared, "s.kvp.pool", None, None);
        let Disposition::Run { deviation } = d else {
            panic!("{d:?}")
        };
        assert_eq!(
            Disposition::grade(deviation, Verdict::Pass, None),
            (
                Verdict::Unimplemented,
                Some("known deviation (*.kvp.*): no KVP".into())
            )
        );
        assert_eq!(
            Disposition::grade(deviation, Verdict::Skipped, Some("x".into())),
            (Verdict::Skipped, Some("x".into()))
        );
    }

    #[test]
    fn a_non_strict_deviation_grades_only_failures() {
        let p = profile(
            "[[deviation]]\ncases = \"*.report.*\"\nverdict = \"non-strict\"\nreason = \"old\"\n",
        );
        let Disposition::Run { deviation } = Disposition::of_case(&p, "s.report.state", None, None)
        else {
            panic!()
        };
        assert_eq!(
            Disposition::grade(deviation, Verdict::Fail, Some("bad".into())),
            (
                Verdict::NonStrict,
                Some("known deviation (*.report.*): old; observed: bad".into())
            )
        );
        assert_eq!(
            Disposition::grade(deviation, Verdict::Pass, None),
            (Verdict::Pass, None)
        );
    }
}
