//! Files a scenario loads (`body_file`, `imds.instance_file`). A scenario may come from someone
//! else, or through the admin API, so a file is only read when it is
//!
//! * inside an allowed folder: the scenario's own folder, plus the folders the user who started
//!   the fake named (`--allow-files`, [`FileAccess::allow`]). The path is canonicalized first
//!   (`..` and every symlink resolved), so neither can lead out of the folder;
//! * a regular file: opened with `O_NONBLOCK` (a FIFO cannot block the open) and `O_NOFOLLOW`,
//!   then checked with `fstat` on the opened descriptor, so FIFOs, sockets and devices
//!   (`/dev/zero`) are refused before a byte is read;
//! * at most [`MAX_FILE_BYTES`], read through a bounded reader (a file that grows while it is
//!   read cannot grow the fake), and all of one scenario's files together at most
//!   [`MAX_SCENARIO_FILE_BYTES`] (a scenario naming the same file in 10,000 steps cannot either).
//!
//! Reads are synchronous: callers on the async runtime (the admin API) parse scenarios on a
//! blocking thread.

use std::cell::{Cell, OnceCell};
use std::fmt;
use std::fs::File;
use std::io::Read as _;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// One file's cap: 1 MiB, the fake's default request body cap ([`crate::DEFAULT_MAX_BODY`]).
/// The largest documents the platform serves (goal states, extension configs, instance
/// documents) are tens of KiB; a body that would not fit in a request is not a realistic answer.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// All files of one scenario together: 16 MiB, so the memory a scenario can pin is bounded
/// whatever it lists.
pub const MAX_SCENARIO_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Where a scenario may load files from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileAccess {
    /// The scenario's own folder: relative paths are resolved against it and files inside it are
    /// allowed. `None` (a scenario posted to the admin API without `?origin=`): relative paths
    /// are refused and only [`FileAccess::allow`] folders count.
    pub folder: Option<PathBuf>,
    /// More folders files may come from (`--allow-files`).
    pub allow: Vec<PathBuf>,
}

impl FileAccess {
    /// No folder at all: every file is refused.
    pub fn none() -> Self {
        FileAccess::default()
    }

    /// The folder of the scenario named `origin` (the current directory for a bare file name).
    pub fn beside(origin: impl AsRef<Path>) -> Self {
        let folder = match origin.as_ref().parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        FileAccess {
            folder: Some(folder),
            allow: Vec::new(),
        }
    }

    /// Adds allowed folders.
    pub fn allow<I, P>(mut self, dirs: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.allow.extend(dirs.into_iter().map(Into::into));
        self
    }
}

/// Why a file was not loaded (the scenario error's message).
#[derive(Debug)]
pub(crate) enum Refusal {
    NoFolder,
    RelativeWithoutFolder,
    Resolve(std::io::Error),
    Outside { resolved: PathBuf, allowed: String },
    Open(std::io::Error),
    NotRegular(&'static str),
    TooLarge,
    ScenarioTotal,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoFolder => f.write_str(
                "no folder allows files (a scenario posted to the admin API needs ?origin=PATH, \
                 or the fake an --allow-files DIR); expected an inline body",
            ),
            Refusal::RelativeWithoutFolder => f.write_str(
                "a relative path needs the scenario's folder (post with ?origin=PATH); \
                 expected an absolute path inside an --allow-files folder",
            ),
            Refusal::Resolve(e) => write!(f, "{e}"),
            Refusal::Outside { resolved, allowed } => write!(
                f,
                "it resolves to {}, outside the allowed folders ({allowed}); expected a file inside \
                 the scenario's folder or an --allow-files folder",
                resolved.display()
            ),
            Refusal::Open(e) => write!(f, "{e}"),
            Refusal::NotRegular(kind) => {
                write!(f, "it is {kind}; expected a regular file")
            }
            Refusal::TooLarge => write!(
                f,
                "it is larger than {} bytes (1 MiB), the cap for one file",
                MAX_FILE_BYTES
            ),
            Refusal::ScenarioTotal => write!(
                f,
                "it brings the scenario's files over {} bytes (16 MiB) together, the cap for one scenario",
                MAX_SCENARIO_FILE_BYTES
            ),
        }
    }
}

/// Reads the files of one scenario under its [`FileAccess`], keeping the running total.
pub(crate) struct FileReader<'a> {
    access: &'a FileAccess,
    /// Canonicalized allowed folders (computed on the first read; a folder that does not exist
    /// allows nothing).
    roots: OnceCell<Vec<PathBuf>>,
    used: Cell<u64>,
}

impl<'a> FileReader<'a> {
    pub(crate) fn new(access: &'a FileAccess) -> Self {
        FileReader {
            access,
            roots: OnceCell::new(),
            used: Cell::new(0),
        }
    }

    fn roots(&self) -> &[PathBuf] {
        self.roots.get_or_init(|| {
            self.access
                .folder
                .iter()
                .chain(&self.access.allow)
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .filter(|d| d.is_dir())
                .collect()
        })
    }

    /// The contents of `path` (as written in the scenario), or why not.
    pub(crate) fn read(&self, path: &str) -> Result<Vec<u8>, Refusal> {
        let roots = self.roots();
        if roots.is_empty() {
            return Err(Refusal::NoFolder);
        }
        let p = Path::new(path);
        let joined = if p.is_absolute() {
            p.to_path_buf()
        } else {
            match &self.access.folder {
                Some(folder) => folder.join(p),
                None => return Err(Refusal::RelativeWithoutFolder),
            }
        };
        let resolved = std::fs::canonicalize(&joined).map_err(Refusal::Resolve)?;
        if !roots.iter().any(|root| resolved.starts_with(root)) {
            let allowed = roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Refusal::Outside { resolved, allowed });
        }
        // O_NOFOLLOW: the canonical path has no symlink left; one swapped in since is refused.
        let fd = rustix::fs::open(
            &resolved,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Refusal::Open(e.into()))?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(Refusal::Open)?;
        if !meta.file_type().is_file() {
            return Err(Refusal::NotRegular(kind_of(meta.file_type())));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(Refusal::TooLarge);
        }
        // The size fstat gave is not trusted (a file may grow; /proc files say 0).
        let contents = read_capped(file, MAX_FILE_BYTES)?;
        let len = contents.len() as u64;
        let total = self.used.get() + len;
        if total > MAX_SCENARIO_FILE_BYTES {
            return Err(Refusal::ScenarioTotal);
        }
        self.used.set(total);
        Ok(contents)
    }
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "another kind of file"
    }
}

/// Largest scenario or agent profile file read (`--scenario`, scenario folders, profiles).
pub const MAX_INPUT_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A file the user named (a scenario, a profile, a pool to inspect), read only if it is a
/// regular file (opened without blocking, so a FIFO cannot hang the reader), at most `cap`
/// bytes: the error says which of these it is not.
pub fn read_regular_file(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = File::from(fd);
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other(format!(
            "it is {}; expected a regular file",
            kind_of(meta.file_type())
        )));
    }
    let too_large = || std::io::Error::other(format!("it is larger than {cap} bytes"));
    if meta.len() > cap {
        return Err(too_large());
    }
    match read_capped(file, cap) {
        Ok(contents) => Ok(contents),
        Err(Refusal::TooLarge) => Err(too_large()),
        Err(Refusal::Open(e)) => Err(e),
        Err(other) => Err(std::io::Error::other(other.to_string())),
    }
}

/// [`read_regular_file`] as UTF-8 text.
pub fn read_regular_text(path: &Path, cap: u64) -> std::io::Result<String> {
    String::from_utf8(read_regular_file(path, cap)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// At most `cap` bytes of `r`; one byte more is [`Refusal::TooLarge`], and is the most ever read.
fn read_capped(r: impl std::io::Read, cap: u64) -> Result<Vec<u8>, Refusal> {
    let mut contents = Vec::new();
    r.take(cap + 1)
        .read_to_end(&mut contents)
        .map_err(Refusal::Open)?;
    if contents.len() as u64 > cap {
        return Err(Refusal::TooLarge);
    }
    Ok(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beside_a_bare_name_is_the_current_directory() {
        assert_eq!(
            FileAccess::beside("s.toml").folder,
            Some(PathBuf::from("."))
        );
        assert_eq!(
            FileAccess::beside("a/b/s.toml").folder,
            Some(PathBuf::from("a/b"))
        );
    }

    #[test]
    fn an_endless_source_is_read_only_to_the_cap() {
        // std::io::repeat never ends: an unbounded read would never return.
        assert!(matches!(
            read_capped(std::io::repeat(b'x'), MAX_FILE_BYTES),
            Err(Refusal::TooLarge)
        ));
        let at_cap = read_capped(std::io::repeat(b'x').take(MAX_FILE_BYTES), MAX_FILE_BYTES);
        assert_eq!(at_cap.unwrap().len(), MAX_FILE_BYTES as usize);
    }

    #[test]
    fn the_scenario_total_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big"), vec![b'x'; MAX_FILE_BYTES as usize]).unwrap();
        let access = FileAccess::beside(dir.path().join("s.toml"));
        let reader = FileReader::new(&access);
        for _ in 0..(MAX_SCENARIO_FILE_BYTES / MAX_FILE_BYTES) {
            assert_eq!(reader.read("big").unwrap().len(), MAX_FILE_BYTES as usize);
        }
        assert!(matches!(reader.read("big"), Err(Refusal::ScenarioTotal)));
    }
}
