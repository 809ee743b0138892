//! Running `wrk` with `bench/imds.lua` and reading the JSON summary line the script prints.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use serde::Deserialize;

use crate::commands::{CommandLog, render};

/// What `imds.lua`'s `done()` prints after `WRK_JSON `.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct WrkSummary {
    pub requests: u64,
    pub duration_us: u64,
    pub bytes: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub errors_connect: u64,
    pub errors_read: u64,
    pub errors_write: u64,
    /// Responses other than 2xx/3xx.
    pub errors_status: u64,
    pub errors_timeout: u64,
}

impl WrkSummary {
    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / (self.duration_us as f64 / 1e6)
    }
    pub fn errors(&self) -> u64 {
        self.errors_connect
            + self.errors_read
            + self.errors_write
            + self.errors_status
            + self.errors_timeout
    }
}

pub fn parse_output(stdout: &str) -> anyhow::Result<WrkSummary> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("WRK_JSON "))
        .ok_or_else(|| anyhow!("no WRK_JSON line in wrk's output"))?;
    serde_json::from_str(line).with_context(|| format!("WRK_JSON line {line:?}"))
}

/// The load generator settings shared by every server in a run.
#[derive(Debug, Clone)]
pub struct Load {
    pub wrk: std::path::PathBuf,
    pub script: std::path::PathBuf,
    pub threads: u32,
    pub connections: u32,
    pub duration: Duration,
}

impl Load {
    /// `wrk -t.. -c.. -d..s --timeout 10s -s imds.lua URL` against the server named `label`.
    pub fn run(&self, url: &str, label: &str, log: &CommandLog) -> anyhow::Result<WrkSummary> {
        self.run_for(url, label, self.duration, log)
    }

    pub fn run_for(
        &self,
        url: &str,
        label: &str,
        duration: Duration,
        log: &CommandLog,
    ) -> anyhow::Result<WrkSummary> {
        let args = vec![
            format!("-t{}", self.threads),
            format!("-c{}", self.connections),
            format!("-d{}s", duration.as_secs().max(1)),
            // Long enough that a slow server's latency is measured, not dropped as a timeout.
            "--timeout".to_owned(),
            "10s".to_owned(),
            "-s".to_owned(),
            self.script.display().to_string(),
            url.to_owned(),
        ];
        let line = render(&self.wrk, &args);
        log.record_against(&line, Some(label));
        let out = Command::new(&self.wrk)
            .args(&args)
            .output()
            .with_context(|| format!("running {line}"))?;
        if !out.status.success() {
            bail!(
                "{line}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        parse_output(&String::from_utf8_lossy(&out.stdout))
    }
}

/// `wrk` must be the Debian package's (`/usr/bin/wrk`), with Lua scripting.
pub fn check_installed(wrk: &Path) -> anyhow::Result<()> {
    if !wrk.is_file() {
        bail!(
            "{} not found: install the Debian package (apt-get install wrk)",
            wrk.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_summary_line() {
        let out = "Running 1s test @ http://x\n  2 threads and 64 connections\n\
            WRK_JSON {\"requests\":1000,\"duration_us\":500000,\"bytes\":9,\"p50_us\":10,\"p90_us\":20,\
            \"p99_us\":30,\"max_us\":40,\"errors_connect\":0,\"errors_read\":1,\"errors_write\":0,\
            \"errors_status\":2,\"errors_timeout\":0}\nRequests/sec: 2000\n";
        let s = parse_output(out).unwrap();
        assert_eq!(s.requests_per_second(), 2000.0);
        assert_eq!((s.p99_us, s.errors()), (30, 3));
        assert!(parse_output("Requests/sec: 1\n").is_err());
    }
}
