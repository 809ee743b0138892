//! Snapshot files: `DIR/<agent>/<scenario id>.snap`, with the pending `.snap.new` beside them
//! (insta's conventions). A file is a header between `---` lines, then the transcript:
//!
//! ```text
//! ---
//! format: 1
//! agent: provision-report
//! scenario: wire.health.xml.ready
//! wirecheck: 0.1.0
//! ---
//! run 1 (ready):
//!   ...
//! ```
//!
//! Only the format and the transcript are compared: a snapshot written by another wirecheck
//! version matches as long as the format is the same. Links inside the folder (an agent's
//! folder, a snapshot file) are refused, never followed. A transcript's shape changes only with
//! [`FORMAT`], and a snapshot of another format is reported as such, not as a wall of diffs.

use std::path::{Path, PathBuf};

/// The version of the transcript's shape. Bump it whenever the normalizer changes what a
/// transcript of the same behaviour says.
pub const FORMAT: u32 = 1;

pub const EXTENSION: &str = "snap";
pub const PENDING_EXTENSION: &str = "snap.new";

/// A snapshot file's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub format: u32,
    pub agent: String,
    pub scenario: String,
    pub wirecheck: String,
    pub transcript: String,
}

impl Snapshot {
    pub fn new(agent: &str, scenario: &str, transcript: String) -> Snapshot {
        Snapshot {
            format: FORMAT,
            agent: agent.to_owned(),
            scenario: scenario.to_owned(),
            wirecheck: env!("CARGO_PKG_VERSION").to_owned(),
            transcript,
        }
    }

    /// This snapshot, when its header names the agent and scenario its place in the folder
    /// says (a file copied from elsewhere does not stand in for another).
    fn expect_to_be(self, path: &Path, place: &Snapshot) -> Result<Snapshot, String> {
        if self.agent != place.agent || self.scenario != place.scenario {
            return Err(format!(
                "{}: its header names agent {:?} and scenario {:?}, but the file is {:?}'s snapshot of {:?}",
                path.display(),
                self.agent,
                self.scenario,
                place.agent,
                place.scenario
            ));
        }
        Ok(self)
    }

    pub fn render(&self) -> String {
        format!(
            "---\nformat: {}\nagent: {}\nscenario: {}\nwirecheck: {}\n---\n{}",
            self.format, self.agent, self.scenario, self.wirecheck, self.transcript
        )
    }

    /// Parses a snapshot file; errors name the file and line.
    pub fn parse(path: &Path, text: &str) -> Result<Snapshot, String> {
        let at = |line: usize, what: String| format!("{}:{line}: {what}", path.display());
        if let Some(cr) = text.find('\r') {
            let line = text[..cr].matches('\n').count() + 1;
            return Err(at(
                line,
                "a carriage return: snapshots are LF text (a checkout with CRLF line endings? see .gitattributes)".into(),
            ));
        }
        let mut lines = text.split_inclusive('\n');
        if lines.next().map(str::trim_end) != Some("---") {
            return Err(at(
                1,
                "not a wirecheck snapshot: expected `---` on the first line".into(),
            ));
        }
        let (mut format, mut agent, mut scenario, mut wirecheck) = (None, None, None, None);
        let mut consumed = "---\n".len();
        let mut line_no = 1;
        loop {
            line_no += 1;
            let Some(line) = lines.next() else {
                return Err(at(line_no, "the header has no closing `---`".into()));
            };
            consumed += line.len();
            let line = line.trim_end_matches(['\n', '\r']);
            if line == "---" {
                break;
            }
            let Some((key, value)) = line.split_once(": ") else {
                return Err(at(
                    line_no,
                    format!(
                        "expected `key: value` in the header, got {:?}",
                        crate::tools::text::clip(line, 60)
                    ),
                ));
            };
            let slot = match key {
                "format" => &mut format,
                "agent" => &mut agent,
                "scenario" => &mut scenario,
                "wirecheck" => &mut wirecheck,
                other => {
                    return Err(at(
                        line_no,
                        format!(
                            "unknown header field {:?} (expected format, agent, scenario, wirecheck)",
                            crate::tools::text::clip(other, 40)
                        ),
                    ));
                }
            };
            if slot.replace(value.to_owned()).is_some() {
                return Err(at(line_no, format!("header field {key:?} given twice")));
            }
        }
        let need = |v: Option<String>, key: &str| {
            v.ok_or_else(|| at(1, format!("the header has no {key:?} field")))
        };
        let format_text = need(format, "format")?;
        let format = format_text
            .parse::<u32>()
            .map_err(|_| at(2, format!("format: expected a number, got {format_text:?}")))?;
        Ok(Snapshot {
            format,
            agent: need(agent, "agent")?,
            scenario: need(scenario, "scenario")?,
            wirecheck: need(wirecheck, "wirecheck")?,
            transcript: text[consumed.min(text.len())..].to_owned(),
        })
    }
}

/// `DIR/<agent>/<scenario>.snap`.
pub fn path(dir: &Path, agent: &str, scenario: &str) -> PathBuf {
    dir.join(agent).join(format!("{scenario}.{EXTENSION}"))
}

/// An error when `path` (an agent's folder or a snapshot file inside the snapshots folder) is
/// a symbolic link: it would have wirecheck read, rename, remove or write files outside the
/// folder (a link committed to a repository says where). The folder given is used as is.
fn refuse_link(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "{}: is a symbolic link; wirecheck does not follow links inside a snapshots folder (it would read, accept, reject or write snapshots elsewhere): replace it with a folder or file of its own",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// The pending file beside `snap`.
pub fn pending_path(snap: &Path) -> PathBuf {
    let mut name = snap.file_name().unwrap_or_default().to_os_string();
    name.push(".new");
    snap.with_file_name(name)
}

/// How a transcript compared with its snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Matches,
    /// No snapshot yet: the transcript was written as pending.
    New {
        pending: PathBuf,
    },
    /// A unified diff, old → new; the transcript was written as pending.
    Differs {
        diff: String,
        /// The accepted transcript (what the diff is from).
        accepted: String,
        pending: PathBuf,
    },
    /// The snapshot is of another format: not compared; the transcript was written as pending.
    OtherFormat {
        format: u32,
        pending: PathBuf,
    },
}

/// Compares `snapshot` with what `dir` holds for it, writing a pending file unless it
/// matches (and removing a stale pending one when it does).
pub fn compare(dir: &Path, snapshot: &Snapshot) -> Result<Outcome, String> {
    // Names become path components: never one that leaves the folder.
    for name in [&snapshot.agent, &snapshot.scenario] {
        if name.is_empty() || name.starts_with('.') || name.contains('/') {
            return Err(format!("{name:?} cannot name a snapshot file"));
        }
    }
    let snap = path(dir, &snapshot.agent, &snapshot.scenario);
    let pending = pending_path(&snap);
    refuse_link(&dir.join(&snapshot.agent))?;
    let old = match read(&snap) {
        Ok(text) => Some(Snapshot::parse(&snap, &text)?.expect_to_be(&snap, snapshot)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", snap.display())),
    };
    let outcome = match &old {
        Some(old) if old.format == snapshot.format && old.transcript == snapshot.transcript => {
            match std::fs::remove_file(&pending) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: {e}", pending.display())),
            }
            return Ok(Outcome::Matches);
        }
        Some(old) if old.format != snapshot.format => Outcome::OtherFormat {
            format: old.format,
            pending: pending.clone(),
        },
        Some(old) => Outcome::Differs {
            diff: diff(&old.transcript, &snapshot.transcript, &snap),
            accepted: old.transcript.clone(),
            pending: pending.clone(),
        },
        None => Outcome::New {
            pending: pending.clone(),
        },
    };
    write_atomically(&pending, &snapshot.render())?;
    Ok(outcome)
}

/// Largest snapshot file read: 4 MiB (a transcript is a few KiB).
pub const MAX_SNAPSHOT_BYTES: u64 = 4 << 20;

/// A snapshot file: a regular file of at most [`MAX_SNAPSHOT_BYTES`].
fn read(path: &Path) -> std::io::Result<String> {
    fake_wireserver::files::read_regular_text(path, MAX_SNAPSHOT_BYTES)
}

/// A unified diff of two transcripts.
pub fn diff(old: &str, new: &str, snap: &Path) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{} (accepted)", snap.display()),
            &format!("{} (this run)", snap.display()),
        )
        .to_string()
}

fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

/// Checks, before any case runs, that `dir` is (or can be made) a folder wirecheck can write.
pub fn prepare(dir: &Path) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("--snapshots {}: not a folder", dir.display()));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("--snapshots {}: cannot create it: {e}", dir.display()))?;
    tempfile::NamedTempFile::new_in(dir)
        .map(drop)
        .map_err(|e| format!("--snapshots {}: cannot write in it: {e}", dir.display()))
}

/// A snapshot file found in a snapshots folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub agent: String,
    pub scenario: String,
    /// `<agent>/<scenario>`: what `--cases` globs match.
    pub name: String,
    pub snap: PathBuf,
    pub pending: bool,
}

/// Every `.snap` and `.snap.new` of `dir`, sorted.
pub fn list(dir: &Path) -> Result<Vec<Found>, String> {
    let mut found = Vec::new();
    let agents = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for agent in agents.flatten() {
        // A link to a file is not an agent's folder (skipped, as any file); to a folder, refused.
        if !agent.path().is_dir() {
            continue;
        }
        refuse_link(&agent.path())?;
        let agent_name = agent.file_name().to_string_lossy().into_owned();
        for file in std::fs::read_dir(agent.path())
            .map_err(|e| format!("{}: {e}", agent.path().display()))?
            .flatten()
        {
            let name = file.file_name().to_string_lossy().into_owned();
            let (scenario, pending) =
                if let Some(s) = name.strip_suffix(&format!(".{PENDING_EXTENSION}")) {
                    (s.to_owned(), true)
                } else if let Some(s) = name.strip_suffix(&format!(".{EXTENSION}")) {
                    (s.to_owned(), false)
                } else {
                    continue;
                };
            refuse_link(&file.path())?;
            found.push(Found {
                name: format!("{agent_name}/{scenario}"),
                snap: path(dir, &agent_name, &scenario),
                agent: agent_name.clone(),
                scenario,
                pending,
            });
        }
    }
    found.sort_by(|a, b| (&a.name, a.pending).cmp(&(&b.name, b.pending)));
    Ok(found)
}

/// Makes a pending snapshot the accepted one.
pub fn accept(found: &Found) -> Result<(), String> {
    check_pending(found)?;
    let pending = pending_path(&found.snap);
    std::fs::rename(&pending, &found.snap).map_err(|e| format!("{}: {e}", found.snap.display()))
}

/// Checks that a pending snapshot can be accepted: it parses and is of its place.
pub fn check_pending(found: &Found) -> Result<(), String> {
    let pending = pending_path(&found.snap);
    let text = read(&pending).map_err(|e| format!("{}: {e}", pending.display()))?;
    let place = Snapshot::new(&found.agent, &found.scenario, String::new());
    Snapshot::parse(&pending, &text)?.expect_to_be(&pending, &place)?;
    Ok(())
}

/// Drops a pending snapshot.
pub fn reject(found: &Found) -> Result<(), String> {
    let pending = pending_path(&found.snap);
    std::fs::remove_file(&pending).map_err(|e| format!("{}: {e}", pending.display()))
}

/// The diff a pending snapshot would make (or its whole text, when there is no accepted one).
pub fn pending_diff(found: &Found) -> Result<String, String> {
    let pending = pending_path(&found.snap);
    let new = read(&pending).map_err(|e| format!("{}: {e}", pending.display()))?;
    let new = Snapshot::parse(&pending, &new)?;
    match read(&found.snap) {
        Ok(old) => {
            let old = Snapshot::parse(&found.snap, &old)?;
            if old.format != new.format {
                return Ok(format!(
                    "format {} → {}: the normalizer changed; review the new snapshot whole\n{}",
                    old.format, new.format, new.transcript
                ));
            }
            Ok(diff(&old.transcript, &new.transcript, &found.snap))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(format!("new snapshot:\n{}", new.transcript))
        }
        Err(e) => Err(format!("{}: {e}", found.snap.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_survives_its_own_file() {
        let s = Snapshot::new(
            "agent",
            "wire.x",
            "run 1 (ready):\n  exit: status 0\n".into(),
        );
        assert_eq!(
            Snapshot::parse(Path::new("f.snap"), &s.render()).unwrap(),
            s
        );
    }

    #[test]
    fn crlf_and_a_snapshot_of_another_place_are_refused() {
        let s = Snapshot::new("a", "x", "run 1:\n  exit: status 0\n".into());
        let crlf = s.render().replace('\n', "\r\n");
        let e = Snapshot::parse(Path::new("a/x.snap"), &crlf).unwrap_err();
        assert!(e.starts_with("a/x.snap:1: a carriage return"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let other = Snapshot::new("b", "y", s.transcript.clone());
        std::fs::write(path(dir.path(), "a", "x"), other.render()).unwrap();
        let e = compare(dir.path(), &s).unwrap_err();
        assert!(e.contains("its header names agent \"b\""), "{e}");
    }

    #[test]
    fn no_name_leads_out_of_the_snapshots_folder() {
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("snaps");
        for (agent, scenario) in [("..", "x"), ("a", ".."), ("a/b", "x"), ("", "x")] {
            let s = Snapshot::new(agent, scenario, "t\n".into());
            assert!(compare(&inside, &s).is_err(), "{agent:?}/{scenario:?}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_corrupt_or_foreign_file_names_the_file_and_line() {
        let p = Path::new("dir/a/x.snap");
        let e = Snapshot::parse(p, "hello\n").unwrap_err();
        assert!(
            e.starts_with("dir/a/x.snap:1: not a wirecheck snapshot"),
            "{e}"
        );
        let e = Snapshot::parse(p, "---\nformat: 1\nagent: a\ncolour: red\n---\n").unwrap_err();
        assert!(
            e.starts_with("dir/a/x.snap:4: unknown header field \"colour\""),
            "{e}"
        );
        let e = Snapshot::parse(
            p,
            "---\nformat: one\nagent: a\nscenario: x\nwirecheck: 1\n---\n",
        )
        .unwrap_err();
        assert!(e.contains(":2: format: expected a number"), "{e}");
        let e = Snapshot::parse(p, "---\nformat: 1\n").unwrap_err();
        assert!(e.contains(":3: the header has no closing"), "{e}");
    }
}
