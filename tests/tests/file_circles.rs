//! No import circle between the files of one crate (issue 27): a file that takes names from
//! another never gives that one a way back, directly or around a ring, so each crate's files
//! stack in floors that can be read bottom up. Read from the source as text: `crate::` and
//! `super::` paths and a parent's paths into the child modules it declares; comments and
//! `#[cfg(test)]` code are left out (a test may use what it tests from anywhere). A child naming
//! items of the module it sits in is not counted: that is a module and its facade (`mod.rs`
//! declares `lag` and calls it, `lag.rs` uses `super::Planned`), not a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use wirecheck_e2e::repo_root;

/// One crate's files: module path (`["runner", "lag"]`) → file, and each file's source with
/// comments and test code cut.
struct Crate {
    files: BTreeMap<Vec<String>, PathBuf>,
    sources: BTreeMap<PathBuf, String>,
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The module path of `file` under `src` (`a/mod.rs` and `a.rs` are both `a`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file: whole-line comments and every `#[cfg(test)]` inline module (its
/// braces counted) dropped; and the files it declares as test-only modules
/// (`#[cfg(test)] mod tests;`).
fn code(text: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            let next = lines.peek().map_or("", |l| l.trim_start());
            if let Some(name) = next
                .strip_prefix("mod ")
                .or(next.strip_prefix("pub(crate) mod "))
            {
                if let Some(file) = name.strip_suffix(';') {
                    test_files.push(file.trim().to_owned());
                    lines.next();
                    continue;
                }
                // Skip the inline module to its closing brace; the code after it is read.
                let mut depth = 0i64;
                for skipped in lines.by_ref() {
                    depth += skipped.matches('{').count() as i64;
                    depth -= skipped.matches('}').count() as i64;
                    if depth <= 0 && skipped.contains('}') {
                        break;
                    }
                }
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, test_files)
}

impl Crate {
    /// The library crate under `src` (or the binary's, when there is no `lib.rs`); `src/bin/`
    /// and a `main.rs` beside a `lib.rs` are crates of their own.
    fn read(src: &Path) -> Crate {
        let has_lib = src.join("lib.rs").exists();
        let mut all = Vec::new();
        collect_rs(src, &mut all);
        let mut files = BTreeMap::new();
        let mut sources = BTreeMap::new();
        let mut test_only = BTreeSet::new();
        for file in all {
            let rel = file.strip_prefix(src).unwrap();
            if rel.starts_with("bin") || (has_lib && rel == Path::new("main.rs")) {
                continue;
            }
            let (text, tests) = code(&std::fs::read_to_string(&file).unwrap());
            let path = module_path(src, &file);
            for t in tests {
                let mut child = path.clone();
                child.push(t);
                test_only.insert(child);
            }
            files.insert(path, file.clone());
            sources.insert(file, text);
        }
        for t in test_only {
            if let Some(file) = files.remove(&t) {
                sources.remove(&file);
            }
        }
        Crate { files, sources }
    }

    /// The file that defines the longest prefix of `path`.
    fn resolve(&self, path: &[String]) -> Option<&PathBuf> {
        (1..=path.len())
            .rev()
            .find_map(|n| self.files.get(&path[..n]))
    }

    /// Whether `file` is the file of `module` or of a module it sits in.
    fn is_ancestor_or_self(&self, file: &PathBuf, module: &[String]) -> bool {
        (0..=module.len()).any(|n| self.files.get(&module[..n]) == Some(file))
    }

    /// file → (file it takes names from → the paths it names there).
    fn edges(&self) -> BTreeMap<&PathBuf, BTreeMap<&PathBuf, BTreeSet<String>>> {
        let mut edges: BTreeMap<_, BTreeMap<_, BTreeSet<String>>> = BTreeMap::new();
        for (module, file) in &self.files {
            let text = &self.sources[file];
            let children = declared_children(text);
            for (base, rest) in paths(text, module, &children) {
                let mut full = base;
                full.extend(rest.iter().cloned());
                // A child naming its parent's items (`super::Session`) while the parent declares
                // and calls it is a module and its facade, not a circle.
                if let Some(target) = self.resolve(&full)
                    && !self.is_ancestor_or_self(target, module)
                {
                    edges
                        .entry(file)
                        .or_default()
                        .entry(target)
                        .or_default()
                        .insert(full.join("::"));
                }
            }
        }
        edges
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_children(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}

/// Every module path the code names: `crate::a::b`, `super::a` (from `module`), `self::a` and
/// `a::b` for a declared child `a`; as (the module it starts from, the segments after it).
fn paths(
    text: &str,
    module: &[String],
    children: &BTreeSet<String>,
) -> Vec<(Vec<String>, Vec<String>)> {
    let mut found = Vec::new();
    let bytes: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident(bytes[i]) || (i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let (segments, braced, end) = segments_at(&bytes, i);
        i = end.max(i + 1);
        let Some(first) = segments.first() else {
            continue;
        };
        let (base, rest): (Vec<String>, &[String]) = match first.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let base = module[..module.len().saturating_sub(ups)].to_vec();
                (base, &segments[ups..])
            }
            "self" => (module.to_vec(), &segments[1..]),
            child if children.contains(child) && segments.len() > 1 => {
                (module.to_vec(), &segments[..])
            }
            _ => continue,
        };
        if braced.is_empty() {
            found.push((base.clone(), rest.to_vec()));
        }
        for group in braced {
            let mut joined = rest.to_vec();
            joined.extend(group);
            found.push((base.clone(), joined));
        }
    }
    found
}

/// The `::`-separated lowercase segments from `start` (a path stops at its first item name
/// that is not a module: a type, a constant), the paths inside a `{...}` group after it, and
/// where it ends.
fn segments_at(chars: &[char], start: usize) -> (Vec<String>, Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut i = start;
    loop {
        let from = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let word: String = chars[from..i].iter().collect();
        if word.is_empty() || word.starts_with(|c: char| c.is_ascii_uppercase()) {
            break;
        }
        segments.push(word);
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            return (
                if segments.len() > 1 {
                    segments
                } else {
                    Vec::new()
                },
                Vec::new(),
                i,
            );
        }
        if chars.get(i) == Some(&'{') {
            let close = matching_brace(chars, i);
            let inner: String = chars[i + 1..close].iter().collect();
            return (segments, group_paths(&inner), close);
        }
    }
    (segments, Vec::new(), i)
}

/// Where the `{` at `open` closes (the end when it does not).
fn matching_brace(chars: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (k, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    chars.len()
}

/// The module paths of a use-group's items (`a::B, c::{d, E}` → `a`, `c::d`, `c`), nested
/// groups flattened; item names (a type, a constant) end a path.
fn group_paths(inner: &str) -> Vec<Vec<String>> {
    let mut items = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[from..]);
    let mut paths = Vec::new();
    for item in items {
        let item = item.trim();
        let (head, nested) = match item.find("::{") {
            Some(k) => (&item[..k], Some(&item[k + 3..item.len().saturating_sub(1)])),
            None => (item, None),
        };
        let prefix: Vec<String> = head
            .split("::")
            .take_while(|w| {
                !w.is_empty() && w.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            })
            .filter(|w| *w != "self")
            .map(str::to_owned)
            .collect();
        match nested {
            Some(rest) => {
                for tail in group_paths(rest) {
                    let mut path = prefix.clone();
                    path.extend(tail);
                    paths.push(path);
                }
            }
            None => paths.push(prefix),
        }
    }
    paths
}

/// The rings of files (strongly connected groups of more than one file).
fn circles<'a>(
    edges: &BTreeMap<&'a PathBuf, BTreeMap<&'a PathBuf, BTreeSet<String>>>,
) -> Vec<Vec<&'a PathBuf>> {
    let nodes: BTreeSet<&PathBuf> = edges
        .iter()
        .flat_map(|(from, to)| std::iter::once(*from).chain(to.keys().copied()))
        .collect();
    let reach = |from: &'a PathBuf| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for next in edges.get(n).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(*next) {
                    stack.push(*next);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&PathBuf, BTreeSet<&PathBuf>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut rings: Vec<Vec<&PathBuf>> = Vec::new();
    for n in &nodes {
        let ring: Vec<&PathBuf> = nodes
            .iter()
            .copied()
            .filter(|m| reaches[n].contains(m) && reaches[m].contains(n))
            .collect();
        if ring.len() > 1 && !rings.contains(&ring) {
            rings.push(ring);
        }
    }
    rings
}

#[test]
fn no_file_of_a_crate_imports_from_a_file_that_imports_from_it() {
    let root = repo_root();
    let mut found = Vec::new();
    let mut crates = 0;
    for (_, dir) in crate::workspace_members::workspace_members() {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let krate = Crate::read(&src);
        let edges = krate.edges();
        for ring in circles(&edges) {
            let mut ties = String::new();
            for from in &ring {
                for (to, names) in edges.get(from).into_iter().flatten() {
                    if ring.contains(to) {
                        let rel = |p: &Path| p.strip_prefix(&root).unwrap().display().to_string();
                        ties += &format!("\n  {} -> {}: {names:?}", rel(from), rel(to));
                    }
                }
            }
            found.push(ties);
        }
    }
    assert!(
        crates >= 10,
        "the crates are found under {}",
        root.display()
    );
    assert!(found.is_empty(), "import circles:{}", found.concat());
}

/// The rings of the crate written under `src`, as paths relative to it.
fn rings_in(src: &Path) -> Vec<Vec<String>> {
    let krate = Crate::read(src);
    circles(&krate.edges())
        .iter()
        .map(|ring| {
            ring.iter()
                .map(|p| p.strip_prefix(src).unwrap().display().to_string())
                .collect()
        })
        .collect()
}

/// The reader sees a circle where there is one: two files naming each other, through
/// `crate::`, `super::` and a parent's path into its child.
#[test]
fn the_reader_sees_a_circle_through_each_kind_of_path() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("runner")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod exec;\npub mod netns;\npub mod runner;\n",
    )
    .unwrap();
    std::fs::write(src.join("exec.rs"), "use crate::netns::NetNs;\n").unwrap();
    std::fs::write(src.join("netns.rs"), "fn f() { crate::exec::probe(); }\n").unwrap();
    std::fs::write(
        src.join("runner/mod.rs"),
        "mod clock;\nmod lag;\nfn g() { lag::watch(); }\n",
    )
    .unwrap();
    // lag names its parent (not counted) and its sibling clock, which names lag back.
    std::fs::write(
        src.join("runner/lag.rs"),
        "use super::{Planned, clock::Tick};\n// crate::exec::nothing\n#[cfg(test)]\nmod tests {\n    use crate::netns::X;\n}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("runner/clock.rs"),
        "fn h() { crate::runner::lag::watch(); }\n",
    )
    .unwrap();
    assert_eq!(
        rings_in(src),
        [
            vec!["exec.rs", "netns.rs"],
            vec!["runner/clock.rs", "runner/lag.rs"]
        ],
    );
}

/// What the reader must not miss: code after a `#[cfg(test)]` module in the middle of a file
/// (the fake's HTTP/1 parser has one), and a path inside a nested use-group.
#[test]
fn code_after_a_test_module_and_nested_groups_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod http1;\nmod journal;\nmod limits;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("http1.rs"),
        "fn a() {}\n#[cfg(test)]\npub(crate) mod scanned {\n    fn inner() { if true { } }\n}\n\nconst KEEP: usize = crate::journal::BODY_KEEP_BYTES;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("journal.rs"),
        "use crate::{limits::{Caps}, http1::{self}};\n",
    )
    .unwrap();
    std::fs::write(
        src.join("limits.rs"),
        "use crate::{journal::{Entry, Kind}};\n",
    )
    .unwrap();
    assert_eq!(rings_in(src), [vec!["http1.rs", "journal.rs", "limits.rs"]],);
}
