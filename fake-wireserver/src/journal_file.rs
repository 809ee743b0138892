//! The `--journal` JSON Lines file ([`crate::FakeConfig::journal_file`]): one whole line per
//! final entry, and a failed write is never silent.
//!
//! A write that fails (a full disk, a file size limit, `/dev/full`) is cut back to the last
//! whole line, and nothing more is written: the file then holds every entry made final before
//! the failure, whole, and no entry after it (a file with a hole in it would look complete).
//! From then on each entry is counted as lost. The fake keeps serving; the failure is logged
//! once, in [`crate::JournalStats::file_lost`] and [`crate::Fake::journal_file_error`], on
//! `GET /__admin/stats`, and the binary ends with exit status 3 naming it.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why the `--journal` file misses entries: its first failed write and what it cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error(
    "the journal file {} misses {lost} entr{} (the first at seq {first_seq}): {error}",
    path.display(),
    if *lost == 1 { "y" } else { "ies" }
)]
pub struct JournalFileError {
    /// The file.
    pub path: PathBuf,
    /// The operating system's error of the first failed write.
    pub error: String,
    /// The `seq` of the first entry not in the file.
    pub first_seq: u64,
    /// Entries not in the file.
    pub lost: u64,
}

/// The open file and how far it is whole.
pub(crate) struct JournalFile {
    file: File,
    path: PathBuf,
    /// Bytes of whole lines written: a failed write is cut back to here.
    whole: u64,
    failed: Option<JournalFileError>,
}

impl JournalFile {
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        Ok(JournalFile {
            file: File::create(path)?,
            path: path.to_owned(),
            whole: 0,
            failed: None,
        })
    }

    /// Appends the journal entry `seq` (its `record`) as one line, or counts it as lost after a
    /// failure. The record comes serializable, not as an `Entry`: the file knows lines, not
    /// what the journal keeps in them.
    pub(crate) fn write(&mut self, seq: u64, record: &impl Serialize) {
        if let Some(failed) = self.failed.as_mut() {
            failed.lost += 1;
            // Entries are final in the order their answers end, not by seq: the first lost is
            // the lowest seq, whichever failed first.
            failed.first_seq = failed.first_seq.min(seq);
            return;
        }
        let written = serde_json::to_vec(record)
            .map_err(std::io::Error::other)
            .and_then(|mut line| {
                line.push(b'\n');
                self.file.write_all(&line)?;
                Ok(line.len() as u64)
            });
        match written {
            Ok(len) => self.whole += len,
            Err(e) => {
                // Part of the line may be in: cut it (best effort; a full disk allows it).
                let _ = self.file.set_len(self.whole);
                tracing::error!(
                    "journal file {}: {e}; entry {} and every one final after it are not written to it",
                    self.path.display(),
                    seq
                );
                self.failed = Some(JournalFileError {
                    path: self.path.clone(),
                    error: e.to_string(),
                    first_seq: seq,
                    lost: 1,
                });
            }
        }
    }

    /// Entries not in the file.
    pub(crate) fn lost(&self) -> u64 {
        self.failed.as_ref().map_or(0, |f| f.lost)
    }

    pub(crate) fn error(&self) -> Option<&JournalFileError> {
        self.failed.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal line's shape: its `seq` and a body.
    fn entry(seq: u64) -> (u64, serde_json::Value) {
        (
            seq,
            serde_json::json!({ "seq": seq, "body": "x".repeat(100) }),
        )
    }

    /// Issue 23, "the journal silently loses entries on a full disk": `/dev/full` fails every
    /// write with ENOSPC; each entry is counted, the first failure named.
    #[test]
    fn the_journal_silently_loses_entries_on_a_full_disk_no_more() {
        let mut file = JournalFile::create(Path::new("/dev/full")).unwrap();
        for seq in 1..=3 {
            let (seq, record) = entry(seq);
            file.write(seq, &record);
        }
        assert_eq!(file.lost(), 3);
        let error = file.error().unwrap();
        assert_eq!((error.first_seq, error.lost), (1, 3));
        assert!(error.error.contains("No space left on device"), "{error}");
        // Entries finish out of seq order (a slower answer ends later): the first lost is the
        // lowest seq, not the first written.
        let mut late = JournalFile::create(Path::new("/dev/full")).unwrap();
        for seq in [2, 1, 3] {
            let (seq, record) = entry(seq);
            late.write(seq, &record);
        }
        assert_eq!(late.error().unwrap().first_seq, 1);
        assert_eq!(
            error.to_string(),
            format!(
                "the journal file /dev/full misses 3 entries (the first at seq 1): {}",
                error.error
            )
        );
    }

    /// After a failed write nothing more is written, even when writes would succeed again:
    /// the file keeps the entries before the failure and has no hole (a torn line cut back is
    /// tested on the binary under a file size limit, `tests/binary.rs`).
    #[test]
    fn after_a_failed_write_nothing_more_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut file = JournalFile::create(&path).unwrap();
        file.write(1, &entry(1).1);
        file.write(2, &entry(2).1);
        // The disk "fills": a read-only descriptor in its place makes the next write fail.
        file.file = File::open(&path).unwrap();
        file.write(3, &entry(3).1);
        file.file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write(4, &entry(4).1);
        let text = std::fs::read_to_string(&path).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(seqs, [1, 2]);
        assert_eq!(file.lost(), 2);
    }
}
