//! Whether each agent ever got going: an agent that in none of its scenarios sent a request
//! or ended well or crashed (a relative path in its command, which names a file in its case folder; a
//! missing interpreter module) is one problem of the user's setup, reported once as such
//! (exit 2, its case folder and stderr named), not as every one of its cases failing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::exec::Exit;
use crate::observe::RunRecord;

/// Bytes of stderr kept for the message.
const STDERR_TAIL_BYTES: usize = 600;

/// Shared by every pair of one run (clones share the record).
#[derive(Debug, Clone, Default)]
pub struct StartWatch(Arc<Mutex<BTreeMap<String, AgentStarts>>>);

#[derive(Debug, Default)]
struct AgentStarts {
    pairs: usize,
    got_going: bool,
    first: Option<NeverStarted>,
}

/// An agent that never got going, with its first run as the example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeverStarted {
    pub agent: String,
    /// Scenarios it ran in (none of which it got going in).
    pub pairs: usize,
    pub scenario: String,
    /// Where it ran (deleted after the run).
    pub case_dir: PathBuf,
    pub argv: Vec<String>,
    pub exit: String,
    /// The end of its stderr, escaped for the terminal.
    pub stderr_tail: String,
}

impl StartWatch {
    /// Records one pair's session: `requests` whether the fake received any. A scenario whose
    /// wireserver is a closed port (`fake_reachable` false) says nothing either way: a working
    /// agent sends the fake nothing there and rightly fails, so it is not counted.
    pub fn record(
        &self,
        agent: &str,
        scenario: &str,
        case_dir: &Path,
        fake_reachable: bool,
        requests: bool,
        runs: &[RunRecord],
    ) {
        if !fake_reachable {
            return;
        }
        // Ended well, or ran long enough to be stopped, or crashed (a signal): it started.
        // A crash is the agent's own failure and is judged, not the user's setup.
        let went_well = |r: &RunRecord| {
            matches!(
                r.exit,
                Exit::Code(0) | Exit::StoppedWhenDone | Exit::KilledAtDeadline | Exit::Signal(_)
            )
        };
        let got_going = requests || runs.iter().any(went_well);
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(agent.to_owned()).or_default();
        entry.pairs += 1;
        entry.got_going |= got_going;
        if !got_going
            && entry.first.is_none()
            && let Some(run) = runs.first()
        {
            let bytes = &run.stderr.bytes;
            let tail = &bytes[bytes.len().saturating_sub(STDERR_TAIL_BYTES)..];
            entry.first = Some(NeverStarted {
                agent: agent.to_owned(),
                pairs: 0,
                scenario: scenario.to_owned(),
                case_dir: case_dir.to_path_buf(),
                argv: run.argv.clone(),
                exit: run.exit.describe(),
                stderr_tail: crate::tools::text::visible(String::from_utf8_lossy(tail).trim()),
            });
        }
    }

    /// The agents that ran in at least one scenario and got going in none.
    pub fn never_started(&self) -> Vec<NeverStarted> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.values()
            .filter(|a| a.pairs > 0 && !a.got_going)
            .filter_map(|a| {
                a.first.clone().map(|f| NeverStarted {
                    pairs: a.pairs,
                    ..f
                })
            })
            .collect()
    }
}

impl std::fmt::Display for NeverStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let visible = crate::tools::text::visible;
        let argv: Vec<String> = self.argv.iter().map(|a| visible(a)).collect();
        write!(
            f,
            "agent {} never got going: in none of its {} scenario(s) did it send a request or end with exit status 0. \
             Its first run ({}) ran `{}` in its case folder {} and ended with {}",
            visible(&self.agent),
            self.pairs,
            visible(&self.scenario),
            argv.join(" "),
            self.case_dir.display(),
            self.exit
        )?;
        if self.stderr_tail.is_empty() {
            f.write_str(", printing nothing on stderr.")?;
        } else {
            write!(
                f,
                "; its stderr ended:\n    {}\n",
                self.stderr_tail.replace('\n', "\n    ")
            )?;
        }
        f.write_str(
            "Agents run inside their case folder (made for the case, deleted after it): a relative path in the \
             command names a file there. Give absolute paths (--agent-cmd makes a relative path to a file that \
             exists where wirecheck was started absolute), or put the program on PATH. Its cases are in the results as judged.",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Captured;
    use crate::observe::RunRecord;

    fn run(exit: Exit, stderr: &str) -> RunRecord {
        RunRecord {
            run: crate::scenario::Run {
                action: crate::agent::Action::Ready,
                reason: None,
                data: vec![],
                description: None,
            },
            argv: vec!["python3".into(), "my_agent.py".into()],
            start_ms: 0,
            clock_ms: 0,
            end_ms: 5,
            exit,
            stdout: Captured::default(),
            stderr: Captured {
                bytes: stderr.as_bytes().to_vec(),
                total: stderr.len(),
            },
            pid: None,
            refused: Vec::new(),
        }
    }

    #[test]
    fn one_pair_that_got_going_clears_the_agent() {
        let w = StartWatch::default();
        let dir = Path::new("/tmp/case");
        w.record(
            "a",
            "s1",
            dir,
            true,
            false,
            &[run(Exit::Code(2), "can't open file")],
        );
        w.record(
            "a",
            "s2",
            dir,
            true,
            false,
            &[run(Exit::Code(2), "can't open file")],
        );
        w.record("b", "s1", dir, true, false, &[run(Exit::Code(2), "x")]);
        w.record("b", "s2", dir, true, true, &[run(Exit::Code(2), "x")]);
        w.record("c", "s1", dir, true, false, &[run(Exit::Code(0), "")]);
        // A crash by a signal is a start that went wrong, judged as such.
        w.record("e", "s1", dir, true, false, &[run(Exit::Signal(11), "")]);
        // Only scenarios whose wireserver is a closed port: a working agent sends the fake
        // nothing there and exits 1; that is not "never got going".
        w.record(
            "d",
            "closed",
            dir,
            false,
            false,
            &[run(Exit::Code(1), "Connection refused")],
        );
        let never = w.never_started();
        assert_eq!(never.len(), 1, "{never:?}");
        assert_eq!(never[0].agent, "a");
        assert_eq!(never[0].pairs, 2);
        let text = never[0].to_string();
        assert!(text.contains("/tmp/case"), "{text}");
        assert!(text.contains("can't open file"), "{text}");
        assert!(text.contains("python3 my_agent.py"), "{text}");
    }
}
