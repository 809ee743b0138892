//! Every protocol section the sources cite ("PROTOCOL.md §6.5", "docs/protocol.md §6.5", or a
//! bare "§6.5" in a Rust file) is a heading of `docs/protocol.md`, so a reader who follows a
//! citation lands on the fact it relies on, and renumbering the doc cannot silently orphan one.
//!
//! What counts as a citation, per line:
//! - a `§N[.M]` right after `PROTOCOL.md ` or `docs/protocol.md ` (any tracked .rs, .toml, .py,
//!   .sh or .md file outside `target/` and `testdata/`);
//! - in a `.rs` file, any other `§N[.M]` too (comments and finding messages alike: both are read
//!   by people looking for the section);
//! - a `§` that continues a list (`§1.1, §9.1`, `§2–§4`, `§6.5 step 7, §7.1`, `§6.2/§6.5`)
//!   shares the status of the one before it;
//! - sections of other documents are not ours: a list headed by `RFC <n> §…` or `contract(s) §…`
//!   (DESIGN.md's contracts) is skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The extensions whose files may cite the protocol doc.
const SCANNED: &[&str] = &["rs", "toml", "py", "sh", "md"];

/// Citations cannot be this rare: the code cites the doc in well over a hundred places, so a
/// scanner that finds fewer is broken, not the repository clean.
const AT_LEAST: usize = 100;

/// The section numbers `docs/protocol.md` keeps, in order: the same as the shared PROTOCOL.md the
/// code was first written against, so old and new citations mean the same section.
const SECTIONS: &[&str] = &[
    "1", "1.1", "1.2", "2", "3", "3.1", "3.2", "4", "4.1", "4.2", "4.3", "5", "6", "6.1", "6.2",
    "6.3", "6.4", "6.5", "7", "7.1", "7.2", "7.3", "7.4", "8", "8.1", "8.2", "9", "9.1", "9.2",
    "10", "11",
];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Citation {
    file: String,
    line: usize,
    section: String,
}

/// The section numbers of the doc's headings: `## 6. Encoded …` → `6`, `### 6.5 Parsing …` → `6.5`.
fn headings(doc: &str) -> Vec<String> {
    doc.lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| {
            let title = l.trim_start_matches('#').trim_start();
            let number: String = title
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let number = number.trim_end_matches('.');
            (!number.is_empty()).then(|| number.to_owned())
        })
        .collect()
}

/// Whose sections a `§` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// The protocol doc's: must resolve.
    Ours,
    /// Another document's (an RFC, a contract): not checked.
    Foreign,
    /// A bare `§` outside Rust: not treated as a citation.
    Unclaimed,
}

/// `N`, `N.M`, `N.M.K`, ... at the start of `s`: every dotted level, so a citation of a
/// level the doc does not have (6.5.9) is not read as its parent (6.5).
fn section_number(s: &str) -> Option<&str> {
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let mut end = digits(s);
    if end == 0 {
        return None;
    }
    while let Some(rest) = s[end..].strip_prefix('.') {
        let n = digits(rest);
        if n == 0 {
            break; // a full stop, not a level
        }
        end += 1 + n;
    }
    Some(&s[..end])
}

/// Whether the text between two `§` references only joins them into one list.
fn joins(between: &str) -> bool {
    between
        .replace([',', '/', '–', '—', '-'], " ")
        .split_whitespace()
        .all(|w| matches!(w, "and" | "step" | "steps") || w.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the text before a list's first `§` names a document other than the protocol doc.
fn foreign(before: &str) -> bool {
    let before = before.trim_end();
    let no_digits = before.trim_end_matches(|c: char| c.is_ascii_digit());
    (no_digits.len() < before.len() && no_digits.trim_end().ends_with("RFC"))
        || before.ends_with("contract")
        || before.ends_with("contracts")
}

/// Whether a `§` follows the doc's name: `PROTOCOL.md §6`, `docs/protocol.md, §6`,
/// `PROTOCOL.md (§6)`, `PROTOCOL.md's §6`.
fn anchored(before: &str) -> bool {
    let name = before.trim_end_matches([' ', '(', '[', ',', ':', ';']);
    let name = name.strip_suffix("'s").unwrap_or(name);
    name.ends_with("PROTOCOL.md") || name.ends_with("docs/protocol.md")
}

/// The protocol-doc citations in one file.
fn citations(file: &str, text: &str) -> Vec<Citation> {
    let rust = file.ends_with(".rs");
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        // (end of the previous reference, its status)
        let mut previous: Option<(usize, Status)> = None;
        for (at, _) in line.match_indices('§') {
            let after = &line[at + '§'.len_utf8()..];
            let Some(section) = section_number(after) else {
                previous = None;
                continue;
            };
            let before = &line[..at];
            let status = match previous {
                Some((end, status)) if end <= at && joins(&line[end..at]) => status,
                _ if anchored(before) => Status::Ours,
                _ if foreign(before) => Status::Foreign,
                _ if rust => Status::Ours,
                _ => Status::Unclaimed,
            };
            if status == Status::Ours {
                found.push(Citation {
                    file: file.to_owned(),
                    line: index + 1,
                    section: section.to_owned(),
                });
            }
            previous = Some((at + '§'.len_utf8() + section.len(), status));
        }
    }
    found
}

/// `file:line: §N` for every citation whose section is not a heading of `doc`, and how many
/// citations there were in all.
fn unresolved(doc: &str, files: &[(String, String)]) -> (Vec<String>, usize) {
    let known: BTreeSet<String> = headings(doc).into_iter().collect();
    let all: Vec<Citation> = files
        .iter()
        .flat_map(|(path, text)| citations(path, text))
        .collect();
    let bad = all
        .iter()
        .filter(|c| !known.contains(&c.section))
        .map(|c| format!("{}:{}: §{}", c.file, c.line, c.section))
        .collect();
    (bad, all.len())
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives one level below the workspace root")
        .to_owned()
}

fn scanned(path: &str) -> bool {
    !path.starts_with("target/")
        && !path.starts_with("testdata/")
        && Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SCANNED.contains(&e))
}

/// The tracked files (`git ls-files`); without git (an exported tree), every file below the
/// root except build output, test data and VCS metadata.
fn source_files(root: &Path) -> Vec<String> {
    let listed = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let paths: Vec<String> = match listed {
        Some(out) => String::from_utf8(out.stdout)
            .expect("git ls-files prints UTF-8 paths")
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
        None => {
            let mut paths = Vec::new();
            walk(root, root, &mut paths);
            paths
        }
    };
    paths.into_iter().filter(|p| scanned(p)).collect()
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a readable directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "target" | "testdata" | ".git") {
                walk(root, &path, out);
            }
        } else if let Ok(relative) = path.strip_prefix(root) {
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn every_protocol_citation_in_the_repository_resolves_to_a_heading_of_docs_protocol_md() {
    let root = repo_root();
    let doc_path = root.join("docs/protocol.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("{}: {e}", doc_path.display()));
    let files: Vec<(String, String)> = source_files(&root)
        .into_iter()
        .filter_map(|path| {
            // A tracked file deleted in the working tree, or one that is not UTF-8, cites nothing.
            std::fs::read_to_string(root.join(&path))
                .ok()
                .map(|text| (path, text))
        })
        .collect();
    let (bad, total) = unresolved(&doc, &files);
    assert!(
        bad.is_empty(),
        "{} citation(s) name a section that is not a heading of docs/protocol.md:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(
        total >= AT_LEAST,
        "found only {total} protocol citations in {} files; expected at least {AT_LEAST}: is the scanner broken?",
        files.len()
    );
}

#[test]
fn docs_protocol_md_keeps_the_section_numbers_the_code_cites() {
    let path = repo_root().join("docs/protocol.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        headings(&doc),
        SECTIONS,
        "the numbered headings of docs/protocol.md, in order"
    );
}

#[test]
fn a_citation_of_a_missing_section_is_reported_with_its_file_and_line() {
    // `$` stands for the section sign: this file is scanned like any other, and its examples
    // must not be mistaken for its own citations.
    let s = |text: &str| text.replace('$', "§");
    let doc = "# Title\n## 1. One\n### 1.1 One one\n## 6. Six\n### 6.5 Parsing\n## 7. Seven\n";
    let files = [
        (
            "src/a.rs",
            "//! The parser (PROTOCOL.md $6.5 step 7, $7, $7.9).\n\
             /// Bare in Rust counts: $6.6 is missing, $1.1 is not.\n\
             // Other documents: RFC 9112 $6.3, $8; contract $3, contracts $2–$5.\n\
             let m = \"ends at $9 ($4.2)\";\n",
        ),
        (
            "conformance/agents/x.toml",
            "# PROTOCOL.md $1, $9.2: bare $12 outside Rust is no citation\n\
             reason = \"docs/protocol.md $2–$6\"\n",
        ),
        (
            "README.md",
            "See PROTOCOL.md $1.2 and docs/protocol.md $6.5.\n",
        ),
        (
            "scenarios/y.toml",
            "# PROTOCOL.md ($1.1), docs/protocol.md, $6.5.9 and PROTOCOL.md's $13\n",
        ),
    ]
    .map(|(p, t)| (p.to_owned(), s(t)));
    let (bad, total) = unresolved(doc, &files);
    assert_eq!(
        bad,
        [
            "src/a.rs:1: $7.9",
            "src/a.rs:2: $6.6",
            "src/a.rs:4: $9",
            "src/a.rs:4: $4.2",
            "conformance/agents/x.toml:1: $9.2",
            "conformance/agents/x.toml:2: $2",
            "README.md:1: $1.2",
            "scenarios/y.toml:1: $6.5.9",
            "scenarios/y.toml:1: $13",
        ]
        .map(s)
    );
    // $6.5 $7 $7.9 | $6.6 $1.1 | $9 $4.2 | $1 $9.2 | $2 $6 | $1.2 $6.5 | $1.1 $6.5.9 $13
    assert_eq!(total, 16);
}

#[test]
fn headings_take_the_number_before_the_title() {
    let doc =
        "# wirecheck\n## 6. Encoded\n### 6.5 Parsing (both)\n#### Not numbered\n## 10. Tests\n";
    assert_eq!(headings(doc), ["6", "6.5", "10"]);
}
