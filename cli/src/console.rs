//! What `wirecheck run` and `wirecheck prop` show on the terminal: a progress bar while they run
//! (stderr, only on a terminal; drawn from the runner's progress events) and a summary table at
//! the end. `NO_COLOR` turns colours off.
//!
//! Text from agents, profiles and scenarios is shown escaped and clipped
//! (`wirecheck_results::text::{shown, shown_lines}`): a reason that quotes a 1 MB report is a
//! few hundred characters here, saying how much was left out; results.json and report.html
//! keep it whole.

use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::OnceLock;

use conformance::progress::{PropProgress, RunProgress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use wirecheck_results::problems;
use wirecheck_results::text::{shown, visible};
use wirecheck_results::{CaseResult, RunResults, Verdict};

/// Colours only on a terminal, and never with `NO_COLOR` set (https://no-color.org).
pub fn colors_enabled(stream_is_terminal: bool) -> bool {
    stream_is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Longest line of a snapshot diff shown on the terminal (a transcript line holds a report's
/// description, 4096 bytes on the platform); the `.snap.new` file has it whole.
pub const DIFF_LINE_CHARS: usize = 4200;

/// The progress bar over the (agent, scenario) pairs of `wirecheck run` (stderr, terminals
/// only), drawn from the runner's events: made when the pairs start.
#[derive(Debug, Default)]
pub struct Progress {
    bar: OnceLock<ProgressBar>,
}

impl RunProgress for Progress {
    fn started(&self, pairs: usize) {
        if !std::io::stderr().is_terminal() {
            return;
        }
        let template = if colors_enabled(true) {
            "{spinner:.cyan} [{elapsed_precise}] {bar:30.cyan/blue} {pos}/{len} scenarios {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} scenarios {msg}"
        };
        let bar = ProgressBar::with_draw_target(Some(pairs as u64), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        let _ = self.bar.set(bar);
    }

    /// One pair done: advance, and print its failures above the bar.
    fn pair_done(&self, agent: &str, scenario: &str, cases: &[CaseResult]) {
        let Some(bar) = self.bar.get() else { return };
        let failed = cases.iter().filter(|c| c.verdict == Verdict::Fail).count();
        if failed > 0 {
            bar.println(format!(
                "FAIL {} {}: {failed} failed case(s)",
                shown(agent),
                shown(scenario)
            ));
        }
        bar.set_message(shown(scenario));
        bar.inc(1);
    }

    fn finished(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

/// `wirecheck prop`'s bar over the generated cases (stderr, terminals only; hidden otherwise),
/// advanced by the property search's events.
pub struct PropBar(pub ProgressBar);

impl PropBar {
    pub fn new(enabled: bool, total: u64) -> PropBar {
        if !enabled || !std::io::stderr().is_terminal() {
            return PropBar(ProgressBar::hidden());
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} generated cases {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        PropBar(bar)
    }
}

impl PropProgress for PropBar {
    fn ran(&self, n: u64) {
        self.0.inc(n);
    }

    fn phase(&self, message: String) {
        self.0.set_message(message);
    }
}

fn paint(text: &str, verdict: Verdict, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    let code = match verdict {
        Verdict::Pass => "32",
        Verdict::Fail => "31;1",
        Verdict::NonStrict => "33",
        Verdict::Informational => "36",
        Verdict::Unimplemented => "35",
        Verdict::Skipped => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// At most this many causes are listed, each with at most [`LISTED_CASES`] of its cases; the
/// report has them all.
const LISTED_GROUPS: usize = 20;
const LISTED_CASES: usize = 5;

/// The end-of-run summary: a table of verdict counts per agent, the failing cases grouped by
/// cause (the same check with the same reason but for numbers, paths and quoted values:
/// [`wirecheck_results::problems`], as in report.html), most frequent first, and where the
/// results are (and, loudly, that the agents ran uncontained when they did). Names and reasons
/// come from profiles, scenarios and the agents themselves: their control characters are escaped
/// and they are clipped ([`shown`]).
pub fn summary(results: &RunResults, out: &Path, strict: bool, color: bool) -> String {
    let mut s = String::new();
    verdict_table(&mut s, results, color);
    causes(&mut s, results, strict, color);
    unsteady(&mut s, results, color);
    let counts = results.counts();
    s.push_str(&format!(
        "\n{} cases in {:.1} s: {counts}{}\n",
        counts.total(),
        results.duration_ms as f64 / 1000.0,
        if strict {
            " (strict: non-strict counts as fail)"
        } else {
            ""
        }
    ));
    if let Some(why) = &results.uncontained {
        s.push_str(&format!(
            "{}: the agents ran without containment (--uncontained): {}\n",
            paint("UNCONTAINED", Verdict::Fail, color),
            visible(why)
        ));
    }
    s.push_str(&format!(
        "results: {}/results.json, junit.xml, report.html\n",
        out.display()
    ));
    s
}

/// The verdict counts per agent, and the flows each agent does not claim.
fn verdict_table(s: &mut String, results: &RunResults, color: bool) {
    let name_width = results
        .agents
        .iter()
        .map(|a| shown(&a.agent).chars().count())
        .chain(std::iter::once("agent".len()))
        .max()
        .unwrap_or(5);
    s.push_str(&format!("{:<name_width$}", "agent"));
    for v in Verdict::ALL {
        s.push_str(&format!(
            "  {:>w$}",
            v.as_str(),
            w = v.as_str().len().max(4)
        ));
    }
    s.push('\n');
    for agent in &results.agents {
        let counts = agent.counts();
        s.push_str(&format!("{:<name_width$}", shown(&agent.agent)));
        for v in Verdict::ALL {
            let n = counts.get(v);
            let cell = format!("{:>w$}", n, w = v.as_str().len().max(4));
            if n > 0 && v != Verdict::Pass && v != Verdict::Skipped {
                s.push_str(&format!("  {}", paint(&cell, v, color)));
            } else {
                s.push_str(&format!("  {cell}"));
            }
        }
        s.push('\n');
    }
    for u in &results.unclaimed_flows {
        s.push_str(&format!("{}: {u}\n", shown(&u.agent)));
    }
}

/// The failing cases (with `strict`, the non-strict ones too) grouped by cause, most frequent
/// first.
fn causes(s: &mut String, results: &RunResults, strict: bool, color: bool) {
    let verdicts: &[Verdict] = if strict {
        &problems::PROBLEM_VERDICTS
    } else {
        &[Verdict::Fail]
    };
    let groups = problems::group(results, verdicts);
    if !groups.is_empty() {
        s.push('\n');
        for group in groups.iter().take(LISTED_GROUPS) {
            let tag = paint(
                &group.verdict.as_str().to_ascii_uppercase(),
                group.verdict,
                color,
            );
            if let [only] = group.cases.as_slice() {
                s.push_str(&format!(
                    "{tag} {} {}: {}\n",
                    shown(only.agent),
                    shown(&only.case.id),
                    shown(only.case.reason.as_deref().unwrap_or(""))
                ));
                continue;
            }
            s.push_str(&format!(
                "{tag} ×{} {} ({} agent{}): {}\n",
                group.cases.len(),
                shown(group.check),
                group.agent_count(),
                if group.agent_count() == 1 { "" } else { "s" },
                shown(group.example())
            ));
            for member in group.cases.iter().take(LISTED_CASES) {
                s.push_str(&format!(
                    "    {} {}\n",
                    shown(member.agent),
                    shown(&member.case.id)
                ));
            }
            if group.cases.len() > LISTED_CASES {
                s.push_str(&format!(
                    "    ... and {} more\n",
                    group.cases.len() - LISTED_CASES
                ));
            }
        }
        if groups.len() > LISTED_GROUPS {
            let rest: usize = groups[LISTED_GROUPS..].iter().map(|g| g.cases.len()).sum();
            s.push_str(&format!(
                "... and {} more cause{} ({rest} case{}; see report.html)\n",
                groups.len() - LISTED_GROUPS,
                if groups.len() - LISTED_GROUPS == 1 {
                    ""
                } else {
                    "s"
                },
                if rest == 1 { "" } else { "s" },
            ));
        }
    }
}

/// Flaky cases (their judged attempts disagree; the worst verdict stands) and cases every
/// attempt of which stalled (informational: this machine could not judge their timing).
fn unsteady(s: &mut String, results: &RunResults, color: bool) {
    let u = results.unsteady();
    let mut list = |tag: &str, verdict: Verdict, what: &str, cases: &[(&str, &CaseResult)]| {
        if cases.is_empty() {
            return;
        }
        s.push_str(&format!(
            "\n{} {} case{} {what}\n",
            paint(tag, verdict, color),
            cases.len(),
            if cases.len() == 1 { "" } else { "s" }
        ));
        for (agent, case) in cases.iter().take(LISTED_CASES) {
            let judged: Vec<&str> = case
                .attempts
                .iter()
                .flat_map(|a| a.judged.iter().map(|v| v.as_str()))
                .collect();
            s.push_str(&format!(
                "    {} {} {}: {} attempts{}\n",
                case.verdict.as_str(),
                shown(agent),
                shown(&case.id),
                case.attempt_count(),
                if judged.is_empty() {
                    String::new()
                } else {
                    format!(", judged {}", judged.join(", "))
                }
            ));
        }
        if cases.len() > LISTED_CASES {
            s.push_str(&format!(
                "    ... and {} more\n",
                cases.len() - LISTED_CASES
            ));
        }
    };
    list(
        "FLAKY",
        Verdict::Fail,
        "judged differently by their attempts (the worst verdict stands):",
        &u.flaky,
    );
    list(
        "NOT JUDGED",
        Verdict::Informational,
        "whose timing the machine stalled on every attempt (informational):",
        &u.stalled,
    );
}
