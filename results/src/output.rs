//! Writing one output file safely.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Errors from the writers and from reading `results.json` back.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid results file: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: schema_version is {found}, this wirecheck reads schema_version {expected}")]
    SchemaVersion {
        path: PathBuf,
        found: u64,
        expected: u32,
    },
    #[error("cannot render {what}: {message}")]
    Render { what: &'static str, message: String },
}

/// Writes `contents` to `dir/name` via a temporary file in `dir` and a rename.
pub(crate) fn write_file(dir: &Path, name: &str, contents: &[u8]) -> Result<PathBuf, ResultsError> {
    let path = dir.join(name);
    let err = |source| ResultsError::Write {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(contents).map_err(err)?;
    // tempfile creates 0600; reports are meant to be shared (CI artifacts, web servers).
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(&path).map_err(|e| err(e.error))?;
    Ok(path)
}
