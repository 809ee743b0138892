//! Where a run's case folders live, and what a run that could not clean up left there.
//!
//! Every run's case folders are in one folder of its own, `run-XXXXXXXX`, in
//! `<tmp>/wirecheck-cases/` (shared by every run on the machine, sticky like `/tmp`, so that
//! hiding it from an agent hides every run's) or, when someone else owns that one,
//! `<tmp>/wirecheck-cases-<uid>/`. A run folder is mode 0700: nothing an agent leaves there is
//! within another local user's reach.
//!
//! A run holds an exclusive lock (`flock`) on its folder's `.owner` file, which names its pid,
//! for as long as it lives; the kernel drops the lock when the run ends, however it ends (a
//! SIGKILL included). Each run first removes the folders of this user's runs that are gone: a
//! `run-*` folder whose `.owner` it can lock. A folder is made as `.new-*`, locked, then
//! renamed, so a live run's folder is never taken for a dead one; a folder without `.owner` (an
//! older wirecheck's, which may still be running) is left alone.
//!
//! An agent run as the same user can make folders it created unwritable or unreadable
//! (`chmod 000`): removing a run folder makes every folder in it the owner's to enter and write
//! again, then removes it; whatever still cannot be removed is named on stderr.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The name prefix of a run's folder of case folders.
pub const CASE_ROOT_PREFIX: &str = "run-";

/// The folder, in the temporary folder, that every wirecheck run's case folders live in.
pub const CASES_FOLDER: &str = "wirecheck-cases";

/// A run folder's lock file: the owning run's pid, locked while it runs.
const OWNER_FILE: &str = ".owner";

/// The name prefix of a run folder being made (not yet locked: never cleaned).
const NEW_PREFIX: &str = ".new-";

/// The most leftovers named when a folder cannot be removed whole.
const MAX_NAMED: usize = 5;

/// This run's folder of case folders: locked while it lives, removed when it drops (what
/// cannot be removed is named on stderr).
#[derive(Debug)]
pub struct CaseRoot {
    path: PathBuf,
    /// Holds the lock on `.owner`; closed (and the lock dropped) after the folder is gone.
    _owner: File,
}

impl CaseRoot {
    /// Makes a new, locked run folder in `parent`.
    pub fn create(parent: &Path) -> io::Result<CaseRoot> {
        for _ in 0..8 {
            let new = tempfile::Builder::new()
                .prefix(NEW_PREFIX)
                .rand_bytes(8)
                .tempdir_in(parent)?;
            let owner = lock_new_owner_file(new.path())?;
            let name = new
                .path()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            let path = parent.join(format!(
                "{CASE_ROOT_PREFIX}{}",
                name.trim_start_matches(NEW_PREFIX)
            ));
            match rustix::fs::renameat_with(
                rustix::fs::CWD,
                new.path(),
                rustix::fs::CWD,
                &path,
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                Ok(()) => {
                    // Renamed: the temporary folder's own removal must not run.
                    let _ = new.keep();
                    return Ok(CaseRoot {
                        path,
                        _owner: owner,
                    });
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::other(format!(
            "no free run folder name in {}",
            parent.display()
        )))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CaseRoot {
    fn drop(&mut self) {
        warn_leftovers(&remove_tree(&self.path));
    }
}

/// `.owner` in the new folder `dir`: made, locked, holding this process's pid.
fn lock_new_owner_file(dir: &Path) -> io::Result<File> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join(OWNER_FILE))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    writeln!(file, "{}", std::process::id())?;
    Ok(file)
}

/// Removes the run folders in `parent` of this user's runs that are gone (their `.owner` can
/// be locked); returns how many. Whatever of them cannot be removed is named on stderr.
pub fn remove_abandoned(parent: &Path) -> usize {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let me = rustix::process::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let is_run = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(CASE_ROOT_PREFIX));
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !(is_run && ours) {
            continue;
        }
        let path = entry.path();
        // Held while the folder is removed: a run that is gone stays gone.
        let Some(_lock) = lock_of_a_run_that_is_gone(&path) else {
            continue;
        };
        let left = remove_tree(&path);
        warn_leftovers(&left);
        removed += usize::from(left.is_empty());
    }
    removed
}

/// The lock on `run/.owner` when its run is gone; `None` while it runs, or when there is no
/// `.owner` (a folder of an older wirecheck, which may still be running).
fn lock_of_a_run_that_is_gone(run: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(run.join(OWNER_FILE))
        .ok()?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(file)
}

/// Something of a removed folder that is still there, and why.
#[derive(Debug)]
pub struct Leftover {
    pub path: PathBuf,
    pub error: io::Error,
}

/// Removes `path` and everything in it, never following a link. Where that fails (an agent
/// made a folder unreadable or unwritable), every folder in it is made its owner's to enter
/// and write, and it is tried again. Returns what is still there (at most a few, with why).
pub fn remove_tree(path: &Path) -> Vec<Leftover> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => return Vec::new(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(_) => {}
    }
    open_up(path);
    match std::fs::remove_dir_all(path) {
        Ok(()) => Vec::new(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => leftovers(path, e),
    }
}

/// Gives the owner read, write and search on `root` and every folder below it (links are
/// never followed). Only folders this user owns change (root's are everyone's).
fn open_up(root: &Path) {
    let mut folders = vec![root.to_path_buf()];
    while let Some(dir) = folders.pop() {
        let _ = add_owner_rwx(&dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        folders.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
}

/// `chmod u+rwx` on the folder `dir` itself, never on what a link there points to.
fn add_owner_rwx(dir: &Path) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsRawFd as _;
    let handle = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mode = rustix::fs::fstat(&handle)?.st_mode & 0o7777;
    // A handle made with O_PATH cannot be chmod'ed itself; its /proc link names exactly it.
    let exact = format!("/proc/self/fd/{}", handle.as_raw_fd());
    rustix::fs::chmod(exact.as_str(), Mode::from_raw_mode(mode | 0o700))?;
    Ok(())
}

/// What of `root` is still there after a failed removal, each with why it will not go: at most
/// [`MAX_NAMED`] files, else `root` itself with `error` (a folder that will not go).
fn leftovers(root: &Path, error: io::Error) -> Vec<Leftover> {
    let mut left = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(dir) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                folders.push(entry.path());
            } else if let Err(error) = std::fs::remove_file(entry.path())
                && left.len() < MAX_NAMED
            {
                left.push(Leftover {
                    path: entry.path(),
                    error,
                });
            }
        }
    }
    if left.is_empty() {
        return match std::fs::remove_dir_all(root) {
            Ok(()) => Vec::new(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(_) => vec![Leftover {
                path: root.to_path_buf(),
                error,
            }],
        };
    }
    left
}

/// Names on stderr what could not be removed.
fn warn_leftovers(left: &[Leftover]) {
    for l in left {
        eprintln!(
            "wirecheck: warning: cannot remove {} (left by an agent in its case folder): {}; remove it by hand",
            crate::tools::text::visible(&l.path.display().to_string()),
            l.error
        );
    }
}

/// `<temp>/wirecheck-cases`, shared by every run on the machine (sticky and world-writable, as
/// `/tmp` is; each run's folder inside is its own, mode 0700): hiding it from an agent hides
/// every run's case folders, those of runs started after the agent included.
pub fn shared_cases_folder() -> io::Result<PathBuf> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let dir = std::env::temp_dir().join(CASES_FOLDER);
    match std::fs::create_dir(&dir) {
        Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // Only a folder root or we made is trusted: its owner could replace our run's folder
    // with a link, sticky bit or not.
    let meta = std::fs::symlink_metadata(&dir)?;
    let owner_trusted = meta.uid() == 0 || meta.uid() == rustix::process::geteuid().as_raw();
    if !meta.is_dir() || !owner_trusted || meta.mode() & 0o1000 == 0 {
        return Err(io::Error::other(format!(
            "{} is not a sticky folder owned by root or by this user",
            dir.display()
        )));
    }
    Ok(dir)
}

/// `<temp>/wirecheck-cases-<uid>`: this user's own folder of case folders (mode 0700), when
/// the shared one cannot be trusted.
pub fn own_cases_folder() -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let uid = rustix::process::geteuid().as_raw();
    let dir = std::env::temp_dir().join(format!("{CASES_FOLDER}-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a folder of this user's that only it can enter",
            dir.display()
        )));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_runs_folder_is_never_removed_and_a_dead_ones_is() {
        let parent = tempfile::tempdir().unwrap();
        let live = CaseRoot::create(parent.path()).unwrap();
        std::fs::create_dir(live.path().join("wirecheck-case-x")).unwrap();
        let name = live.path().file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(CASE_ROOT_PREFIX), "{name}");
        let owner = std::fs::read_to_string(live.path().join(OWNER_FILE)).unwrap();
        assert_eq!(owner.trim(), std::process::id().to_string());
        // What a killed run leaves: its folder and `.owner`, its lock gone with it.
        let dead = parent.path().join("run-dead");
        std::fs::create_dir_all(dead.join("wirecheck-case-x/tmp")).unwrap();
        std::fs::write(dead.join(OWNER_FILE), "12345\n").unwrap();
        // A run of an older wirecheck (no `.owner`) and a folder being made: left alone.
        let older = parent.path().join("run-older");
        std::fs::create_dir(&older).unwrap();
        let making = parent.path().join(".new-making");
        std::fs::create_dir(&making).unwrap();
        assert_eq!(remove_abandoned(parent.path()), 1);
        assert!(!dead.exists());
        assert!(live.path().is_dir() && older.is_dir() && making.is_dir());
        let path = live.path().to_path_buf();
        drop(live);
        assert!(!path.exists());
    }

    /// Folders an agent made unreadable and unwritable (it runs as the same user) are opened
    /// up and removed; links are never followed.
    #[test]
    fn folders_an_agent_locked_are_opened_up_and_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        let outside = tempfile::tempdir().unwrap();
        let kept = outside.path().join("kept");
        std::fs::create_dir(&kept).unwrap();
        std::fs::write(kept.join("file"), "x").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o500)).unwrap();
        let root = tempfile::tempdir().unwrap().keep();
        let locked = root.join("a/b");
        std::fs::create_dir_all(&locked).unwrap();
        std::fs::write(locked.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(&kept, root.join("a/link")).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(0o500)).unwrap();
        assert!(remove_tree(&root).is_empty());
        assert!(!root.exists());
        // The link's target is untouched, its mode included.
        assert!(kept.join("file").is_file());
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o500);
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    /// What truly cannot be removed (here an immutable file, which only root can make) is
    /// named, path and reason.
    #[test]
    fn what_cannot_be_removed_is_named() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let root = tempfile::tempdir().unwrap().keep();
        let stuck = root.join("case/stuck");
        std::fs::create_dir_all(root.join("case")).unwrap();
        std::fs::write(&stuck, "x").unwrap();
        let chattr = |flag: &str| {
            std::process::Command::new("chattr")
                .arg(flag)
                .arg(&stuck)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !chattr("+i") {
            // A file system without the immutable attribute (tmpfs before Linux 6.0).
            return;
        }
        let left = remove_tree(&root);
        chattr("-i");
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].path, stuck);
        assert_eq!(left[0].error.kind(), io::ErrorKind::PermissionDenied);
        assert!(remove_tree(&root).is_empty());
    }
}
