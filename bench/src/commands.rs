//! The exact commands a run executed, for RESULTS.md: each distinct command line once, with how
//! many times it ran, paths shown relative to the repository root.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A command line as a shell would read it back.
pub fn render(program: &Path, args: &[String]) -> String {
    std::iter::once(program.display().to_string())
        .chain(args.iter().cloned())
        .map(|a| quote(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Single-quotes a word when the shell would otherwise split or expand it.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `127.0.0.1:41234` → `ADDR` (ephemeral ports differ on every run).
fn loopback_ports_as_addr(line: &str) -> String {
    const LOOPBACK: &str = "127.0.0.1:";
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find(LOOPBACK) {
        let after = &rest[i + LOOPBACK.len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        out.push_str(&rest[..i]);
        if digits > 0 {
            out.push_str("ADDR");
        } else {
            out.push_str(LOOPBACK);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[derive(Debug)]
pub struct CommandLog {
    root: PathBuf,
    /// Temporary folders shown as placeholders (`$TMP`).
    tmp: Mutex<Vec<(PathBuf, String)>>,
    entries: Mutex<Vec<Entry>>,
}

/// A distinct command line, what it ran against, and how many times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub line: String,
    pub label: Option<String>,
    pub runs: usize,
}

impl Entry {
    /// The line with a trailing comment: what it ran against and how many times.
    pub fn render(&self) -> String {
        let mut notes = Vec::new();
        if let Some(label) = &self.label {
            notes.push(label.clone());
        }
        if self.runs > 1 {
            notes.push(format!("x{}", self.runs));
        }
        if notes.is_empty() {
            self.line.clone()
        } else {
            format!("{}    # {}", self.line, notes.join(", "))
        }
    }
}

impl CommandLog {
    pub fn new(root: &Path) -> CommandLog {
        CommandLog {
            root: root.to_path_buf(),
            tmp: Mutex::new(Vec::new()),
            entries: Mutex::new(Vec::new()),
        }
    }

    /// Shows `dir` as `placeholder` in recorded commands.
    pub fn alias(&self, dir: &Path, placeholder: &str) {
        self.tmp
            .lock()
            .expect("command log")
            .push((dir.to_path_buf(), placeholder.to_owned()));
    }

    fn shorten(&self, line: &str) -> String {
        let mut line = line.to_owned();
        for (dir, placeholder) in self.tmp.lock().expect("command log").iter() {
            line = line.replace(&dir.display().to_string(), placeholder);
        }
        let root = format!("{}/", self.root.display());
        loopback_ports_as_addr(&line.replace(&root, ""))
    }

    /// `path` as recorded commands show it (relative to the root, temporary folders aliased).
    pub fn display_path(&self, path: &Path) -> String {
        self.shorten(&path.display().to_string())
    }

    pub fn record(&self, line: &str) {
        self.record_against(line, None);
    }

    /// Records a command run against something its line does not name (e.g. which server an
    /// `ADDR` was).
    pub fn record_against(&self, line: &str, label: Option<&str>) {
        let line = self.shorten(line);
        let label = label.map(str::to_owned);
        let mut entries = self.entries.lock().expect("command log");
        match entries
            .iter_mut()
            .find(|e| e.line == line && e.label == label)
        {
            Some(e) => e.runs += 1,
            None => entries.push(Entry {
                line,
                label,
                runs: 1,
            }),
        }
    }

    /// Distinct commands in first-run order, with their run counts.
    pub fn entries(&self) -> Vec<Entry> {
        self.entries.lock().expect("command log").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_the_shell_would_split() {
        assert_eq!(quote("--cases=a.*"), "'--cases=a.*'");
        assert_eq!(quote("-c64"), "-c64");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn ephemeral_ports_become_addr() {
        assert_eq!(
            loopback_ports_as_addr("wrk 'http://127.0.0.1:45405/x' 127.0.0.1:"),
            "wrk 'http://ADDR/x' 127.0.0.1:"
        );
    }

    #[test]
    fn counts_repeats_and_shortens_paths() {
        let log = CommandLog::new(Path::new("/repo"));
        log.alias(Path::new("/tmp/x1"), "$TMP");
        log.record("/repo/target/release/wirecheck kvp dump /tmp/x1/pool");
        log.record("/repo/target/release/wirecheck kvp dump /tmp/x1/pool");
        log.record_against("wrk http://127.0.0.1:1/", Some("bare axum"));
        let rendered: Vec<String> = log.entries().iter().map(Entry::render).collect();
        assert_eq!(
            rendered,
            vec![
                "target/release/wirecheck kvp dump $TMP/pool    # x2".to_owned(),
                "wrk http://ADDR/    # bare axum".to_owned(),
            ]
        );
    }
}
