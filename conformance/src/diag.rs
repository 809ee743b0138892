//! Errors in user-written files (agent profiles, scenarios) that name the file, the line and
//! the field, and say what is expected.
//!
//! One mechanism places them, the same as the fake's scenario reader: a document is
//! deserialized into its raw shapes ([`parse_toml`]) with `serde_path_to_error` tracking the
//! field path (indexes 1-based: `agent.run[2].action`, `deviation[1].cases`) and TOML spans
//! giving the line; the validation that follows names fields the same way ([`nth`]).

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A problem in a TOML file a user wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    pub file: PathBuf,
    /// 1-based line, when the problem has a place in the file.
    pub line: Option<usize>,
    /// 1-based column (characters), with `line`.
    pub column: Option<usize>,
    /// Dotted field path (`commands.ready`, `agent.budget`) when known.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl FileError {
    /// An error about the whole file (unreadable, missing, ...).
    pub fn whole(file: &Path, message: impl Into<String>) -> FileError {
        FileError {
            file: file.to_path_buf(),
            line: None,
            column: None,
            field: None,
            message: message.into(),
        }
    }

    /// An error at a byte span of `text` (the file's contents).
    pub fn at(
        file: &Path,
        text: &str,
        span: Range<usize>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> FileError {
        let (line, column) = line_column(text, span.start);
        FileError {
            file: file.to_path_buf(),
            line: Some(line),
            column: Some(column),
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }

    /// Converts a TOML error at the field path `path` (dotted, 1-based indexes; empty: the
    /// document, or not known). "unknown field `x`" / "missing field `x`" name the key
    /// themselves, and their path is the table they are in (none at the top level); any other
    /// error is named by its path, or failing one by the key written before it.
    pub fn from_toml(file: &Path, text: &str, path: &str, err: &toml::de::Error) -> FileError {
        let message = err.message().trim().to_owned();
        let names_field = message.contains("field `");
        // The path of an unknown key ends with the key, which the message names.
        let path = match message
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
        {
            Some(key) if path == key => "",
            Some(key) => path
                .strip_suffix(key)
                .and_then(|p| p.strip_suffix('.'))
                .unwrap_or(path),
            None => path,
        };
        let field = match err.span() {
            _ if !path.is_empty() => Some(path.to_owned()),
            Some(span) if !names_field => key_before(text, span.start),
            _ => None,
        };
        match err.span() {
            Some(span) => FileError::at(file, text, span, field.as_deref(), message),
            None => FileError {
                field,
                ..FileError::whole(file, message)
            },
        }
    }
}

/// Deserializes a whole TOML document into its raw shape `T`; a failure names the file, the
/// line and the field path ([`FileError::from_toml`]).
pub fn parse_toml<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, FileError> {
    let de =
        toml::Deserializer::parse(text).map_err(|e| FileError::from_toml(file, text, "", &e))?;
    serde_path_to_error::deserialize(de)
        .map_err(|e| FileError::from_toml(file, text, &field_path(e.path()), e.inner()))
}

/// A serde path as a dotted field name with 1-based indexes (`agent.run[2].data[1]`).
pub fn field_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&nth("", *index)),
            // `Spanned<T>` is deserialized through private keys: they are not fields.
            serde_path_to_error::Segment::Map { key } if key.starts_with("$__") => {}
            serde_path_to_error::Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => {}
        }
    }
    out
}

/// The field name of the item at 0-based `index` of the array `field`, as error messages
/// count: from 1 (`nth("deviation", 0)` is `deviation[1]`).
pub fn nth(field: &str, index: usize) -> String {
    format!("{field}[{}]", index + 1)
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// The key whose value contains byte `offset`: the nearest `key =` at or before it, not
/// crossing a table header. Used to name the field in type errors ("invalid type: ...").
pub fn key_before(text: &str, offset: usize) -> Option<String> {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    // The current line up to the offset first (`budget = "x"` with the offset at `"x"`).
    let mut lines: Vec<&str> = before.split('\n').collect();
    lines.reverse();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if i > 0 && trimmed.starts_with('[') && !trimmed.starts_with("[[") && is_header(trimmed) {
            return None;
        }
        if i > 0 && trimmed.starts_with("[[") && is_header(trimmed) {
            return None;
        }
        if let Some(key) = assignment_key(trimmed) {
            return Some(key);
        }
    }
    None
}

fn is_header(line: &str) -> bool {
    let line = line.split('#').next().unwrap_or("").trim_end();
    line.ends_with(']') && !line.contains('=')
}

fn assignment_key(line: &str) -> Option<String> {
    let eq = line.find('=')?;
    let key = line[..eq].trim();
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '"' | '\''));
    valid.then(|| key.trim_matches(|c| c == '"' || c == '\'').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        // column counts characters, not bytes
        assert_eq!(line_column(text, text.rfind('=').unwrap()), (2, 4));
    }

    #[test]
    fn type_errors_name_the_key() {
        let text = "[agent]\nbudget = \"soon\"\n";
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Agent {
            budget: f64,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct File {
            agent: Agent,
        }
        let err = toml::from_str::<File>(text).unwrap_err();
        let e = FileError::from_toml(Path::new("s.toml"), text, "", &err);
        assert_eq!(e.line, Some(2));
        assert_eq!(e.field.as_deref(), Some("budget"));
        assert!(
            e.to_string()
                .starts_with("s.toml:2:10: field `budget`: invalid type"),
            "{e}"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Run {
        action: toml::Spanned<String>,
        #[serde(default)]
        data: Vec<toml::Spanned<String>>,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        #[serde(default)]
        run: Vec<toml::Spanned<Run>>,
    }

    #[test]
    fn paths_name_the_field_with_indexes_from_one() {
        let text =
            "name = \"n\"\n[[run]]\naction = \"a\"\n[[run]]\naction = \"b\"\ndata = [\"x\", 7]\n";
        let e = parse_toml::<Doc>(Path::new("s.toml"), text).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("run[2].data[2]"), "{e}");
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("invalid type"), "{e}");

        let text = "name = \"n\"\n[[run]]\naction = \"a\"\n[[run]]\nactoin = \"b\"\n";
        let e = parse_toml::<Doc>(Path::new("s.toml"), text).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("run[2]"), "{e}");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(
            e.to_string()
                .starts_with("s.toml:5:1: field `run[2]`: unknown field `actoin`, expected"),
            "{e}"
        );

        // At the top level the message names the key itself.
        let e = parse_toml::<Doc>(Path::new("s.toml"), "name = \"n\"\nnmae = 1\n").unwrap_err();
        assert_eq!(e.field, None, "{e}");
        assert!(
            e.to_string()
                .starts_with("s.toml:2:1: unknown field `nmae`"),
            "{e}"
        );
        let e = parse_toml::<Doc>(Path::new("s.toml"), "[[run]]\naction = \"a\"\n").unwrap_err();
        assert!(e.message.contains("missing field `name`"), "{e}");

        // A syntax error has no path: the line, and the key before it.
        let e = parse_toml::<Doc>(Path::new("s.toml"), "name = \"n\"\nrun = [\n").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("run")), "{e}");
        assert_eq!(nth("deviation", 0), "deviation[1]");
    }

    #[test]
    fn key_search_stops_at_headers() {
        let text = "x = 1\n[t]\n";
        assert_eq!(key_before(text, text.len()), None);
        let text = "cmd = [\n  \"a\",\n  7,\n]";
        assert_eq!(
            key_before(text, text.find('7').unwrap()).as_deref(),
            Some("cmd")
        );
    }
}
