//! `provision-report` per-report latency: `bench/reporter/run.sh` (owned by the reporter's
//! engineer) measures it against cloud-init's own Ready path on one loopback server and writes
//! `bench/reporter/RESULTS.md`; this section runs it in the same session and includes its table.

use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context as _, bail};

use super::Ctx;
use crate::results::{Figure, Section};

pub fn run(ctx: &Ctx) -> anyhow::Result<Section> {
    let script = ctx.root.join("bench/reporter/run.sh");
    let results = ctx.root.join("bench/reporter/RESULTS.md");
    let runs = ctx.settings.reporter_runs.max(1).to_string();
    ctx.log
        .record(&format!("RUNS={runs} bash bench/reporter/run.sh"));
    let started = SystemTime::now();
    let out = Command::new("bash")
        .arg(&script)
        .env("RUNS", &runs)
        .current_dir(&ctx.root)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "bench/reporter/run.sh: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let modified = std::fs::metadata(&results)
        .and_then(|m| m.modified())
        .with_context(|| format!("reading {}", results.display()))?;
    if modified < started {
        bail!(
            "bench/reporter/run.sh did not rewrite {} in this run",
            results.display()
        );
    }
    let text = std::fs::read_to_string(&results)?;
    Ok(section_from(&text, &results))
}

/// The reporter's results file, headings demoted under this section, plus one summary figure
/// read from its table when its shape is the expected one.
pub fn section_from(text: &str, path: &Path) -> Section {
    let mut body = format!(
        "From `{}` (written by `bench/reporter/run.sh` in this run), included as is:\n\n",
        path.file_name()
            .map(|_| "bench/reporter/RESULTS.md")
            .unwrap_or_default()
    );
    for line in text.lines() {
        if line.starts_with("# ") {
            continue; // its title
        }
        if line.starts_with('#') {
            body.push_str("##");
        }
        body.push_str(line);
        body.push('\n');
    }
    Section {
        title: "provision-report per-report latency".into(),
        body,
        figures: figure_from(text).into_iter().collect(),
    }
}

fn row_median(text: &str, needle: &str) -> Option<f64> {
    let row = text
        .lines()
        .find(|l| l.starts_with('|') && l.contains(needle))?;
    // | variant | measured | median ms | p90 ms | min ms |
    row.split('|').nth(3)?.trim().parse().ok()
}

fn figure_from(text: &str) -> Option<Figure> {
    let ours = row_median(text, "provision-report ready (JSON, IMDS + KVP)")?;
    let theirs = row_median(text, "python3 process")?;
    let target_line = text.lines().find(|l| l.starts_with("- target:"))?;
    let met = if target_line.contains("**met**") {
        Some(true)
    } else if target_line.to_ascii_lowercase().contains("missed") {
        Some(false)
    } else {
        None
    };
    let target = target_line
        .trim_start_matches("- target:")
        .split(':')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    Some(Figure {
        name: "provision-report ready, per process (cloud-init's Ready path as reference)".into(),
        measured: format!("{ours:.2} ms"),
        reference: format!("{theirs:.2} ms"),
        ratio: Some(theirs / ours),
        target,
        met,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# reporter benchmark results\n\nintro\n\n\
| variant | measured | median ms | p90 ms | min ms |\n|---|---|---:|---:|---:|\n\
| provision-report ready (JSON, IMDS + KVP) | process | 3.65 | 8.01 | 3.11 |\n\
| cloud-init 22.4.2 get_metadata_from_fabric (python3 process) | process | 192.59 | 252.15 | 136.84 |\n\n\
- target: median JSON ready under 10 ms per process: **met** (3.65 ms)\n";

    #[test]
    fn reads_the_reporter_table() {
        let s = section_from(SAMPLE, Path::new("bench/reporter/RESULTS.md"));
        assert!(!s.body.contains("# reporter benchmark results"));
        let f = &s.figures[0];
        assert_eq!(f.measured, "3.65 ms");
        assert_eq!(f.met, Some(true));
        assert_eq!(f.target, "median JSON ready under 10 ms per process");
        assert!((f.ratio.unwrap() - 192.59 / 3.65).abs() < 1e-9);
    }

    #[test]
    fn an_unexpected_shape_still_includes_the_text() {
        let s = section_from("# t\nsomething else\n", Path::new("x"));
        assert!(s.figures.is_empty());
        assert!(s.body.contains("something else"));
    }
}
