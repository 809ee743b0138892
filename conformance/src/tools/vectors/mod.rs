//! `wirecheck vectors check DIR`: every vector in a vectors folder (the
//! layout of `testdata/vectors`, see its README.md) checked against the fake
//! and the parsers.
//!
//! * request vectors (`http/<agent>/*.json`, `"kind": "request"`) are
//!   replayed byte for byte over raw TCP to an in-process fake configured
//!   with the README's "Fixed fake values"; the journal's classification is
//!   compared to `expected`;
//! * the response vector (`"kind": "response"`) is compared to the fake's
//!   `throttled` preset;
//! * KVP pools (`kvp/*.bin` + `.json` sidecar) go through oracle::kvp;
//! * encoded reports (`reports/*.json`) go through oracle::encoded.
//!
//! One output line per vector; exit 0 when all are ok, 1 on any mismatch,
//! 2 when the folder is not a vectors folder.

mod fixed;
mod http;
mod kvp;
mod raw;
mod reports;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::text::visible;
use super::{EXIT_OK, EXIT_PROBLEMS, ToolError, ToolOutput};

pub use fixed::FixedValues;

/// The verdict on one vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorOutcome {
    /// Path relative to the folder, plus `#name` for one item of a list file.
    pub name: String,
    /// Empty when the vector checks out.
    pub mismatches: Vec<String>,
}

impl VectorOutcome {
    fn new(name: impl Into<String>, mismatches: Vec<String>) -> VectorOutcome {
        VectorOutcome {
            name: name.into(),
            mismatches,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// The files of a vectors folder, by kind, sorted.
#[derive(Debug, Default)]
struct Layout {
    http: Vec<PathBuf>,
    kvp_pools: Vec<PathBuf>,
    kvp_orphan_sidecars: Vec<PathBuf>,
    reports: Vec<PathBuf>,
}

/// Checks every vector under `dir`. Async because it runs the fake in process;
/// see [`vectors_check_blocking`] outside a runtime.
pub async fn vectors_check(dir: impl AsRef<Path>) -> Result<ToolOutput, ToolError> {
    let dir = dir.as_ref();
    let layout = discover(dir)?;
    let mut outcomes = Vec::new();
    outcomes.push(fixed::check_readme(dir));
    if !layout.http.is_empty() {
        outcomes.extend(http::check_all(dir, &layout.http).await?);
    }
    for pool in &layout.kvp_pools {
        outcomes.push(kvp::check(dir, pool));
    }
    for sidecar in &layout.kvp_orphan_sidecars {
        outcomes.push(VectorOutcome::new(
            relative(dir, sidecar),
            vec!["sidecar without its pool file (.bin)".into()],
        ));
    }
    for file in &layout.reports {
        outcomes.extend(reports::check(dir, file));
    }
    Ok(render(&outcomes))
}

/// [`vectors_check`] on a runtime of its own.
pub fn vectors_check_blocking(dir: impl AsRef<Path>) -> Result<ToolOutput, ToolError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ToolError::Fake(format!("tokio runtime: {e}")))?;
    runtime.block_on(vectors_check(dir))
}

fn render(outcomes: &[VectorOutcome]) -> ToolOutput {
    let mut stdout = String::new();
    for outcome in outcomes {
        if outcome.is_ok() {
            let _ = writeln!(stdout, "ok    {}", outcome.name);
        } else {
            let _ = writeln!(
                stdout,
                "FAIL  {}: {}",
                outcome.name,
                visible(&outcome.mismatches.join("; "))
            );
        }
    }
    let failed = outcomes.iter().filter(|o| !o.is_ok()).count();
    let _ = writeln!(
        stdout,
        "{} checked: {} ok, {} FAIL",
        outcomes.len(),
        outcomes.len() - failed,
        failed
    );
    ToolOutput {
        stdout,
        exit_code: if failed == 0 { EXIT_OK } else { EXIT_PROBLEMS },
    }
}

fn discover(dir: &Path) -> Result<Layout, ToolError> {
    let bad = |message: String| ToolError::BadFolder {
        path: dir.to_path_buf(),
        message,
    };
    if !dir.is_dir() {
        return Err(match std::fs::metadata(dir) {
            Err(source) => ToolError::Read {
                path: dir.to_path_buf(),
                source,
            },
            Ok(_) => bad("not a directory; expected a vectors folder".into()),
        });
    }
    let mut layout = Layout::default();
    let http = dir.join("http");
    if http.is_dir() {
        for agent in sorted_entries(&http)? {
            if agent.is_dir() {
                layout.http.extend(
                    sorted_entries(&agent)?
                        .into_iter()
                        .filter(|p| has_extension(p, "json")),
                );
            }
        }
    }
    let kvp = dir.join("kvp");
    if kvp.is_dir() {
        let files = sorted_entries(&kvp)?;
        for file in &files {
            if has_extension(file, "bin") {
                layout.kvp_pools.push(file.clone());
            } else if has_extension(file, "json") && !files.contains(&file.with_extension("bin")) {
                layout.kvp_orphan_sidecars.push(file.clone());
            }
        }
    }
    let reports = dir.join("reports");
    if reports.is_dir() {
        layout.reports = sorted_entries(&reports)?
            .into_iter()
            .filter(|p| has_extension(p, "json"))
            .collect();
    }
    if layout.http.is_empty() && layout.kvp_pools.is_empty() && layout.reports.is_empty() {
        return Err(bad(
            "no vectors found; expected http/<agent>/*.json, kvp/*.bin with .json sidecars, or reports/*.json (the layout of testdata/vectors, see its README.md)".into(),
        ));
    }
    Ok(layout)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let read_err = |source| ToolError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        entries.push(entry.map_err(read_err)?.path());
    }
    entries.sort();
    Ok(entries)
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == ext)
}

/// `http/cloud-init-22.4.2/01-ready-goalstate.json`: the name a vector goes by.
fn relative(dir: &Path, path: &Path) -> String {
    path.strip_prefix(dir).unwrap_or(path).display().to_string()
}

/// Reads and parses a JSON vector file; the error is the mismatch line.
fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("not valid JSON: {e}"))
}

/// `expected X, got Y` with both rendered as JSON, long values cut.
fn differs(what: &str, expected: &serde_json::Value, actual: &serde_json::Value) -> String {
    format!(
        "{what}: expected {}, got {}",
        short_json(expected),
        short_json(actual)
    )
}

fn short_json(value: &serde_json::Value) -> String {
    const MAX: usize = 160;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        text
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}… ({} chars)", text.chars().count())
    }
}
