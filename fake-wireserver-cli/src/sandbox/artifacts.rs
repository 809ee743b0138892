//! The `--out` folder: opened before the private mounts exist (so a path the mounts would hide
//! still reaches the host's folder), written through that handle afterwards.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rustix::fs::{Mode, OFlags};
use serde::Serialize;

use fake_wireserver::guest::GUEST_CALLS_FILE;
use fake_wireserver::journal::Entry;

/// Prefix of the KVP pool files copied from `/var/lib/hyperv`.
pub(crate) const POOL_PREFIX: &str = ".kvp_pool_";
/// Name of the run summary written next to the journal.
pub(crate) const SUMMARY_FILE: &str = "sandbox.json";

pub(crate) struct OutDir {
    dir: OwnedFd,
    path: PathBuf,
}

/// What `sandbox.json` records about the run.
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    pub(crate) command: Vec<String>,
    /// The sandbox's exit status (COMMAND's, or 124/126/127 as documented).
    pub(crate) exit_status: i32,
    /// Set when COMMAND was ended by a signal.
    pub(crate) signal: Option<i32>,
    pub(crate) timed_out: bool,
    /// `--stop-after-report` ended COMMAND after its terminal report (not a failure).
    pub(crate) stopped_when_done: bool,
    /// `--time-scale` (1: the wall clock): the times here and in the journal are agent time.
    pub(crate) time_scale: u32,
    /// When COMMAND was started and when it exited, on the fake's clock (ms, as the journal's
    /// `at_ms`); absent when it could not be started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent_started_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent_exited_ms: Option<u64>,
    pub(crate) wireserver: String,
    pub(crate) imds: String,
    /// The hosts `--refuse` left unserved (`wireserver`, `imds`), and their addresses: on
    /// `lo`, with no listener.
    pub(crate) refused: Vec<String>,
    pub(crate) refused_addresses: Vec<String>,
    /// Copied pool files, by name.
    pub(crate) pools: Vec<String>,
    /// Pool files left behind, and why (a link, not a regular file, over [`POOL_COPY_MAX`](fake_wireserver::sandbox::POOL_COPY_MAX)).
    pub(crate) pools_not_copied: Vec<NotCopied>,
    /// Lines in `journal.jsonl`.
    pub(crate) journal_entries: usize,
    /// Requests the journal's memory window dropped (oldest first) before it was written: not
    /// in `journal.jsonl`, so the journal is not whole.
    pub(crate) journal_evicted: u64,
    /// With `--refuse`: COMMAND's connection attempts to a refused host, in order, when each
    /// SYN arrived on the fake's clock ([`super::refused`]); none were made without one.
    pub(crate) refused_attempts: Vec<super::refused::RefusedAttempt>,
    /// Attempts the list lacks (the watcher's socket dropped them, or past its cap): a list
    /// with any lost is not the whole loop.
    pub(crate) refused_attempts_lost: u64,
    /// With `--guest`: the calls its stand-in tools recorded (lines of `guest-calls.jsonl`),
    /// or why the record was not copied.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(crate) guest_calls: Option<GuestCalls>,
    /// With `--guest`: the users its `/etc/passwd` has after the run that the host's had not
    /// (absent when it could not be read: not a bounded regular file any more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) guest_users: Option<Vec<String>>,
}

/// What became of the guest's call record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) enum GuestCalls {
    #[serde(rename = "guest_calls")]
    Copied(usize),
    #[serde(rename = "guest_calls_not_copied")]
    NotCopied(String),
}

/// A `.kvp_pool_*` entry the agent left that was not copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct NotCopied {
    pub(crate) name: String,
    pub(crate) why: String,
}

/// What [`OutDir::copy_pools`] did, by name (sorted).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct CopiedPools {
    pub(crate) copied: Vec<String>,
    pub(crate) not_copied: Vec<NotCopied>,
}

/// A file the agent may have made anything (a pool, the guest's call record): read only if it is a regular file (not
/// followed if a link, a FIFO cannot block the open), at most `cap` bytes, checked before
/// reading (a sparse pool's size costs nothing to fake) and while reading (it may grow).
pub(crate) fn read_agent_file(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => return Err("is a symbolic link (not followed)".into()),
        Err(e) => return Err(format!("cannot be opened: {e}")),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| format!("cannot be examined: {e}"))?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err("is not a regular file (a folder, FIFO, socket or device)".into());
    }
    let too_big = || format!("is larger than {cap} bytes");
    if stat.st_size as u64 > cap {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    File::from(fd)
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(too_big());
    }
    Ok(bytes)
}

impl OutDir {
    pub(crate) fn open(path: &Path) -> anyhow::Result<Self> {
        let dir = rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("--out {}: cannot open the folder", path.display()))?;
        Ok(OutDir {
            dir,
            path: path.to_owned(),
        })
    }

    /// Writes a whole file: to a temporary name first, renamed into place when complete.
    pub(crate) fn write(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let partial = format!(".{name}.partial");
        let fd = rustix::fs::openat(
            &self.dir,
            partial.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .with_context(|| format!("cannot create {}", self.path.join(&partial).display()))?;
        let mut file = File::from(fd);
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", self.path.join(&partial).display()))?;
        rustix::fs::renameat(&self.dir, partial.as_str(), &self.dir, name)
            .with_context(|| format!("cannot write {}", self.path.join(name).display()))?;
        Ok(())
    }

    /// The journal as JSON Lines, one entry per line in `seq` order.
    pub(crate) fn write_journal(&self, name: &str, entries: &[Entry]) -> anyhow::Result<()> {
        let mut bytes = Vec::new();
        for entry in entries {
            serde_json::to_writer(&mut bytes, entry).context("cannot serialise the journal")?;
            bytes.push(b'\n');
        }
        self.write(name, &bytes)
    }

    /// Copies every `.kvp_pool_*` regular file of `dir` of at most `cap` bytes; the others
    /// (links, folders, FIFOs, devices, larger files) are listed with the reason.
    pub(crate) fn copy_pools(&self, dir: &Path, cap: u64) -> anyhow::Result<CopiedPools> {
        let mut result = CopiedPools::default();
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !name.starts_with(POOL_PREFIX) {
                continue;
            }
            match read_agent_file(&entry.path(), cap) {
                Ok(bytes) => {
                    self.write(&name, &bytes)?;
                    result.copied.push(name);
                }
                Err(why) => result.not_copied.push(NotCopied { name, why }),
            }
        }
        result.copied.sort();
        result.not_copied.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(result)
    }

    /// The guest's call record, copied as [`GUEST_CALLS_FILE`] when it is a regular file of
    /// at most `cap` bytes (the agent could have replaced it).
    pub(crate) fn copy_guest_calls(&self, path: &Path, cap: u64) -> anyhow::Result<GuestCalls> {
        match read_agent_file(path, cap) {
            Ok(bytes) => {
                self.write(GUEST_CALLS_FILE, &bytes)?;
                let lines = bytes.iter().filter(|b| **b == b'\n').count();
                Ok(GuestCalls::Copied(lines))
            }
            Err(why) => Ok(GuestCalls::NotCopied(format!("{} {why}", path.display()))),
        }
    }

    pub(crate) fn write_summary(&self, summary: &Summary) -> anyhow::Result<()> {
        let mut bytes =
            serde_json::to_vec_pretty(summary).context("cannot serialise the summary")?;
        bytes.push(b'\n');
        self.write(SUMMARY_FILE, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_out_dir_writes_whole_files_and_copies_only_pools() {
        let out = tempfile::tempdir().unwrap();
        let pools = tempfile::tempdir().unwrap();
        std::fs::write(pools.path().join(".kvp_pool_1"), [1u8; 2560]).unwrap();
        std::fs::write(pools.path().join(".kvp_pool_3"), b"").unwrap();
        std::fs::write(pools.path().join("other"), b"x").unwrap();

        // Not copied: a link (not followed), a folder, a FIFO, one byte over the cap.
        std::os::unix::fs::symlink("/etc/passwd", pools.path().join(".kvp_pool_4")).unwrap();
        std::fs::create_dir(pools.path().join(".kvp_pool_5")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            pools.path().join(".kvp_pool_6"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        std::fs::write(pools.path().join(".kvp_pool_7"), [0u8; 2561]).unwrap();

        let dir = OutDir::open(out.path()).unwrap();
        let result = dir.copy_pools(pools.path(), 2560).unwrap();
        assert_eq!(result.copied, [".kvp_pool_1", ".kvp_pool_3"]);
        let not: Vec<(&str, &str)> = result
            .not_copied
            .iter()
            .map(|n| (n.name.as_str(), n.why.as_str()))
            .collect();
        assert_eq!(
            not,
            [
                (".kvp_pool_4", "is a symbolic link (not followed)"),
                (
                    ".kvp_pool_5",
                    "is not a regular file (a folder, FIFO, socket or device)"
                ),
                (
                    ".kvp_pool_6",
                    "is not a regular file (a folder, FIFO, socket or device)"
                ),
                (".kvp_pool_7", "is larger than 2560 bytes"),
            ]
        );
        for name in [".kvp_pool_4", ".kvp_pool_5", ".kvp_pool_6", ".kvp_pool_7"] {
            assert!(!out.path().join(name).exists(), "{name} copied");
        }
        assert_eq!(
            std::fs::read(out.path().join(".kvp_pool_1")).unwrap(),
            [1u8; 2560]
        );
        assert!(!out.path().join("other").exists());
        dir.write_journal("journal.jsonl", &[]).unwrap();
        assert_eq!(
            std::fs::read(out.path().join("journal.jsonl")).unwrap(),
            b""
        );
        let leftovers: Vec<_> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".partial"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
