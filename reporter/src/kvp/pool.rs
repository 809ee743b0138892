//! The guest KVP pool file writer (docs/protocol.md §7.4).
//!
//! * Opened with `O_NOFOLLOW | O_NONBLOCK`: a symlink at the pool path is never followed (the
//!   reporter runs as root; a link could aim the write anywhere), a FIFO cannot block the
//!   open, and anything but a regular file is refused after `fstat`. What sits at the pool
//!   path is the machine's state, not the user's input: such a refusal is a KVP failure like
//!   a read-only pool, and the wireserver report still goes out.
//! * Created `0644` (whatever the umask) in a `0755` directory, as hv_kvp_daemon expects.
//! * Every change holds a whole-file `fcntl` write lock (what hv_kvp_daemon takes) **and**
//!   `flock` (what cloud-init and azure-init take): on Linux the two do not exclude each other.
//!   Each is waited for at most the lock timeout: a writer that never lets go costs the KVP
//!   record, never the wireserver report, and once the reporter gives up it holds neither
//!   lock (flock taken while waiting for fcntl is released at the timeout).
//! * Streamed: the pool is read slot by slot through one fixed buffer ([`CHUNK_SLOTS`] slots),
//!   and holes of a sparse file are stepped over with `SEEK_DATA`. Memory does not grow with
//!   the pool.
//! * A key is upserted: one record, the earlier ones (appended by earlier runs or other
//!   writers) dropped.
//!
//! # Free slots
//!
//! A slot whose key starts with NUL (an all-zero record, a hole of a sparse file, a slot whose
//! key was erased) holds nothing a reader can use: hv_kvp_daemon matches keys with `memcmp`
//! and cloud-init strips the NULs, so both see an empty key. The reporter treats such slots as
//! free: they never count as records, and they are dropped when it compacts.
//!
//! # Why a kill cannot tear a record
//!
//! A buffered write is cut by a fatal signal only between pages (the kernel checks for one
//! before each page it copies, `generic_perform_write`), so a `pwrite` that stays inside one
//! page lands whole or not at all, and a larger one can stop at any page boundary. Records
//! are 2560 bytes at multiples of 2560, so half of them cross a 4 KiB page boundary and no
//! single write can replace one atomically; that is how a `kill -9` during the old
//! rewrite-in-one-write left torn records. The key field, though, is 512 bytes at a multiple
//! of 512 and so never crosses a page: writing or erasing a key is atomic, and the key is
//! the commit mark. Every step below leaves each slot either a complete record (old or new)
//! or free:
//!
//! 1. trim: `ftruncate` away trailing free slots and a partial record at the end (atomic);
//! 2. grow by one all-zero slot (`ftruncate`, atomic), write the new record's value, then its
//!    key: the new record exists, complete, before anything old is touched;
//! 3. compact from the first free or replaced slot on: an earlier record with our key has its
//!    key erased (it becomes free); a record that must move down goes value first, then key,
//!    into a free slot, and only then is its old slot's key erased;
//! 4. `ftruncate` to the records kept.
//!
//! Killed at any instant, the pool holds no torn record, has lost no other writer's record,
//! and holds the report key old or new (or both). What a kill can leave: free slots, which
//! the next upsert drops, and, for the one record being moved, two identical copies of it.
//! If that record has our key, the next upsert drops both copies (every earlier record of
//! our key goes). If it is another writer's, both copies stay, for good: the reporter cannot
//! tell a copy left by a kill from the same record appended twice by its writer (cloud-init
//! and azure-init append and never deduplicate), and dropping a record that is not ours is
//! worse than a reader seeing one key and value twice.
//! Rewriting into a new file and renaming it over the pool was rejected: hv_kvp_daemon
//! keeps one descriptor open for its `fcntl` lock and opens the pool by path to read and
//! write it, and appenders open it by path, so after a rename they would lock and write a
//! file nobody reads any more.

use std::fs::{File, Permissions};
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags, SeekFrom};
use thiserror::Error;

use super::record::{KEY_SIZE, RECORD_SIZE, RecordError, encode_record, raw_key};

/// Mode of a pool file the reporter creates.
pub const POOL_FILE_MODE: u32 = 0o644;
/// Mode of a pool directory the reporter creates.
pub const POOL_DIR_MODE: u32 = 0o755;
/// How long each lock is waited for by default. hv_kvp_daemon and the appenders hold theirs
/// for one read or one batch of writes.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// Slots read per `pread`: the whole read buffer (80 KiB).
pub const CHUNK_SLOTS: usize = 32;

const SLOT: u64 = RECORD_SIZE as u64;

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
    #[error(
        "{}: another writer held the {lock} lock for more than {:.1} s; gave up waiting",
        path.display(),
        waited.as_secs_f64()
    )]
    LockTimeout {
        path: PathBuf,
        lock: &'static str,
        waited: Duration,
    },
    #[error(
        "{}: the record was written (slot {index}), but dropping the earlier ones failed: cannot {action}: {source}",
        path.display()
    )]
    Compact {
        path: PathBuf,
        index: u64,
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

/// An open KVP pool file.
#[derive(Debug)]
pub struct KvpPool {
    // Shared with a thread waiting for a lock, which may outlive a timed-out wait.
    file: Arc<File>,
    path: PathBuf,
    lock_timeout: Duration,
}

/// Where an upsert put the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upserted {
    /// Record index in the file.
    pub index: usize,
    /// Earlier records with the same key that were dropped (0 for a fresh key).
    pub replaced: usize,
}

/// What one slot holds, judged by its key field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Empty key: nothing a reader can use.
    Free,
    /// A record with the key being upserted.
    Ours,
    /// Anybody else's record.
    Other,
}

fn classify(slot: &[u8], key: &[u8]) -> Slot {
    match raw_key(slot) {
        [] => Slot::Free,
        k if k == key => Slot::Ours,
        _ => Slot::Other,
    }
}

/// One step of a streamed read.
enum Visit<'b> {
    /// Slots inside a hole of a sparse file: all zero, free.
    Hole(Range<u64>),
    Record(u64, &'b [u8]),
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
        // O_NONBLOCK: opening a FIFO must not wait for a peer; cleared once it is a file.
        let base = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
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
        rustix::fs::fcntl_setfl(&fd, OFlags::RDWR)
            .map_err(|e| io_err("clear O_NONBLOCK on", e.into()))?;
        if created {
            // The umask may have taken bits away; the host daemon expects 0644.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(POOL_FILE_MODE))
                .map_err(|e| io_err("set the mode of", e.into()))?;
        }
        Ok(KvpPool {
            file: Arc::new(File::from(fd)),
            path: path.to_owned(),
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        })
    }

    /// Sets how long each lock is waited for.
    pub fn with_lock_timeout(mut self, timeout: Duration) -> KvpPool {
        self.lock_timeout = timeout;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `key = value` as the only record with that key, after the other records. The
    /// value is cut to what the host reads (see [`super::record::encode_record`]). The steps
    /// and why a kill cannot tear a record are in the module documentation.
    pub fn upsert(&self, key: &str, value: &str) -> Result<Upserted, PoolError> {
        let record = encode_record(key, value).map_err(|source| PoolError::Record {
            path: self.path.clone(),
            source,
        })?;
        let key = key.as_bytes();
        let _lock = self.lock()?;
        let size = self.size()?;
        let whole = size / SLOT;
        if size % SLOT != 0 {
            tracing::warn!(
                pool = %self.path.display(),
                size,
                "KVP pool size is not a multiple of {RECORD_SIZE}; dropping the partial record at the end"
            );
        }
        let mut buf = vec![0u8; CHUNK_SLOTS * RECORD_SIZE];

        // One pass to find the end of the records and where compaction starts.
        let mut end = 0; // one past the last slot that is not free
        let mut first_dead = None; // first free slot or earlier record of ours
        let mut replaced = 0;
        self.visit(&mut buf, 0..whole, |visit| {
            match visit {
                Visit::Hole(range) => {
                    first_dead.get_or_insert(range.start);
                }
                Visit::Record(i, slot) => match classify(slot, key) {
                    Slot::Free => {
                        first_dead.get_or_insert(i);
                    }
                    Slot::Ours => {
                        first_dead.get_or_insert(i);
                        replaced += 1;
                        end = i + 1;
                    }
                    Slot::Other => end = i + 1,
                },
            }
            Ok(())
        })?;

        // 1. Trailing free slots and a partial record go (nothing readable is lost).
        if size != end * SLOT {
            self.truncate(end * SLOT)?;
        }
        // 2. The new record, complete, in a fresh zero slot: value first, key (the commit) last.
        let new = end;
        self.truncate((new + 1) * SLOT)?;
        if let Err(e) = self.write_record(&record, new) {
            // A full disk can fail the write after the slot was added: it is free (its key
            // was never written), so dropping it again loses nothing. Best effort.
            let _ = self.file.set_len(new * SLOT);
            return Err(self.io_err("write", e));
        }

        // 3. and 4. Compaction: only when something before the new record is free or ours.
        let index = match first_dead {
            Some(start) if start < new => {
                self.compact(&mut buf, key, start, new)
                    .map_err(|(action, source)| PoolError::Compact {
                        path: self.path.clone(),
                        index: new,
                        action,
                        source,
                    })?
            }
            _ => new,
        };
        Ok(Upserted {
            index: index as usize,
            replaced,
        })
    }

    /// Moves every record in `start..=new` that is kept down over the free slots, dropping
    /// our earlier records, then truncates after the last record kept. Returns where the new
    /// record ended up.
    fn compact(
        &self,
        buf: &mut [u8],
        key: &[u8],
        start: u64,
        new: u64,
    ) -> Result<u64, (&'static str, io::Error)> {
        // Invariant: slots `w..r` are free when slot `r` is looked at.
        let mut w = start;
        let mut placed = new;
        let visited = self.visit(buf, start..new + 1, |visit| {
            let Visit::Record(r, slot) = visit else {
                return Ok(());
            };
            match classify(slot, key) {
                Slot::Free => {}
                Slot::Ours if r != new => self.erase_key(r).map_err(|e| self.io_err("erase", e))?,
                Slot::Ours | Slot::Other => {
                    if w != r {
                        // Copy, then erase the original: a kill in between leaves two
                        // identical complete records, never none and never a torn one.
                        self.write_record(slot, w)
                            .map_err(|e| self.io_err("move", e))?;
                        self.erase_key(r).map_err(|e| self.io_err("erase", e))?;
                    }
                    if r == new {
                        placed = w;
                    }
                    w += 1;
                }
            }
            Ok(())
        });
        match visited {
            Ok(()) => {}
            Err(PoolError::Io { action, source, .. }) => return Err((action, source)),
            Err(other) => return Err(("compact", io::Error::other(other.to_string()))),
        }
        self.file.set_len(w * SLOT).map_err(|e| ("truncate", e))?;
        Ok(placed)
    }

    /// Reads the slots in `range` in order through `buf`, stepping over holes.
    fn visit(
        &self,
        buf: &mut [u8],
        range: Range<u64>,
        mut f: impl FnMut(Visit<'_>) -> Result<(), PoolError>,
    ) -> Result<(), PoolError> {
        let capacity = (buf.len() / RECORD_SIZE) as u64;
        let mut r = range.start;
        while r < range.end {
            let offset = r * SLOT;
            match rustix::fs::seek(&*self.file, SeekFrom::Data(offset)) {
                Ok(data) if data >= offset + SLOT => {
                    let next = (data / SLOT).min(range.end);
                    f(Visit::Hole(r..next))?;
                    r = next;
                    continue;
                }
                Ok(_) => {}
                // No data from here to the end of the file: all hole.
                Err(rustix::io::Errno::NXIO) => return f(Visit::Hole(r..range.end)),
                // No SEEK_DATA on this file system: read everything.
                Err(rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP) => {}
                Err(e) => return Err(self.io_err("seek in", e.into())),
            }
            let n = capacity.min(range.end - r);
            let chunk = &mut buf[..n as usize * RECORD_SIZE];
            self.file
                .read_exact_at(chunk, offset)
                .map_err(|e| self.io_err("read", e))?;
            for (i, slot) in chunk.chunks_exact(RECORD_SIZE).enumerate() {
                f(Visit::Record(r + i as u64, slot))?;
            }
            r += n;
        }
        Ok(())
    }

    /// Writes a whole record into a free slot: the value field, then the key field. The key
    /// field never crosses a page, so the record appears complete or not at all.
    fn write_record(&self, record: &[u8], slot: u64) -> io::Result<()> {
        let at = slot * SLOT;
        self.file
            .write_all_at(&record[KEY_SIZE..RECORD_SIZE], at + KEY_SIZE as u64)?;
        self.file.write_all_at(&record[..KEY_SIZE], at)
    }

    /// Frees a slot by zeroing its key field (one page: atomic).
    fn erase_key(&self, slot: u64) -> io::Result<()> {
        self.file.write_all_at(&[0u8; KEY_SIZE], slot * SLOT)
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

    /// Takes flock, then the fcntl write lock, waiting at most the lock timeout in all.
    fn lock(&self) -> Result<PoolLock, PoolError> {
        // Uncontended: no thread needed.
        match take_locks(self.file.as_fd()) {
            Ok(()) => {
                return Ok(PoolLock {
                    file: Arc::clone(&self.file),
                });
            }
            Err((_, rustix::io::Errno::WOULDBLOCK)) => {}
            Err((lock, e)) => return Err(self.lock_err(lock, e)),
        }
        // Contended: a thread waits in the kernel (F_OFD_SETLKW and flock queue the waiter; a
        // polling loop would starve behind a writer that re-locks at once). It waits on its
        // own open file description, so locks it takes after we gave up are its own, released
        // at once without touching ours.
        let theirs = Arc::new(self.reopen()?);
        let wait = Arc::new(LockWait {
            state: Mutex::new(WaitState::Waiting("flock")),
            changed: Condvar::new(),
        });
        let (file, waiter) = (Arc::clone(&theirs), Arc::clone(&wait));
        std::thread::Builder::new()
            .name("kvp-lock".into())
            .spawn(move || {
                let fd = file.as_fd();
                let result = take_locks_blocking(fd, &waiter);
                let mut state = waiter.state.lock().unwrap_or_else(|p| p.into_inner());
                *state = match (&*state, result) {
                    (WaitState::Abandoned, Ok(())) => {
                        release_locks(fd);
                        WaitState::Abandoned
                    }
                    (WaitState::Abandoned, Err(_)) => WaitState::Abandoned,
                    (_, Ok(())) => WaitState::Locked,
                    (_, Err((lock, e))) => WaitState::Failed(lock, e),
                };
                waiter.changed.notify_all();
            })
            .map_err(|e| self.io_err("start a thread to wait for the lock on", e))?;
        let started = Instant::now();
        let state = wait.state.lock().unwrap_or_else(|p| p.into_inner());
        let (mut state, _) = wait
            .changed
            .wait_timeout_while(state, self.lock_timeout, |s| {
                matches!(s, WaitState::Waiting(_))
            })
            .unwrap_or_else(|p| p.into_inner());
        match &*state {
            WaitState::Locked => Ok(PoolLock { file: theirs }),
            WaitState::Failed(lock, e) => Err(self.lock_err(lock, *e)),
            WaitState::Waiting(lock) => {
                let lock = *lock;
                if lock == FCNTL {
                    // The waiter holds flock and sits in F_OFD_SETLKW until the fcntl holder
                    // lets go, maybe never. flock belongs to the open file description, so it
                    // is released from here: cloud-init, azure-init or another reporter must
                    // not wait on a writer that gave up (the report may retry for minutes).
                    let _ = rustix::fs::flock(theirs.as_fd(), FlockOperation::Unlock);
                }
                *state = WaitState::Abandoned;
                Err(PoolError::LockTimeout {
                    path: self.path.clone(),
                    lock,
                    waited: started.elapsed(),
                })
            }
            WaitState::Abandoned => unreachable!("only this thread abandons"),
        }
    }

    /// A second open file description of the same pool file (checked by device and inode).
    fn reopen(&self) -> Result<File, PoolError> {
        let fd = rustix::fs::open(
            &self.path,
            OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.io_err("open again", e.into()))?;
        let (a, b) = (
            rustix::fs::fstat(&*self.file).map_err(|e| self.io_err("stat", e.into()))?,
            rustix::fs::fstat(&fd).map_err(|e| self.io_err("stat", e.into()))?,
        );
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
            return Err(self.io_err(
                "lock",
                io::Error::other("the pool file was replaced while it was open"),
            ));
        }
        Ok(File::from(fd))
    }

    fn lock_err(&self, lock: &'static str, e: rustix::io::Errno) -> PoolError {
        let action = match lock {
            "flock" => "flock",
            _ => "take the fcntl write lock on",
        };
        self.io_err(action, e.into())
    }

    fn size(&self) -> Result<u64, PoolError> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| self.io_err("stat", e))?
            .len())
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

/// A wait for the locks on another thread.
struct LockWait {
    state: Mutex<WaitState>,
    changed: Condvar,
}

enum WaitState {
    /// Waiting for this lock.
    Waiting(&'static str),
    Locked,
    Failed(&'static str, rustix::io::Errno),
    /// The caller gave up (and released flock if the waiter held it): locks taken later are
    /// released at once.
    Abandoned,
}

const FCNTL: &str = "fcntl write";

/// A whole-file write lock of the open file description (`F_OFD_SETLK[W]`). It conflicts with
/// hv_kvp_daemon's process-associated `F_SETLKW` lock like a classic one, but belongs to the
/// descriptor, not the process: another thread's lock on another descriptor excludes it, and
/// closing some other descriptor of the file does not drop it.
fn ofd_lock(fd: BorrowedFd<'_>, cmd: libc::c_int, kind: libc::c_int) -> rustix::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `flock` is plain old data; all-zero is a valid value (l_pid must be 0 for OFD
    // locks), and fcntl only reads it for these commands.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid descriptor and a valid `flock` pointer for the duration of the call.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &fl as *const libc::flock) };
    if rc == -1 {
        Err(
            rustix::io::Errno::from_io_error(&io::Error::last_os_error())
                .unwrap_or(rustix::io::Errno::IO),
        )
    } else {
        Ok(())
    }
}

/// Both locks without waiting; on failure, which lock and why (nothing is left held).
fn take_locks(fd: BorrowedFd<'_>) -> Result<(), (&'static str, rustix::io::Errno)> {
    retry_eintr(|| rustix::fs::flock(fd, FlockOperation::NonBlockingLockExclusive))
        .map_err(|e| ("flock", e))?;
    if let Err(e) = retry_eintr(|| ofd_lock(fd, libc::F_OFD_SETLK, libc::F_WRLCK)) {
        let _ = rustix::fs::flock(fd, FlockOperation::Unlock);
        // A conflict is EAGAIN or EACCES.
        let e = if e == rustix::io::Errno::ACCESS {
            rustix::io::Errno::WOULDBLOCK
        } else {
            e
        };
        return Err((FCNTL, e));
    }
    Ok(())
}

fn take_locks_blocking(
    fd: BorrowedFd<'_>,
    wait: &LockWait,
) -> Result<(), (&'static str, rustix::io::Errno)> {
    retry_eintr(|| rustix::fs::flock(fd, FlockOperation::LockExclusive))
        .map_err(|e| ("flock", e))?;
    {
        // Announced under the state lock, so the caller, giving up, knows whether flock is
        // held (and releases it) or not yet (and then it is released here).
        let mut state = wait.state.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *state {
            WaitState::Waiting(lock) => *lock = FCNTL,
            _ => {
                let _ = rustix::fs::flock(fd, FlockOperation::Unlock);
                return Err(("flock", rustix::io::Errno::CANCELED));
            }
        }
    }
    if let Err(e) = retry_eintr(|| ofd_lock(fd, libc::F_OFD_SETLKW, libc::F_WRLCK)) {
        let _ = rustix::fs::flock(fd, FlockOperation::Unlock);
        return Err((FCNTL, e));
    }
    Ok(())
}

fn release_locks(fd: BorrowedFd<'_>) {
    let _ = ofd_lock(fd, libc::F_OFD_SETLK, libc::F_UNLCK);
    let _ = rustix::fs::flock(fd, FlockOperation::Unlock);
}

/// Both locks, on the descriptor that took them, released (fcntl first, then flock) when
/// dropped.
struct PoolLock {
    file: Arc<File>,
}

impl Drop for PoolLock {
    fn drop(&mut self) {
        release_locks(self.file.as_fd());
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
                index: 1,
                replaced: 2
            }
        );
        // The new record goes after the others (written before the old ones are dropped).
        assert_eq!(
            records(&path),
            vec![("x".into(), "y".into()), ("K".into(), "new".into())]
        );
    }

    #[test]
    fn identical_records_of_another_writer_are_both_kept_ours_dropped() {
        // What a kill between moving a record and erasing its old slot leaves (module docs):
        // two copies. Another writer's copies cannot be told from a record it appended twice,
        // so both stay; copies of ours go with every other earlier record of our key.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pool");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&[0u8; RECORD_SIZE]);
        bytes.extend_from_slice(&encode_record("event", "same").unwrap());
        bytes.extend_from_slice(&encode_record("event", "same").unwrap());
        bytes.extend_from_slice(&encode_record("K", "old").unwrap());
        bytes.extend_from_slice(&encode_record("K", "old").unwrap());
        std::fs::write(&path, &bytes).unwrap();
        let pool = KvpPool::open(&path).unwrap();
        pool.upsert("K", "new").unwrap();
        pool.upsert("K", "newer").unwrap();
        assert_eq!(
            records(&path),
            vec![
                ("event".into(), "same".into()),
                ("event".into(), "same".into()),
                ("K".into(), "newer".into())
            ]
        );
    }

    #[test]
    fn free_slots_are_dropped_and_the_order_of_the_others_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pool");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&encode_record("a", "1").unwrap());
        bytes.extend_from_slice(&[0u8; RECORD_SIZE]);
        bytes.extend_from_slice(&encode_record("K", "old").unwrap());
        // An erased key with its value left behind is free too.
        let mut erased = encode_record("gone", "stale value").unwrap();
        erased[..KEY_SIZE].fill(0);
        bytes.extend_from_slice(&erased);
        bytes.extend_from_slice(&encode_record("b", "2").unwrap());
        bytes.extend_from_slice(&encode_record("c", "3").unwrap());
        bytes.extend_from_slice(&[0u8; 2 * RECORD_SIZE]);
        std::fs::write(&path, &bytes).unwrap();
        let pool = KvpPool::open(&path).unwrap();
        assert_eq!(
            pool.upsert("K", "new").unwrap(),
            Upserted {
                index: 3,
                replaced: 1
            }
        );
        assert_eq!(
            records(&path),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "2".into()),
                ("c".into(), "3".into()),
                ("K".into(), "new".into())
            ]
        );
    }

    #[test]
    fn holes_of_a_sparse_pool_are_skipped_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pool");
        let file = File::create(&path).unwrap();
        file.write_all_at(&encode_record("first", "1").unwrap(), 0)
            .unwrap();
        // 64 GiB of hole: reading it would take minutes, skipping it takes nothing.
        let last = (64u64 << 30) / SLOT;
        file.write_all_at(&encode_record("last", "2").unwrap(), last * SLOT)
            .unwrap();
        drop(file);
        let pool = KvpPool::open(&path).unwrap();
        let started = Instant::now();
        assert_eq!(
            pool.upsert("K", "v").unwrap(),
            Upserted {
                index: 2,
                replaced: 0
            }
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            records(&path),
            vec![
                ("first".into(), "1".into()),
                ("last".into(), "2".into()),
                ("K".into(), "v".into())
            ]
        );
    }

    #[test]
    fn a_lock_held_past_the_timeout_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pool");
        std::fs::write(&path, b"").unwrap();
        for lock in ["flock", FCNTL] {
            // fcntl locks of one process never conflict with each other: hold it in a child.
            let mut holder = std::process::Command::new("python3")
                .arg("-c")
                .arg(format!(
                    "import fcntl,sys,time\nf=open(sys.argv[1],'r+')\nfcntl.{}(f, fcntl.LOCK_EX)\nprint('held',flush=True)\ntime.sleep(30)",
                    if lock == "flock" { "flock" } else { "lockf" }
                ))
                .arg(&path)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
                &mut line,
            )
            .unwrap();
            assert_eq!(line.trim(), "held");
            let pool = KvpPool::open(&path)
                .unwrap()
                .with_lock_timeout(Duration::from_millis(300));
            let started = Instant::now();
            let error = pool.upsert("K", "v").unwrap_err();
            let waited = started.elapsed();
            holder.kill().unwrap();
            holder.wait().unwrap();
            assert!(
                matches!(&error, PoolError::LockTimeout { lock: l, .. } if *l == lock),
                "{error}"
            );
            assert!(error.to_string().contains(lock), "{error}");
            assert!(
                waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
                "{waited:?}"
            );
            assert_eq!(
                std::fs::metadata(&path).unwrap().len(),
                0,
                "wrote without the lock"
            );
            // Once the holder is gone the abandoned wait must not keep the lock.
            pool.upsert("K", "v").unwrap();
            assert_eq!(records(&path), vec![("K".into(), "v".into())]);
            std::fs::write(&path, b"").unwrap();
        }
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
