//! The regression file: the smallest failing inputs of earlier runs, one per line, replayed
//! before anything is generated (like proptest's `*.proptest-regressions`, but holding the
//! input itself, so a change of the generator does not invalidate it). Meant to be committed.
//!
//! ```text
//! # wirecheck prop regressions of agent my-agent: replayed first by every run
//! # failure.json: report.description failed: ...
//! failure.json {"reason":"'"}
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::diag::FileError;

use super::input::Input;
use super::property::Property;

/// One stored input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub property: Property,
    pub input: Input,
    /// 1-based line in the file.
    pub line: usize,
}

/// `wirecheck-prop-regressions/<agent>.txt`, relative to the working folder.
pub fn default_path(agent: &str) -> PathBuf {
    PathBuf::from("wirecheck-prop-regressions").join(format!("{agent}.txt"))
}

/// Reads the file; a missing file has no entries. A line that is not `<property> <input JSON>`
/// is an error naming file and line.
pub fn load(path: &Path) -> Result<Vec<Entry>, FileError> {
    let text = match fake_wireserver::files::read_regular_text(
        path,
        fake_wireserver::files::MAX_INPUT_FILE_BYTES,
    ) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(FileError::whole(
                path,
                format!("cannot read the regression file: {e}"),
            ));
        }
    };
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let err = |message: String| FileError {
            file: path.to_path_buf(),
            line: Some(i + 1),
            column: None,
            field: None,
            message,
        };
        let (name, json) = trimmed.split_once(' ').ok_or_else(|| {
            err(
                "expected `<property> <input as JSON>` (e.g. `failure.json {\"reason\":\"a\"}`)"
                    .into(),
            )
        })?;
        let property = Property::from_name(name).ok_or_else(|| {
            err(format!(
                "unknown property {name:?}; the properties are {}",
                Property::names()
            ))
        })?;
        let input = Input::from_json(json.trim()).map_err(err)?;
        input.fits(property).map_err(err)?;
        entries.push(Entry {
            property,
            input,
            line: i + 1,
        });
    }
    Ok(entries)
}

/// Appends `input` (unless the file already holds it for `property`), with a comment line
/// saying what failed. Creates the file and its folder.
pub fn append(
    path: &Path,
    agent: &str,
    property: Property,
    input: &Input,
    comment: &str,
) -> Result<bool, String> {
    let existing = load(path).map_err(|e| e.to_string())?;
    if existing
        .iter()
        .any(|e| e.property == property && e.input == *input)
    {
        return Ok(false);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let fresh = existing.is_empty() && !path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    if fresh {
        text.push_str(&format!(
            "# wirecheck prop regressions of agent {agent}: replayed first by every run (commit this file)\n"
        ));
    }
    // One line, escaped: agent text may hold anything.
    let comment: String = comment
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    text.push_str(&format!("# {}: {comment}\n", property.name()));
    text.push_str(&format!("{} {}\n", property.name(), input.to_json()));
    file.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_once_and_bad_lines_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/agent.txt");
        assert!(load(&path).unwrap().is_empty());
        let input = Input {
            reason: Some("x'\n€".into()),
            data: vec![],
            description: None,
            ..Input::default()
        };
        assert!(
            append(
                &path,
                "a",
                Property::FailureXml,
                &input,
                "report.description\nfailed"
            )
            .unwrap()
        );
        assert!(!append(&path, "a", Property::FailureXml, &input, "again").unwrap());
        let entries = load(&path).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].property, Property::FailureXml);
        assert_eq!(entries[0].input, input);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");

        std::fs::write(
            &path,
            "# c\nfailure.json {\"reason\":\"a\"}\nbogus.prop {}\n",
        )
        .unwrap();
        let e = load(&path).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("unknown property"), "{e}");
        std::fs::write(
            &path,
            "failure.json {\"reason\":\"a\",\"data\":[[\"1x\",\"v\"]]}\n",
        )
        .unwrap();
        assert!(load(&path).unwrap_err().message.contains("\"1x\""));
        // An input its property does not take is the file's error, named by line, not a
        // failure of the agent's.
        for (line, what) in [
            ("failure.json {}", "reason"),
            (
                "in-progress.json {\"reason\":\"x\",\"data\":[[\"k\",\"v\"]]}",
                "description",
            ),
        ] {
            std::fs::write(&path, format!("# c\n{line}\n")).unwrap();
            let e = load(&path).unwrap_err();
            assert_eq!(e.line, Some(2), "{e}");
            assert!(e.message.contains(what), "{e}");
        }
    }
}
