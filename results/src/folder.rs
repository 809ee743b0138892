//! The results folder (`wirecheck run --out`, `prop --out`, `merge OUT`), claimed before
//! anything runs, so that what it holds afterwards is this run's and nothing but.
//!
//! A path that does not exist is made; an empty folder is used; a folder an earlier wirecheck
//! run wrote (it holds [`MARKER`], or a `results.json` of wirecheck's) has that run's outputs
//! removed first (`results.json`, `junit.xml`, `report.html`, `artifacts/` and the writers'
//! leftover temporary files), whatever else it holds is left alone. Anything else (a file, a
//! folder of someone else's files) is refused, naming the path and what is expected: wirecheck
//! never deletes what it did not write, and never mixes its results into someone else's files.
//! Links inside the folder are removed as links, never followed.

use std::path::{Path, PathBuf};

/// Written into every results folder wirecheck claims: a run killed before its results were
/// written (only `artifacts/` left) is still recognized as wirecheck's.
pub const MARKER: &str = ".wirecheck-results";

const MARKER_TEXT: &str = "This folder holds the results of a wirecheck run; the next run given it as its results folder replaces them.\n";

/// What a run writes into its results folder (and removes there from an earlier run).
const OUTPUTS: [&str; 4] = [
    crate::json::FILE_NAME,
    crate::junit::FILE_NAME,
    crate::html::FILE_NAME,
    "artifacts",
];

/// Why a path cannot be the results folder.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error(
        "cannot use {path} as the results folder: it is {kind}, not a folder; give a new path (it is made), an empty folder, or the folder of an earlier wirecheck run (its results are replaced)"
    )]
    NotAFolder { path: PathBuf, kind: &'static str },
    #[error(
        "cannot use {path} as the results folder: it holds {holds} but no results of an earlier wirecheck run; wirecheck writes into a new path, an empty folder, or a folder it wrote before (replacing only its own results), never among other files: give another one"
    )]
    Foreign { path: PathBuf, holds: String },
    #[error("cannot use {path} as the results folder: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What claiming the folder found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// It was made, or was empty.
    New,
    /// It held an earlier run's results: these of its entries were removed.
    Replaced(Vec<String>),
}

/// Makes `dir` this run's results folder (see the module docs).
pub fn claim(dir: &Path) -> Result<Claimed, FolderError> {
    let io = |source| FolderError::Io {
        path: dir.to_path_buf(),
        source,
    };
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(FolderError::NotAFolder {
                path: dir.to_path_buf(),
                kind: kind_of(&m),
            });
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        Err(e) => return Err(io(e)),
    }
    let mut entries: Vec<String> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    let claimed = if entries.is_empty() {
        Claimed::New
    } else if is_wirechecks(dir, &entries) {
        Claimed::Replaced(remove_outputs(dir, &entries).map_err(io)?)
    } else {
        let shown = crate::text::clip(&crate::text::visible(&entries[0]), 80);
        return Err(FolderError::Foreign {
            path: dir.to_path_buf(),
            holds: match entries.len() - 1 {
                0 => format!("{shown:?}"),
                more => format!("{shown:?} and {more} other entries"),
            },
        });
    };
    std::fs::write(dir.join(MARKER), MARKER_TEXT).map_err(io)?;
    Ok(claimed)
}

/// Whether the folder was written by wirecheck: its marker, or (written before the marker
/// existed) a `results.json` that starts as wirecheck's does.
fn is_wirechecks(dir: &Path, entries: &[String]) -> bool {
    if entries.iter().any(|e| e == MARKER) {
        return true;
    }
    let Ok(file) = std::fs::File::open(dir.join(crate::json::FILE_NAME)) else {
        return false;
    };
    let mut head = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::Read::take(file, 4096), &mut head);
    let head = String::from_utf8_lossy(&head);
    head.trim_start().starts_with('{')
        && head.contains("\"schema_version\"")
        && head.contains("\"wirecheck_version\"")
}

/// Removes an earlier run's outputs (and the writers' temporary files, `.results.json.XXXX`);
/// returns their names.
fn remove_outputs(dir: &Path, entries: &[String]) -> std::io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in entries {
        let temporary = OUTPUTS.iter().any(|o| name.starts_with(&format!(".{o}.")));
        if !OUTPUTS.contains(&name.as_str()) && !temporary {
            continue;
        }
        let path = dir.join(name);
        // A link is removed as a link: its target is not wirecheck's.
        if std::fs::symlink_metadata(&path)?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
        removed.push(name.clone());
    }
    Ok(removed)
}

fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = m.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a folder"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wirechecks_own_outputs_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        assert_eq!(claim(&out).unwrap(), Claimed::New);
        assert!(out.join(MARKER).is_file());
        std::fs::create_dir_all(out.join("artifacts/a/s")).unwrap();
        std::fs::write(out.join("artifacts/a/s/journal.jsonl"), "").unwrap();
        std::fs::write(out.join("results.json"), "{}").unwrap();
        std::fs::write(out.join(".report.html.abc123"), "").unwrap();
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "").unwrap();
        std::os::unix::fs::symlink(&outside, out.join("junit.xml")).unwrap();
        let Claimed::Replaced(removed) = claim(&out).unwrap() else {
            panic!()
        };
        assert_eq!(
            removed,
            [
                ".report.html.abc123",
                "artifacts",
                "junit.xml",
                "results.json"
            ]
        );
        assert!(out.join("notes.txt").is_file() && out.join(MARKER).is_file());
        assert!(outside.join("keep").is_file(), "a link was followed");
    }

    #[test]
    fn a_folder_of_other_files_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("artifacts"), "someone's").unwrap();
        let e = claim(dir.path()).unwrap_err();
        assert!(matches!(e, FolderError::Foreign { .. }), "{e}");
        assert!(e.to_string().contains("holds \"artifacts\""), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("artifacts")).unwrap(),
            "someone's"
        );
        assert!(!dir.path().join(MARKER).exists());
    }

    #[test]
    fn a_results_json_of_an_older_wirecheck_is_recognized() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("results.json"),
            "{\n  \"schema_version\": 1,\n  \"started\": \"x\",\n  \"duration_ms\": 1,\n  \"wirecheck_version\": \"0.1.0\"\n}\n",
        )
        .unwrap();
        assert_eq!(
            claim(dir.path()).unwrap(),
            Claimed::Replaced(vec!["results.json".into()])
        );
    }
}
