//! The guest KVP pool file writer (PROTOCOL.md §7.4).
//!
//! * Opened with `O_NOFOLLOW`: a symlink at the pool path is refused, never followed.
//! * Created `0644` (whatever the umask) in a `0755` directory, as hv_kvp_daemon expects.
//! * Every change holds a whole-file `fcntl` write lock (what hv_kvp_daemon takes) **and**
//!   `flock` (what cloud-init and azure-init take): on Linux the two do not exclude each other.
//! * A key is upserted: one record, replaced in place, duplicates from earlier appends dropped.

use std::fs::{File, Permissions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use thiserror::Error;

use super::record::{RECORD_SIZE, RecordError, encode_record, raw_key};

/// Mode of a pool file the reporter creates.
pub const POOL_FILE_MODE: u32 = 0o644;
/// Mode of a pool directory the reporter creates.
pub const POOL_DIR_MODE: u32 = 0o755;

/// Why the pool could not be opened or written.
#[derive(Debug, Error)]
pub enum PoolError {
    #[error("{}: is a symbolic link; the KVP pool is opened without following links", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: is a directory; expected a KVP pool file", path.display())]
    Directory { path: PathBuf },
    #[error("{}: is not a regular file; expected a KVP pool file", path.display())]
    NotRegularFile { path: PathBuf },
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{}: {source}", path.display())]
    Record {
        path: PathBuf,
        #[source]
        source: RecordError,
    },
}

impl PoolError {
    /// Errors caused by what the user pointed the reporter at, rather than by the system.
    pub fn is_bad_path(&self) -> bool {
        matches!(
            self,
            PoolError::Symlink { .. }
                | PoolError::Directory { .. }
                | PoolError::NotRegularFile { .. }
        )
    }
}

/// An open KVP pool file.
#[derive(Debug)]
pub struct KvpPool {
    file: File,
    path: PathBuf,
}

/// Where an upsert put the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upserted {
    /// Record index in the file.
    pub index: usize,
    /// Earlier records with the same key that were replaced (0 for a fresh key).
    pub replaced: usize,
}

impl KvpPool {
    /// Opens (creating if needed) the pool file at `path`, refusing symlinks, directories and
    /// anything that is not a regular file. Missing parent directories are created `0755`.
    pub fn open(path: &Path) -> Result<KvpPool, PoolError> {
        let io_err = |action, source| PoolError::Io {
            path: path.to_owned(),
            action,
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_dirs(parent).map_err(|e| io_err("create its directory", e))?;
        }
        let base = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let map_open = |e: rustix::io::Errno| match e {
            rustix::io::Errno::LOOP => PoolError::Symlink {
                path: path.to_owned(),
            },
            rustix::io::Errno::ISDIR => PoolError::Directory {
                path: path.to_owned(),
            },
            other => io_err("open", other.into()),
        };
        let (fd, created) = match rustix::fs::open(
            path,
            base | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(POOL_FILE_MODE),
        ) {
            Ok(fd) => (fd, true),
            Err(rustix::io::Errno::EXIST) => (
                rustix::fs::open(path, base, Mode::empty()).map_err(map_open)?,
                false,
            ),
            Err(e) => return Err(map_open(e)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| io_err("stat", e.into()))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => {
                return Err(PoolError::Directory {
                    path: path.to_owned(),
                });
            }
            _ => {
                return Err(PoolError::NotRegularFile {
                    path: path.to_owned(),
                });
            }
        }
        if created {
            // The umask may have taken bits away; the host daemon expects 0644.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(POOL_FILE_MODE))
                .map_err(|e| io_err("set the mode of", e.into()))?;
        }
        Ok(KvpPool {
            file: File::from(fd),
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `key = value` as the only record with that key. The value is cut to what the
    /// host reads (see [`super::record::encode_record`]).
    pub fn upsert(&self, key: &str, value: &str) -> Result<Upserted, PoolError> {
        let record = encode_record(key, value).map_err(|source| PoolError::Record {
            path: self.path.clone(),
            source,
        })?;
        let _lock = self.lock()?;
        let contents = self.read_all()?;
        let whole = contents.len() / RECORD_SIZE;
        let ragged_tail = contents.len() % RECORD_SIZE != 0;
        let matches: Vec<usize> = (0..whole)
            .filter(|&i| raw_key(&contents[i * RECORD_SIZE..]) == key.as_bytes())
            .collect();
        if ragged_tail {
            tracing::warn!(
                pool = %self.path.display(),
                size = contents.len(),
                "KVP pool size is not a multiple of {RECORD_SIZE}; dropping the partial record at the end"
            );
        }
        match matches.as_slice() {
            [] => {
                // A new key: one whole record in one write, over any partial tail.
                self.write_at(&record, (whole * RECORD_SIZE) as u64)?;
                if ragged_tail {
                    self.truncate(((whole + 1) * RECORD_SIZE) as u64)?;
                }
                Ok(Upserted {
                    index: whole,
                    replaced: 0,
                })
            }
            [only] if !ragged_tail => {
                self.write_at(&record, (only * RECORD_SIZE) as u64)?;
                Ok(Upserted {
                    index: *only,
                    replaced: 1,
                })
            }
            [first, ..] => {
                // Duplicates (appended by earlier runs or other writers): rewrite the file with
                // ours in place of the first and the others dropped.
                let mut rewritten = Vec::with_capacity(contents.len());
                for i in 0..whole {
                    if i == *first {
                        rewritten.extend_from_slice(&record);
                    } else if !matches.contains(&i) {
                        rewritten
                            .extend_from_slice(&contents[i * RECORD_SIZE..(i + 1) * RECORD_SIZE]);
                    }
                }
                self.write_at(&rewritten, 0)?;
                self.truncate(rewritten.len() as u64)?;
                Ok(Upserted {
                    index: *first,
                    replaced: matches.len(),
                })
            }
        }
    }

    /// Empties the pool when it was last modified before `boot_time`, as cloud-init and
    /// azure-init do with pools left over from an earlier boot. Returns whether it did.
    pub fn truncate_if_stale(&self, boot_time: SystemTime) -> Result<bool, PoolError> {
        let _lock = self.lock()?;
        let modified = self
            .file
            .metadata()
            .and_then(|m| m.modified())
            .map_err(|e| self.io_err("stat", e))?;
        if modified < boot_time {
            self.truncate(0)?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn lock(&self) -> Result<PoolLock<'_>, PoolError> {
        let fd = self.file.as_fd();
        retry_eintr(|| rustix::fs::flock(fd, FlockOperation::LockExclusive))
            .map_err(|e| self.io_err("flock", e.into()))?;
        if let Err(e) = retry_eintr(|| rustix::fs::fcntl_lock(fd, FlockOperation::LockExclusive)) {
            let _ = rustix::fs::flock(fd, FlockOperation::Unlock);
            return Err(self.io_err("take the fcntl write lock on", e.into()));
        }
        Ok(PoolLock { fd })
    }

    fn read_all(&self) -> Result<Vec<u8>, PoolError> {
        let len = self
            .file
            .metadata()
            .map_err(|e| self.io_err("stat", e))?
            .len() as usize;
        let mut contents = vec![0u8; len];
        self.file
            .read_exact_at(&mut contents, 0)
            .map_err(|e| self.io_err("read", e))?;
        Ok(contents)
    }

    fn write_at(&self, bytes: &[u8], offset: u64) -> Result<(), PoolError> {
        self.file
            .write_all_at(bytes, offset)
            .map_err(|e| self.io_err("write", e))
    }

    fn truncate(&self, len: u64) -> Result<(), PoolError> {
        self.file
            .set_len(len)
            .map_err(|e| self.io_err("truncate", e))
    }

    fn io_err(&self, action: &'static str, source: io::Error) -> PoolError {
        PoolError::Io {
            path: self.path.clone(),
            action,
            source,
        }
    }
}

/// Both locks, released (fcntl first, then flock) when dropped.
struct PoolLock<'a> {
    fd: BorrowedFd<'a>,
}

impl Drop for PoolLock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::fcntl_lock(self.fd, FlockOperation::Unlock);
        let _ = rustix::fs::flock(self.fd, FlockOperation::Unlock);
    }
}

fn retry_eintr<T>(mut op: impl FnMut() -> rustix::io::Result<T>) -> rustix::io::Result<T> {
    loop {
        match op() {
            Err(rustix::io::Errno::INTR) => continue,
            other => return other,
        }
    }
}

/// Creates the missing directories of `dir`, each `0755` regardless of the umask.
fn create_dirs(dir: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err())
        .collect();
    for path in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(POOL_DIR_MODE).create(path) {
            Ok(()) => std::fs::set_permissions(path, Permissions::from_mode(POOL_DIR_MODE))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// When the system booted: now minus `/proc/uptime`.
pub fn boot_time() -> io::Result<SystemTime> {
    let uptime = std::fs::read_to_string("/proc/uptime")?;
    let seconds: f64 = uptime
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable /proc/uptime"))?;
    let uptime = Duration::try_from_secs_f64(seconds)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    SystemTime::now()
        .checked_sub(uptime)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "uptime exceeds the clock"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvp::record::decode_record;

    fn records(path: &Path) -> Vec<(String, String)> {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(bytes.len() % RECORD_SIZE, 0, "pool size {}", bytes.len());
        bytes
            .chunks(RECORD_SIZE)
            .map(|c| {
                let r = decode_record(c.try_into().unwrap());
                (r.key, r.value)
            })
            .collect()
    }

    #[test]
    fn creates_file_and_directories_with_fixed_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a/b/.kvp_pool_1");
        let old = rustix::process::umask(Mode::from_raw_mode(0o077));
        let pool = KvpPool::open(&path);
        rustix::process::umask(old);
        pool.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o644);
        assert_eq!(mode(&tmp.path().join("a")), 0o755);
        assert_eq!(mode(&tmp.path().join("a/b")), 0o755);
    }

    #[test]
    fn upsert_appends_then_replaces_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pool");
        let other = encode_record("other", "keep me").unwrap();
        std::fs::write(&path, other).unwrap();
        let pool = KvpPool::open(&path).unwrap();
        assert_eq!(
            pool.upsert("PROVISIONING_REPORT", "first").unwrap(),
            Upserted {
                index: 1,
                replaced: 0
            }
        );
        assert_eq!(
            pool.upsert("PROVISIONING_REPORT", "second").unwrap(),
            Upserted {
                index: 1,
                replaced: 1
            }
        );
        assert_eq!(
            records(&path),
            vec![
                ("other".into(), "keep me".into()),
                ("PROVISIONING_REPORT".into(), "second".into())
            ]
        );
    }

    #[test]
    fn upsert_drops_duplicates_and_a_ragged_tail() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pool");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&encode_record("K", "old 1").unwrap());
        bytes.extend_from_slice(&encode_record("x", "y").unwrap());
        bytes.extend_from_slice(&encode_record("K", "old 2").unwrap());
        bytes.extend_from_slice(b"garbage");
        std::fs::write(&path, &bytes).unwrap();
        let pool = KvpPool::open(&path).unwrap();
        assert_eq!(
            pool.upsert("K", "new").unwrap(),
            Upserted {
                index: 0,
                replaced: 2
            }
        );
        assert_eq!(
            records(&path),
            vec![("K".into(), "new".into()), ("x".into(), "y".into())]
        );
    }

    #[test]
    fn refuses_symlinks_and_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("target");
        std::fs::write(&target, b"").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            KvpPool::open(&link),
            Err(PoolError::Symlink { .. })
        ));
        let dangling = tmp.path().join("dangling");
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            KvpPool::open(&dangling),
            Err(PoolError::Symlink { .. })
        ));
        assert!(!tmp.path().join("nowhere").exists());
        assert!(matches!(
            KvpPool::open(tmp.path()),
            Err(PoolError::Directory { .. })
        ));
    }

    #[test]
    fn stale_pool_is_emptied_fresh_pool_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pool");
        std::fs::write(&path, encode_record("k", "v").unwrap()).unwrap();
        let pool = KvpPool::open(&path).unwrap();
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        assert!(!pool.truncate_if_stale(an_hour_ago).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), RECORD_SIZE as u64);
        let in_an_hour = SystemTime::now() + Duration::from_secs(3600);
        assert!(pool.truncate_if_stale(in_an_hour).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn boot_time_is_in_the_past() {
        assert!(boot_time().unwrap() < SystemTime::now());
    }
}
