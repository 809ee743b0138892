//! The `--out` folder: opened before the private mounts exist (so a path the mounts would hide
//! still reaches the host's folder), written through that handle afterwards.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rustix::fs::{Mode, OFlags};
use serde::Serialize;

use crate::journal::Entry;

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
    pub(crate) wireserver: String,
    pub(crate) imds: String,
    /// Copied pool files, by name.
    pub(crate) pools: Vec<String>,
    pub(crate) journal_entries: usize,
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

    /// Copies every `.kvp_pool_*` file of `dir`; returns the copied names, sorted.
    pub(crate) fn copy_pools(&self, dir: &Path) -> anyhow::Result<Vec<String>> {
        let mut names = Vec::new();
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !name.starts_with(POOL_PREFIX) || !entry.path().is_file() {
                continue;
            }
            let bytes = std::fs::read(entry.path())
                .with_context(|| format!("cannot read {}", entry.path().display()))?;
            self.write(&name, &bytes)?;
            names.push(name);
        }
        names.sort();
        Ok(names)
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

        let dir = OutDir::open(out.path()).unwrap();
        let copied = dir.copy_pools(pools.path()).unwrap();
        assert_eq!(copied, [".kvp_pool_1", ".kvp_pool_3"]);
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
