//! `results.json`: the machine-readable results, versioned by `schema_version`
//! and documented by `conformance/schema/results.schema.json`.

use std::path::{Path, PathBuf};

use super::model::{RunResults, SCHEMA_VERSION};
use super::output::{ResultsError, write_file};

/// File name inside the results folder.
pub const FILE_NAME: &str = "results.json";

/// The JSON Schema (draft 2020-12) of `results.json`, as committed.
pub const SCHEMA: &str = include_str!("../../schema/results.schema.json");

/// Renders `results.json` (pretty-printed, trailing newline).
pub fn render(results: &RunResults) -> Result<String, ResultsError> {
    let mut text = serde_json::to_string_pretty(results).map_err(|e| ResultsError::Render {
        what: FILE_NAME,
        message: e.to_string(),
    })?;
    text.push('\n');
    Ok(text)
}

/// Writes `dir/results.json`; returns its path.
pub fn write(dir: impl AsRef<Path>, results: &RunResults) -> Result<PathBuf, ResultsError> {
    write_file(dir.as_ref(), FILE_NAME, render(results)?.as_bytes())
}

/// The largest results.json read back (a seven-agent run writes about 7 MB).
pub const MAX_READ_BYTES: u64 = 512 << 20;

/// Reads a `results.json` back, refusing other schema versions with a clear error. Someone
/// else's file: a regular file (not a FIFO or a device) of at most [`MAX_READ_BYTES`].
pub fn read(path: impl AsRef<Path>) -> Result<RunResults, ResultsError> {
    let path = path.as_ref();
    let text =
        fake_wireserver::files::read_regular_text(path, MAX_READ_BYTES).map_err(|source| {
            ResultsError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
    from_str(&text, path)
}

/// Parses `results.json` text; `origin` names it in errors.
pub fn from_str(text: &str, origin: &Path) -> Result<RunResults, ResultsError> {
    let parse_err = |source| ResultsError::Parse {
        path: origin.to_path_buf(),
        source,
    };
    // Check the version before the shape, so an old or new file gets the
    // version message rather than a confusing missing-field error.
    let value: serde_json::Value = serde_json::from_str(text).map_err(parse_err)?;
    let found = value.get("schema_version").and_then(|v| v.as_u64());
    match found {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(ResultsError::SchemaVersion {
                path: origin.to_path_buf(),
                found: v,
                expected: SCHEMA_VERSION,
            });
        }
        None => {} // let serde name the missing/mistyped field
    }
    serde_json::from_value(value).map_err(parse_err)
}
