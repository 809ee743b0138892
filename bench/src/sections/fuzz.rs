//! A short fuzzing session of the oracle's cargo-fuzz targets (`oracle/fuzz/`), run
//! only when asked (`--fuzz-seconds N`): not a benchmark, but the one place a deep run's
//! outcome is written down. Corpora stay in `oracle/fuzz/corpus/` (ignored by git);
//! crash inputs go to `target/fuzz-artifacts/<target>/`.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, bail};

use super::{Ctx, thousands};
use crate::commands::render;
use crate::results::Section;

/// The oracle's fuzz targets.
pub const TARGETS: &[&str] = &["encoded", "health_xml", "health_json", "kvp"];

/// `stat::number_of_executed_units: N` from libFuzzer's final stats.
pub fn executed_units(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|n| n.trim().parse().ok())
}

pub fn run(ctx: &Ctx, seconds: u64) -> anyhow::Result<Section> {
    let dir = ctx.root.join("oracle/fuzz");
    let version = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .context("running cargo +nightly fuzz --version")?;
    if !version.status.success() {
        bail!(
            "cargo-fuzz is not available on the nightly toolchain: `cargo install cargo-fuzz \
             --locked` (and `rustup toolchain install nightly`)"
        );
    }
    let build_args: Vec<String> = ["+nightly", "fuzz", "build"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    ctx.log.record(&format!(
        "(cd oracle/fuzz && {})",
        render("cargo".as_ref(), &build_args)
    ));
    let build = Command::new("cargo")
        .args(&build_args)
        .current_dir(&dir)
        .output()
        .context("building the fuzz targets")?;
    if !build.status.success() {
        bail!(
            "cargo +nightly fuzz build failed:\n{}",
            String::from_utf8_lossy(&build.stderr)
        );
    }

    let mut body = String::new();
    let _ = writeln!(
        body,
        "{} (`cargo +nightly fuzz run`), each target for {seconds} s with its corpus in \
         `oracle/fuzz/corpus/<target>/`; a crash input would be kept in \
         `target/fuzz-artifacts/<target>/`.\n",
        String::from_utf8_lossy(&version.stdout).trim(),
    );
    let _ = writeln!(body, "| target | seconds | inputs executed | result |");
    let _ = writeln!(body, "|---|---:|---:|---|");
    let mut crashed = Vec::new();
    for target in TARGETS {
        let artifacts = ctx.target_dir.join("fuzz-artifacts").join(target);
        std::fs::create_dir_all(&artifacts)?;
        let args: Vec<String> = vec![
            "+nightly".into(),
            "fuzz".into(),
            "run".into(),
            (*target).into(),
            "--".into(),
            format!("-max_total_time={seconds}"),
            "-print_final_stats=1".into(),
            format!("-artifact_prefix={}/", artifacts.display()),
        ];
        ctx.log.record(&format!(
            "(cd oracle/fuzz && {})",
            render("cargo".as_ref(), &args)
        ));
        let started = Instant::now();
        let out = Command::new("cargo")
            .args(&args)
            .current_dir(&dir)
            .output()
            .with_context(|| format!("fuzzing {target}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let units = executed_units(&stderr);
        let result = if out.status.success() {
            "no crash".to_owned()
        } else {
            crashed.push(*target);
            let written = stderr
                .lines()
                .find(|l| l.contains("Test unit written to"))
                .unwrap_or("see the fuzzer's output");
            format!("**CRASH** ({})", written.trim())
        };
        let _ = writeln!(
            body,
            "| `{target}` | {:.0} | {} | {result} |",
            started.elapsed().as_secs_f64(),
            units.map_or("?".to_owned(), |n| thousands(n as f64))
        );
    }
    if !crashed.is_empty() {
        let _ = writeln!(
            body,
            "\n**The fuzzer found crashes in: {}.**",
            crashed.join(", ")
        );
    }
    Ok(Section {
        title: "Fuzzing the oracle's parsers".into(),
        body,
        figures: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_final_stats() {
        let stderr =
            "#1234 DONE cov: 10\nstat::number_of_executed_units: 98765\nstat::peak_rss_mb: 40\n";
        assert_eq!(executed_units(stderr), Some(98765));
        assert_eq!(executed_units("crashed"), None);
    }
}
