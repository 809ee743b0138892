//! One module per figure. Each `run` measures its subject and its reference in the same run
//! and returns a [`Section`](crate::results::Section) with the table and the figures.

pub mod footprint;
pub mod fuzz;
pub mod imds;
pub mod install;
pub mod kvp;
pub mod matrix;
pub mod prop;
pub mod reliability;
pub mod reporter;
pub mod suite;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::commands::CommandLog;
use crate::http::{IMDS_PATH, fetch, imds_request};
use crate::servers::{ServerSpec, release_binary};

/// Sizes of a run (`bench-run --help`; `bench/run.sh` passes small ones for a dry run).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Seconds per wrk measurement.
    pub wrk_seconds: u64,
    /// wrk measurements per server, round-robin.
    pub rounds: usize,
    pub wrk_threads: u32,
    pub connections: u32,
    /// Start-ups timed per server.
    pub startup_runs: usize,
    /// Requests sent before the "after load" memory reading.
    pub flood_requests: usize,
    pub flood_connections: usize,
    /// Records in the generated KVP pool.
    pub kvp_records: usize,
    /// Timed runs per KVP reader.
    pub kvp_runs: usize,
    /// Timed runs of the whole conformance suite.
    pub suite_runs: usize,
    /// `RUNS` for bench/reporter/run.sh.
    pub reporter_runs: usize,
    /// Rounds of the reliability part's kill loop.
    pub reliability_rounds: usize,
    /// Timed installs from the release archive per way (loopback HTTP, folder, warm cache).
    pub install_runs: usize,
    /// A second fake-wireserver binary the IMDS part measures beside the current one.
    pub baseline_fake: Option<PathBuf>,
    /// An older checkout (with release binaries built) whose suite the suite part times beside
    /// the current one.
    pub baseline_checkout: Option<PathBuf>,
    /// Generated cases of the prop part against the bundled reporter, and against cloud-init.
    pub prop_cases: u32,
    pub prop_cases_cloud_init: u32,
    pub prop_schedules: u32,
    pub prop_schedules_python: u32,
}

/// What every section needs.
pub struct Ctx {
    pub root: PathBuf,
    pub target_dir: PathBuf,
    /// The run's temporary folder (`$TMP` in RESULTS.md).
    pub tmp: PathBuf,
    pub log: CommandLog,
    pub settings: Settings,
    pub wrk: PathBuf,
    /// Debian's interpreter (the one with the cloud-init package).
    pub python: PathBuf,
}

impl Ctx {
    pub fn bin(&self, name: &str) -> anyhow::Result<PathBuf> {
        release_binary(&self.target_dir, name)
    }

    /// The fake with IMDS's per-VM rate limit off (`bench/fake-unlimited.toml`): a throughput
    /// run against the limit would measure its 429s.
    pub fn fake(&self) -> anyhow::Result<ServerSpec> {
        let scenario = self.root.join("bench/fake-unlimited.toml");
        Ok(ServerSpec::new(
            "fake-wireserver",
            self.bin("fake-wireserver")?,
            &["--scenario", &scenario.display().to_string()],
        ))
    }

    pub fn bare_axum(&self, doc: &Document) -> anyhow::Result<ServerSpec> {
        Ok(ServerSpec::new(
            "bare axum",
            self.bin("bench-bare-axum")?,
            &[
                "--body",
                &doc.path.display().to_string(),
                "--content-type",
                &doc.content_type,
            ],
        ))
    }

    /// testinit's shape: `HTTPServer` (one request at a time); `threading`: `ThreadingHTTPServer`.
    pub fn python_fake(&self, doc: &Document, threading: bool) -> ServerSpec {
        let script = self.root.join("bench/python_fake.py").display().to_string();
        let body = doc.path.display().to_string();
        let mut args = vec![
            script.as_str(),
            "--body",
            &body,
            "--content-type",
            &doc.content_type,
        ];
        if threading {
            args.push("--threading");
        }
        let name = if threading {
            "Python ThreadingHTTPServer"
        } else {
            "Python HTTPServer (testinit)"
        };
        ServerSpec::new(name, &self.python, &args)
    }
}

/// The IMDS document as the fake serves it, saved so the references serve the same bytes.
#[derive(Debug, Clone)]
pub struct Document {
    pub path: PathBuf,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// Asks a freshly started fake for `IMDS_PATH` and saves the body under `dir`.
pub fn capture_document(ctx: &Ctx, dir: &Path) -> anyhow::Result<Document> {
    let fake = ctx.fake()?.start(&ctx.log)?;
    let response = fetch(fake.imds, &imds_request(IMDS_PATH)).context("asking the fake")?;
    if response.status != 200 {
        bail!(
            "the fake answered {} to GET {IMDS_PATH} with Metadata: true",
            response.status
        );
    }
    let content_type = response
        .header("content-type")
        .unwrap_or("application/json; charset=utf-8")
        .to_owned();
    let path = dir.join("instance.json");
    std::fs::write(&path, &response.body).with_context(|| format!("writing {}", path.display()))?;
    Ok(Document {
        path,
        content_type,
        bytes: response.body,
    })
}

/// `12,345`.
pub fn thousands(n: f64) -> String {
    let n = n.round() as i64;
    let digits = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(-1000.0), "-1,000");
    }
}
