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

/// Folds the parts measured in `update` into an existing RESULTS.md (`bench-run --merge`): their
/// summary rows and sections replace those of the same name (or are added), their commands are
/// appended, and a line under the date says what was re-measured, when and how. Every other
/// part is kept as its own run wrote it.
pub fn merge(existing: &str, update: &Report) -> Result<String, String> {
    let summary_at = existing
        .find("\n## Summary\n")
        .ok_or("no `## Summary` in the existing file")?;
    let commands_at = existing
        .rfind("\n## Commands\n")
        .ok_or("no `## Commands` in the existing file")?;
    let (head, rest) = existing.split_at(summary_at);
    let (middle, commands) = rest.split_at(commands_at - summary_at);

    let titles: Vec<&str> = update.sections.iter().map(|s| s.title.as_str()).collect();
    let mut out = merged_head(head, update, &titles);

    // The middle: the summary (up to the first section), then one block per `## ` section.
    let mut blocks: Vec<String> = Vec::new();
    for (i, block) in middle.split("\n## ").enumerate() {
        let block = block.trim_matches('\n');
        if block.is_empty() {
            continue;
        }
        let _ = i;
        blocks.push(format!("## {}", block.trim_start_matches("## ")));
    }
    let summary = merged_summary(&blocks.remove(0), update)?;
    replace_sections(&mut blocks, update);
    out.push_str(summary.trim_end());
    out.push('\n');
    for block in &blocks {
        out.push('\n');
        out.push_str(block.trim_end());
        out.push('\n');
    }

    append_commands(&mut out, commands, update, &titles)?;
    Ok(out)
}

/// The part above the summary, with a line under the date saying what was re-measured.
fn merged_head(head: &str, update: &Report, titles: &[&str]) -> String {
    let fact = |key: &str| {
        update
            .machine
            .iter()
            .find(|(k, _)| k == key)
            .map_or("?", |(_, v)| v.as_str())
    };
    let remeasured = format!(
        "- re-measured (UTC): {}, {}: {} (commit {}; 1-minute load average {}; the other parts \
         are from the date above)",
        update.date,
        update.invocation,
        titles.join(", "),
        fact("commit"),
        fact("1-minute load average")
    );
    let same_parts = format!(": {} (", titles.join(", "));
    let mut out = String::new();
    for line in head.trim_end().lines() {
        // An earlier re-run of the same parts is replaced by this one.
        if line.starts_with("- re-measured (UTC):") && line.contains(&same_parts) {
            continue;
        }
        let _ = writeln!(out, "{line}");
        if line.starts_with("- date (UTC):") {
            let _ = writeln!(out, "{remeasured}");
        }
    }
    out.push('\n');
    out
}

/// The summary block with the re-measured figures' rows in place of their old ones, and what
/// the re-run missed or could not measure under the table.
fn merged_summary(summary: &str, update: &Report) -> Result<String, String> {
    let names: Vec<&str> = update
        .sections
        .iter()
        .flat_map(|s| &s.figures)
        .map(|f| f.name.as_str())
        .collect();
    let mut lines: Vec<String> = summary
        .lines()
        .filter(|l| !names.iter().any(|n| l.starts_with(&format!("| {n} |"))))
        .map(str::to_owned)
        .collect();
    let last_row = lines
        .iter()
        .rposition(|l| l.starts_with("| "))
        .ok_or("no summary table in the existing file")?;
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for f in update.sections.iter().flat_map(|s| &s.figures) {
        rows.push(format!(
            "| {} | {} | {} | {} | {} | {} |",
            f.name,
            f.measured,
            f.reference,
            ratio_text(f.ratio),
            f.target,
            verdict(f.met)
        ));
        if f.met == Some(false) {
            missed.push(f.name.as_str());
        }
    }
    lines.splice(last_row + 1..last_row + 1, rows);
    if !missed.is_empty() {
        lines.push(String::new());
        lines.push(format!(
            "**Missed targets in the re-measured part(s) ({}):** {}.",
            missed.len(),
            missed.join("; ")
        ));
    }
    for (section, why) in &update.failed {
        lines.push(String::new());
        lines.push(format!("**Not measured in the re-run: {section}.** {why}"));
    }
    Ok(lines.join("\n"))
}

/// Replaces the sections of the same title with the re-measured ones; new ones go at the end.
fn replace_sections(blocks: &mut Vec<String>, update: &Report) {
    for section in &update.sections {
        let text = format!("## {}\n\n{}", section.title, section.body.trim_end());
        let heading = format!("## {}", section.title);
        match blocks
            .iter()
            .position(|b| b.lines().next() == Some(heading.as_str()))
        {
            Some(i) => blocks[i] = text,
            None => blocks.push(text),
        }
    }
}

/// The existing command block with the re-run's commands added at its end.
fn append_commands(
    out: &mut String,
    commands: &str,
    update: &Report,
    titles: &[&str],
) -> Result<(), String> {
    let commands = commands.trim_end();
    let fence = commands
        .rfind("\n```")
        .ok_or("no command block in the existing file")?;
    out.push_str(&commands[..fence]);
    let _ = write!(
        out,
        "\n# re-measured {}: {}",
        update.date,
        titles.join(", ")
    );
    for entry in &update.commands {
        let _ = write!(out, "\n{}", entry.render());
    }
    out.push_str("\n```\n");
    Ok(())
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

    fn figure(name: &str, measured: &str) -> Figure {
        Figure {
            name: name.into(),
            measured: measured.into(),
            reference: "-".into(),
            ratio: None,
            target: "all".into(),
            met: Some(true),
        }
    }

    #[test]
    fn merge_replaces_the_parts_measured_and_keeps_the_others() {
        let old = Report {
            date: "2026-11-29 18:49".into(),
            invocation: "`bench/run.sh `".into(),
            sections: vec![
                Section {
                    title: "A".into(),
                    body: "table A".into(),
                    figures: vec![figure("fig a", "1")],
                },
                Section {
                    title: "B".into(),
                    body: "old table B".into(),
                    figures: vec![figure("fig b", "2")],
                },
            ],
            ..Report::default()
        };
        let update = Report {
            date: "2026-12-01 13:00".into(),
            invocation: "`bench/run.sh --only b --merge`".into(),
            sections: vec![
                Section {
                    title: "B".into(),
                    body: "new table B".into(),
                    figures: vec![figure("fig b", "3")],
                },
                Section {
                    title: "C".into(),
                    body: "table C".into(),
                    figures: vec![figure("fig c", "4")],
                },
            ],
            ..Report::default()
        };
        let merged = merge(&old.render(), &update).unwrap();
        assert!(merged.contains("| fig a | 1 |"), "{merged}");
        assert!(merged.contains("| fig b | 3 |"), "{merged}");
        assert!(!merged.contains("| fig b | 2 |"), "{merged}");
        assert!(merged.contains("| fig c | 4 |"), "{merged}");
        assert!(
            merged.contains("table A") && merged.contains("new table B"),
            "{merged}"
        );
        assert!(!merged.contains("old table B"), "{merged}");
        assert!(merged.contains("## C\n\ntable C"), "{merged}");
        assert!(
            merged.contains(
                "- re-measured (UTC): 2026-12-01 13:00, `bench/run.sh --only b --merge`: B, C"
            ),
            "{merged}"
        );
        assert!(merged.trim_end().ends_with("```"), "{merged}");
        assert!(
            merged.contains("# re-measured 2026-12-01 13:00: B, C"),
            "{merged}"
        );
        assert!(
            merged.contains("from the date above)\n\n## Summary\n"),
            "{merged}"
        );
        // Merging twice replaces again rather than adding.
        let twice = merge(&merged, &update).unwrap();
        assert_eq!(twice.matches("- re-measured").count(), 1, "{twice}");
        assert_eq!(twice.matches("| fig b |").count(), 1, "{twice}");
        assert_eq!(twice.matches("## C\n").count(), 1, "{twice}");
    }

    #[test]
    fn ratios_keep_sensible_precision() {
        assert_eq!(ratio_text(Some(0.8567)), "0.86x");
        assert_eq!(ratio_text(Some(67.91)), "67.9x");
        assert_eq!(ratio_text(Some(f64::INFINITY)), "n/a");
    }
}
