//! Errors in user-written files (agent profiles, scenarios) that name the file, the line and
//! the field, and say what is expected.

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

    /// Converts a TOML deserialization error, adding the field name when the message lacks it.
    pub fn from_toml(file: &Path, text: &str, err: &toml::de::Error) -> FileError {
        let message = err.message().trim().to_owned();
        let Some(span) = err.span() else {
            return FileError::whole(file, message);
        };
        // serde names the field itself in "unknown field" / "missing field" messages.
        let names_field = message.contains("field `");
        let field = if names_field {
            None
        } else {
            key_before(text, span.start)
        };
        FileError::at(file, text, span, field.as_deref(), message)
    }
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
        let e = FileError::from_toml(Path::new("s.toml"), text, &err);
        assert_eq!(e.line, Some(2));
        assert_eq!(e.field.as_deref(), Some("budget"));
        assert!(
            e.to_string()
                .starts_with("s.toml:2:10: field `budget`: invalid type"),
            "{e}"
        );
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
