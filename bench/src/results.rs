//! RESULTS.md: the machine, a summary of every figure against its target, one part per figure
//! with its side-by-side table, and the exact commands that produced them.

use std::fmt::Write as _;

/// One figure: a measurement, its reference in the same run, their ratio, and the target.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: String,
    pub measured: String,
    pub reference: String,
    /// measured / reference, in the figure's own direction (see `target`).
    pub ratio: Option<f64>,
    pub target: String,
    /// `None`: informational, no target.
    pub met: Option<bool>,
}

/// One part of the results, e.g. "IMDS throughput".
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub title: String,
    /// Markdown: the side-by-side table and what was measured.
    pub body: String,
    pub figures: Vec<Figure>,
}

/// Everything RESULTS.md says.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub date: String,
    pub machine: Vec<(String, String)>,
    pub invocation: String,
    pub sections: Vec<Section>,
    /// Sections that could not be measured, with why.
    pub failed: Vec<(String, String)>,
    pub commands: Vec<crate::commands::Entry>,
    pub notes: Vec<String>,
}

pub fn ratio_text(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r.is_finite() && r >= 100.0 => format!("{r:.0}x"),
        Some(r) if r.is_finite() && r >= 10.0 => format!("{r:.1}x"),
        Some(r) if r.is_finite() => format!("{r:.2}x"),
        _ => "n/a".to_owned(),
    }
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**MISSED**",
        None => "(no target)",
    }
}

impl Report {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# wirecheck benchmark results\n");
        let _ = writeln!(
            out,
            "Written by `bench/run.sh` ({}). Every figure is measured side by side with its \
             reference in the same run and given as a ratio. Release builds.\n",
            self.invocation
        );
        let _ = writeln!(out, "- date (UTC): {}", self.date);
        for (k, v) in &self.machine {
            let _ = writeln!(out, "- {k}: {v}");
        }
        let _ = writeln!(out, "\n## Summary\n");
        let _ = writeln!(
            out,
            "| figure | measured | reference (same run) | ratio | target | |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---|---|");
        let all: Vec<&Figure> = self.sections.iter().flat_map(|s| &s.figures).collect();
        for f in &all {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                f.name,
                f.measured,
                f.reference,
                ratio_text(f.ratio),
                f.target,
                verdict(f.met)
            );
        }
        let missed: Vec<&str> = all
            .iter()
            .filter(|f| f.met == Some(false))
            .map(|f| f.name.as_str())
            .collect();
        out.push('\n');
        if missed.is_empty() && self.failed.is_empty() {
            let _ = writeln!(out, "Every figure with a target met it.");
        } else {
            if !missed.is_empty() {
                let _ = writeln!(
                    out,
                    "**Missed targets ({}):** {}.",
                    missed.len(),
                    missed.join("; ")
                );
            }
            for (section, why) in &self.failed {
                let _ = writeln!(out, "\n**Not measured: {section}.** {why}");
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "\n{note}");
        }
        for section in &self.sections {
            let _ = writeln!(out, "\n## {}\n", section.title);
            out.push_str(section.body.trim_end());
            out.push('\n');
        }
        let _ = writeln!(out, "\n## Commands\n");
        let _ = writeln!(
            out,
            "Run from the repository root; `$TMP` is the run's temporary folder, `ADDR` the \
             address from the server's ready line.\n"
        );
        let _ = writeln!(out, "```sh");
        for entry in &self.commands {
            let _ = writeln!(out, "{}", entry.render());
        }
        let _ = writeln!(out, "```");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_targets_are_said_plainly() {
        let report = Report {
            sections: vec![Section {
                title: "x".into(),
                body: "table".into(),
                figures: vec![Figure {
                    name: "startup".into(),
                    measured: "20 ms".into(),
                    reference: "bare 5 ms".into(),
                    ratio: Some(4.0),
                    target: "< 15 ms".into(),
                    met: Some(false),
                }],
            }],
            ..Report::default()
        };
        let text = report.render();
        assert!(text.contains("| startup | 20 ms | bare 5 ms | 4.00x | < 15 ms | **MISSED** |"));
        assert!(text.contains("**Missed targets (1):** startup."));
    }

    #[test]
    fn ratios_keep_sensible_precision() {
        assert_eq!(ratio_text(Some(0.8567)), "0.86x");
        assert_eq!(ratio_text(Some(67.91)), "67.9x");
        assert_eq!(ratio_text(Some(f64::INFINITY)), "n/a");
    }
}
