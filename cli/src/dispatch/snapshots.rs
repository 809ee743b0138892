//! `wirecheck snapshots pending|accept|reject|review DIR`: the pending snapshots a run with
//! `--snapshots DIR` left, with their diffs.

use std::io::IsTerminal as _;
use std::path::Path;

use conformance::snapshot::store;
use wirecheck_results::text::shown;

use crate::cli::SnapshotsCommand;
use crate::console::DIFF_LINE_CHARS;
use crate::status::{EXIT_FAILED, EXIT_OK, say, usage};

/// `wirecheck snapshots`; returns the exit status.
pub fn snapshots(command: SnapshotsCommand) -> u8 {
    let result = match command {
        SnapshotsCommand::Pending { dir } => pending(&dir),
        SnapshotsCommand::Accept { dir, cases } => accept(&dir, &cases),
        SnapshotsCommand::Reject { dir, cases } => reject(&dir, &cases),
        SnapshotsCommand::Review { dir } => review(&dir),
    };
    match result {
        Ok(code) => code,
        Err(e) => usage(e),
    }
}

/// The pending snapshots in `dir` whose names match one of `cases` (all without any).
fn pending_in(dir: &Path, cases: &[String]) -> Result<Vec<store::Found>, String> {
    let globs = cases
        .iter()
        .map(|c| conformance::select::matcher(c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(store::list(dir)?
        .into_iter()
        .filter(|f| f.pending)
        .filter(|f| globs.is_empty() || globs.iter().any(|g| g.is_match(&f.name)))
        .collect())
}

/// A pending snapshot's name and diff.
fn say_diff(f: &store::Found) -> Result<(), String> {
    say(format!(
        "{}\n{}",
        shown(&f.name),
        wirecheck_results::text::shown_lines(&store::pending_diff(f)?, DIFF_LINE_CHARS, usize::MAX)
    ));
    Ok(())
}

/// `wirecheck snapshots pending`: fails while any is pending.
fn pending(dir: &Path) -> Result<u8, String> {
    let pending = pending_in(dir, &[])?;
    for f in &pending {
        say_diff(f)?;
    }
    say(format!(
        "{} pending snapshot(s) in {}",
        pending.len(),
        dir.display()
    ));
    Ok(if pending.is_empty() {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

/// `wirecheck snapshots accept`: every matching pending snapshot, or none.
fn accept(dir: &Path, cases: &[String]) -> Result<u8, String> {
    let pending = pending_in(dir, cases)?;
    // All or none: a corrupt or misplaced one stops the accept before any rename.
    for f in &pending {
        store::check_pending(f)?;
    }
    for f in &pending {
        store::accept(f)?;
        say(format!("accepted {}", shown(&f.name)));
    }
    say(format!("{} snapshot(s) accepted", pending.len()));
    Ok(EXIT_OK)
}

/// `wirecheck snapshots reject`: every matching pending snapshot.
fn reject(dir: &Path, cases: &[String]) -> Result<u8, String> {
    let pending = pending_in(dir, cases)?;
    for f in &pending {
        store::reject(f)?;
        say(format!("rejected {}", shown(&f.name)));
    }
    say(format!("{} snapshot(s) rejected", pending.len()));
    Ok(EXIT_OK)
}

/// `wirecheck snapshots review`: each pending snapshot's diff, then the user's answer.
fn review(dir: &Path) -> Result<u8, String> {
    if !std::io::stdin().is_terminal() {
        return Err("`wirecheck snapshots review` asks on a terminal; without one, use `wirecheck snapshots pending`, `accept` or `reject`".into());
    }
    let pending = pending_in(dir, &[])?;
    let (mut accepted, mut rejected, mut skipped) = (0, 0, 0);
    for f in &pending {
        say_diff(f)?;
        loop {
            conformance::tools::write_stdout("[a]ccept, [r]eject, [s]kip? ");
            let mut answer = String::new();
            if std::io::stdin()
                .read_line(&mut answer)
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err("the terminal closed before every snapshot was reviewed".into());
            }
            match answer.trim() {
                "a" | "accept" => {
                    store::accept(f)?;
                    accepted += 1;
                    break;
                }
                "r" | "reject" => {
                    store::reject(f)?;
                    rejected += 1;
                    break;
                }
                "s" | "skip" => {
                    skipped += 1;
                    break;
                }
                _ => continue,
            }
        }
    }
    say(format!(
        "{accepted} accepted, {rejected} rejected, {skipped} skipped"
    ));
    Ok(EXIT_OK)
}
