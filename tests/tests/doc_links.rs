//! Every relative Markdown link in README.md, ARCHITECTURE.md and docs/*.md leads somewhere: its
//! file is in the repository, and its `#anchor`, when the target is a Markdown page, is one of
//! that page's headings as GitHub names them. Moving a section to another page, or renaming a
//! heading, cannot silently strand a reader.
//!
//! What is read, per page:
//! - inline links and images, `[text](dest)` / `![alt](dest "title")`, also when the text
//!   spans lines, and reference definitions `[name]: dest`;
//! - not inside fenced code blocks or code spans (the examples there are not links);
//! - `http(s)://`, `mailto:` and other schemes are not ours to check.
//!
//! A target counts as existing when it is a file the repository tracks (`git ls-files`; without
//! git, one on disk) or a folder holding one, so a link to a file that was never committed fails
//! here as it would on GitHub. Paths resolve against the linking page's folder and may not leave
//! the repository. Anchors into other kinds of files (`foo.rs#L10`) are not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The pages whose links are checked: the front door, the code map and every page of docs/.
fn pages(root: &Path) -> Vec<String> {
    let mut pages = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The links of a page cannot be this few: README.md alone links every docs page, so a scanner
/// that finds fewer is broken, not the pages clean.
const AT_LEAST: usize = 40;
/// Likewise for links with an anchor into a Markdown page.
const ANCHORS_AT_LEAST: usize = 10;

/// One link as written: the page, its line, its destination.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    page: String,
    line: usize,
    dest: String,
}

/// The page's text with fenced code blocks and code spans blanked out (spaces; newlines kept,
/// so byte offsets still give line numbers).
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<(char, usize)> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        let blank = |line: &str| {
            line.chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' })
                .collect::<String>()
        };
        match fence {
            Some((m, n)) => {
                if marker == Some(m) && run >= n && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
                out.push_str(&blank(line));
            }
            None if run >= 3 => {
                fence = marker.map(|m| (m, run));
                out.push_str(&blank(line));
            }
            None => out.push_str(line),
        }
    }
    blank_code_spans(&out)
}

/// Code spans (`` `x` ``, ``` `` a`b `` ```) replaced by spaces; a backtick run with no closing
/// run of the same length is literal text, as in Markdown.
fn blank_code_spans(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let run_at = |i: usize| bytes[i..].iter().take_while(|b| **b == b'`').count();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else if bytes[j..].starts_with(b"\n\n") {
                break; // a code span does not cross a paragraph
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                // The span becomes `x` so `[`a`](b)` still reads as a link with text.
                for b in &mut out[i..j + n] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
                out[i] = b'x';
                i = j + n;
            }
            None => i += n,
        }
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced")
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// The links a page writes, in order.
fn links(page: &str, text: &str) -> Vec<Link> {
    let prose = prose(text);
    let mut found = Vec::new();
    // Inline links and images: `](` closing a `[` of the same paragraph.
    for (at, _) in prose.match_indices("](") {
        let before = &prose[..at];
        let paragraph_start = before.rfind("\n\n").map_or(0, |p| p + 2);
        // The link's line is its text's first: where its `[` is.
        let Some(open) = before[paragraph_start..].rfind('[') else {
            continue;
        };
        let rest = &prose[at + 2..];
        let Some(end) = rest.find(')') else { continue };
        let inside = rest[..end].trim();
        let dest = match inside.strip_prefix('<') {
            Some(angled) => angled.split('>').next().unwrap_or(""),
            None => inside.split_whitespace().next().unwrap_or(""),
        };
        found.push(Link {
            page: page.to_owned(),
            line: line_of(&prose, paragraph_start + open),
            dest: dest.to_owned(),
        });
    }
    // Reference definitions: `[name]: dest` at the start of a line.
    let mut offset = 0;
    for line in prose.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('[')
            && let Some(close) = rest.find("]:")
            && !rest[..close].is_empty()
            && !rest[..close].contains(']')
        {
            let dest = rest[close + 2..].split_whitespace().next().unwrap_or("");
            found.push(Link {
                page: page.to_owned(),
                line: line_of(&prose, offset),
                dest: dest.trim_matches(['<', '>']).to_owned(),
            });
        }
        offset += line.len();
    }
    found.sort_by_key(|l| l.line);
    found
}

/// Whether a destination points outside the repository (a URL of any scheme).
fn external(dest: &str) -> bool {
    let scheme: String = dest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .collect();
    !scheme.is_empty() && dest[scheme.len()..].starts_with(':')
}

/// The heading anchors of a page, as GitHub makes them: the heading's text (code-span
/// backticks and link targets dropped, emphasis marks removed like other punctuation),
/// lower-cased, every character but letters, digits, `-`, `_` and spaces removed, each space a
/// `-`; a repeated slug gets `-1`, `-2`, ... in order.
fn anchors(text: &str) -> BTreeSet<String> {
    let fenced = prose_fences_only(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in fenced.lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with([' ', '\t']) {
            continue;
        }
        let title = line[hashes..].trim();
        // An ATX heading's closing `#`s are not its text.
        let title = title.trim_end_matches('#').trim_end();
        let slug = slug(&heading_text(title));
        let n = seen.entry(slug.clone()).or_insert(0);
        let anchor = if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        };
        *n += 1;
        out.insert(anchor);
    }
    out
}

/// The page with only its fenced code blocks blanked (headings there are examples).
fn prose_fences_only(text: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match fence {
            Some((m, n)) => {
                if marker == Some(m) && run >= n && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
            }
            None if run >= 3 => fence = marker.map(|m| (m, run)),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// A heading's rendered text: `[text](dest)` as `text`, backticks dropped.
fn heading_text(title: &str) -> String {
    let mut out = String::new();
    let mut rest = title;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        match after.find("](").and_then(|close| {
            after[close + 2..]
                .find(')')
                .map(|end| (close, close + 2 + end))
        }) {
            Some((close, end)) => {
                out.push_str(&rest[..open]);
                out.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.replace('`', "")
}

fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `a/b/../c` → `a/c`, relative to the repository root; `None` when it climbs out of it. A
/// path starting with `/` starts at the repository root (as GitHub reads it), any other at the
/// page's folder.
fn normalize(page: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = if path.starts_with('/') {
        Vec::new()
    } else {
        page.split('/').collect()
    };
    if !path.starts_with('/') {
        parts.pop(); // the page's own name
    }
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// What the checker needs to know about the repository.
trait Tree {
    /// Whether `path` (repository-relative, no trailing `/`; `""` is the root) is a tracked file
    /// or a folder holding one.
    fn exists(&self, path: &str) -> bool;
    /// A Markdown page's text, to read its headings.
    fn read(&self, path: &str) -> Option<String>;
}

/// Every broken link, as `page:line: dest (why)`, and how many links and anchors were checked.
fn broken(pages: &[(String, String)], tree: &dyn Tree) -> (Vec<String>, usize, usize) {
    let mut bad = Vec::new();
    let (mut checked, mut anchored) = (0, 0);
    let mut headings: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    for (page, text) in pages {
        for link in links(page, text) {
            if external(&link.dest) {
                continue;
            }
            checked += 1;
            let mut report = |why: String| {
                bad.push(format!(
                    "{}:{}: {} ({why})",
                    link.page, link.line, link.dest
                ));
            };
            if link.dest.is_empty() {
                report("an empty destination".into());
                continue;
            }
            let (path, anchor) = match link.dest.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.dest.as_str(), None),
            };
            let target = if path.is_empty() {
                link.page.clone()
            } else {
                match normalize(&link.page, path) {
                    Some(t) => t,
                    None => {
                        report("leaves the repository".into());
                        continue;
                    }
                }
            };
            if !tree.exists(&target) {
                report(format!("no file {target} in the repository"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if !target.ends_with(".md") {
                continue;
            }
            anchored += 1;
            let known = headings
                .entry(target.clone())
                .or_insert_with(|| tree.read(&target).map(|t| anchors(&t)));
            match known {
                None => report(format!("cannot read {target}")),
                Some(known) if !known.contains(anchor) => {
                    report(format!("no heading of {target} has the anchor #{anchor}"))
                }
                Some(_) => {}
            }
        }
    }
    (bad, checked, anchored)
}

/// The working tree, with tracked files only where git can say which those are.
struct Repo {
    root: PathBuf,
    /// Tracked files and every folder above one; `None` without git.
    tracked: Option<BTreeSet<String>>,
}

impl Repo {
    fn open(root: PathBuf) -> Repo {
        let listed = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["ls-files", "-z"])
            .output()
            .ok()
            .filter(|o| o.status.success());
        let tracked = listed.map(|out| {
            let mut set = BTreeSet::new();
            set.insert(String::new());
            for path in String::from_utf8_lossy(&out.stdout).split('\0') {
                if path.is_empty() {
                    continue;
                }
                let mut at = path.len();
                set.insert(path.to_owned());
                while let Some(slash) = path[..at].rfind('/') {
                    set.insert(path[..slash].to_owned());
                    at = slash;
                }
            }
            set
        });
        Repo { root, tracked }
    }
}

impl Tree for Repo {
    fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        match &self.tracked {
            Some(tracked) => tracked.contains(path) && self.root.join(path).exists(),
            None => self.root.join(path).exists(),
        }
    }

    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path)).ok()
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

#[test]
fn every_relative_link_of_the_readme_architecture_and_docs_resolves() {
    let root = repo_root();
    let repo = Repo::open(root.clone());
    let pages: Vec<(String, String)> = pages(&root)
        .into_iter()
        .map(|page| {
            let text =
                std::fs::read_to_string(root.join(&page)).unwrap_or_else(|e| panic!("{page}: {e}"));
            (page, text)
        })
        .collect();
    let (bad, checked, anchored) = broken(&pages, &repo);
    assert!(
        bad.is_empty(),
        "{} broken link(s):\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(
        checked >= AT_LEAST && anchored >= ANCHORS_AT_LEAST,
        "found only {checked} relative links ({anchored} with an anchor into a page) in {} pages; \
         expected at least {AT_LEAST} ({ANCHORS_AT_LEAST}): is the scanner broken?",
        pages.len()
    );
}

/// An in-memory repository for the checker's own tests.
struct Memory(BTreeMap<&'static str, &'static str>);

impl Tree for Memory {
    fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        path.is_empty()
            || self.0.contains_key(path)
            || self.0.keys().any(|k| k.starts_with(&format!("{path}/")))
    }

    fn read(&self, path: &str) -> Option<String> {
        self.0.get(path).map(|t| (*t).to_owned())
    }
}

#[test]
fn a_missing_file_a_wrong_anchor_and_an_escape_are_reported_with_page_and_line() {
    let docs_page = "# Running the suite\n\
                     \n\
                     ## Trusting the verdicts\n\
                     \n\
                     ## Results: `results.json`, `junit.xml`\n\
                     \n\
                     ## Trusting the verdicts\n\
                     \n\
                     ```sh\n\
                     # not a heading\n\
                     ```\n";
    let readme = "# wirecheck\n\
                  \n\
                  See [running](docs/running.md), [trust](docs/running.md#trusting-the-verdicts),\n\
                  [the second one](docs/running.md#trusting-the-verdicts-1) and [results][r].\n\
                  [A link whose text\n\
                  spans lines](docs/gone.md) and ![an image](img/logo.png \"title\").\n\
                  [Wrong](docs/running.md#trusting-verdicts), [fenced](docs/running.md#not-a-heading),\n\
                  [out](../outside.md), [self](#wirecheck), [self wrong](#nope), [web](https://example.com/x.md).\n\
                  Code is not a link: `[x](nowhere.md)`, nor is this:\n\
                  \n\
                  ```md\n\
                  [y](nowhere.md)\n\
                  ```\n\
                  \n\
                  [r]: docs/running.md#results-resultsjson-junitxml\n\
                  [code](src/main.rs#L10) and a [folder](docs/) and [`code text`](src/main.rs).\n";
    let tree = Memory(BTreeMap::from([
        ("README.md", readme),
        ("docs/running.md", docs_page),
        ("src/main.rs", "fn main() {}\n"),
    ]));
    let pages = vec![("README.md".to_owned(), readme.to_owned())];
    let (bad, checked, anchored) = broken(&pages, &tree);
    assert_eq!(
        bad,
        [
            "README.md:5: docs/gone.md (no file docs/gone.md in the repository)",
            "README.md:6: img/logo.png (no file img/logo.png in the repository)",
            "README.md:7: docs/running.md#trusting-verdicts (no heading of docs/running.md has the anchor #trusting-verdicts)",
            "README.md:7: docs/running.md#not-a-heading (no heading of docs/running.md has the anchor #not-a-heading)",
            "README.md:8: ../outside.md (leaves the repository)",
            "README.md:8: #nope (no heading of README.md has the anchor #nope)",
        ]
    );
    // running, trust, second, r, gone, image, wrong, fenced, out, self, self wrong, code,
    // folder, code text: the web link is not counted, the code examples are not links.
    assert_eq!(checked, 14);
    assert_eq!(anchored, 7);
}

#[test]
fn a_leading_slash_starts_at_the_repository_root() {
    let page = "[root](/docs/running.md) and [not at the root](/running.md)\n";
    let tree = Memory(BTreeMap::from([
        ("docs/ci.md", page),
        ("docs/running.md", "# Running\n"),
        ("docs/sub/running.md", "# Running\n"),
    ]));
    let pages = vec![("docs/ci.md".to_owned(), page.to_owned())];
    let (bad, checked, _) = broken(&pages, &tree);
    assert_eq!(
        bad,
        ["docs/ci.md:1: /running.md (no file running.md in the repository)"]
    );
    assert_eq!(checked, 2);
}

#[test]
fn anchors_follow_github_slugs() {
    let page = "# Compatibility matrix: real agents under `wirecheck run`\n\
                ## libazureinit 0.1.1 (azure-init's library from crates.io)\n\
                ## Running wirecheck in your agent's CI\n\
                ### `fake-wireserver sandbox`\n\
                ## Threat model (fake-wireserver) ##\n\
                ## See [the oracle](oracle.md) — twice\n\
                ## Trusting the verdicts\n\
                ## Trusting the verdicts\n\
                #not a heading\n";
    let got: Vec<String> = anchors(page).into_iter().collect();
    assert_eq!(
        got,
        [
            "compatibility-matrix-real-agents-under-wirecheck-run",
            "fake-wireserver-sandbox",
            "libazureinit-011-azure-inits-library-from-cratesio",
            "running-wirecheck-in-your-agents-ci",
            "see-the-oracle--twice",
            "threat-model-fake-wireserver",
            "trusting-the-verdicts",
            "trusting-the-verdicts-1",
        ]
    );
}

/// Issue 27: ARCHITECTURE.md stays a bird's-eye view (at most 30 KB: each file's `//!` header
/// holds its own facts), and it and the docs stand on the repository alone (no pointer to the
/// `../shared` notes a clean clone does not have).
#[test]
fn the_architecture_page_stays_short_and_inside_the_repository() {
    let root = repo_root();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert!(
        architecture.len() <= 30_000,
        "ARCHITECTURE.md is {} bytes; the file-level facts belong in the files' `//!` headers",
        architecture.len()
    );
    let mut pages = vec![(root.join("ARCHITECTURE.md"), architecture)];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).unwrap();
            pages.push((path, text));
        }
    }
    for (path, text) in pages {
        assert!(
            !text.contains("../shared"),
            "{} points outside the repository (../shared)",
            path.display()
        );
    }
}
