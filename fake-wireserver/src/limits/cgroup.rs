//! A cgroup per process tree: where this machine lets this process make them (probed once),
//! making one with a tree's limits, joining it from a `pre_exec` hook, and removing it (and
//! whatever is left in it) when the tree is done.
//!
//! Where: below this process's own cgroup, in the first of these that works: a cgroup2
//! hierarchy whose `pids` controller this process may hand out to children (its own cgroup
//! delegates it, or is the root), then that hierarchy's root (root only: its own cgroup holds
//! processes, so it cannot hand controllers out), then cgroup v1's `pids` hierarchy (with the
//! `memory` one where it is mounted). A machine with none (no root, a container whose cgroups
//! are read-only) gets [`available`]'s reason, and the caller falls back to rlimits.
//!
//! Tree cgroups are named `wirecheck-agent-*`. One left by a process that was killed before it
//! could remove it (empty, and older than [`ABANDONED_AFTER`]) is removed by
//! [`remove_abandoned`].

use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{HARNESS_PROCESSES, Limits};

/// The name prefix of every tree cgroup.
const PREFIX: &str = "wirecheck-agent-";

/// An empty tree cgroup older than this belongs to no live tree (one is empty only between
/// its making and its tree's joining, or its tree's end and its removal: milliseconds).
pub const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// How long a finished tree's cgroup may take to empty after its processes were killed.
const EMPTY_WITHIN: Duration = Duration::from_secs(2);

/// Which controller files a hierarchy has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// cgroup2: `pids.max`, `memory.max` (when its memory controller is handed out too).
    Unified { memory: bool },
    /// cgroup v1's `pids` hierarchy.
    Pids,
    /// cgroup v1's `memory` hierarchy.
    Memory,
}

/// A folder tree cgroups are made in.
#[derive(Debug, Clone)]
struct Place {
    kind: Kind,
    parent: PathBuf,
}

/// Where tree cgroups are made on this machine, or why they cannot be (asked once).
fn places() -> Result<&'static [Place], &'static str> {
    static PLACES: std::sync::OnceLock<Result<Vec<Place>, String>> = std::sync::OnceLock::new();
    match PLACES.get_or_init(discover) {
        Ok(places) => Ok(places),
        Err(why) => Err(why),
    }
}

/// Why a tree cannot get a cgroup of its own on this machine, if it cannot: its process
/// count and memory are then held by rlimits only ([`super`]).
pub fn available() -> Option<&'static str> {
    places().err()
}

fn discover() -> Result<Vec<Place>, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mut tried = Vec::new();
    if let Some(place) = unified(&own, &mounts, &mut tried) {
        return Ok(vec![place]);
    }
    let v1 = |controller: &str, kind: Kind| {
        v1_parent(&own, &mounts, controller).map(|parent| Place { kind, parent })
    };
    match v1("pids", Kind::Pids) {
        Some(pids) => match probe(&pids) {
            Ok(()) => Ok(std::iter::once(pids)
                .chain(v1("memory", Kind::Memory).filter(|m| probe(m).is_ok()))
                .collect()),
            Err(e) => {
                tried.push(format!("{}: {e}", pids.parent.display()));
                Err(tried.join("; "))
            }
        },
        None if tried.is_empty() => {
            Err("no cgroup hierarchy with the pids controller is mounted".into())
        }
        None => Err(tried.join("; ")),
    }
}

/// The cgroup2 place, when its `pids` controller can be handed to children of this process's
/// own cgroup or (root) of the hierarchy's root; what was tried goes to `tried`.
fn unified(own: &str, mounts: &str, tried: &mut Vec<String>) -> Option<Place> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let (root, mount) = mount_of(mounts, "cgroup2", None)?;
    let relative = Path::new(path).strip_prefix(&root).ok()?;
    for parent in [mount.join(relative), mount.clone()] {
        let controllers = std::fs::read_to_string(parent.join("cgroup.controllers")).ok()?;
        if !controllers.split_whitespace().any(|c| c == "pids") {
            tried.push(format!("{}: no pids controller", parent.display()));
            return None;
        }
        let memory = controllers.split_whitespace().any(|c| c == "memory");
        let wanted = if memory { "+pids +memory" } else { "+pids" };
        let place = Place {
            kind: Kind::Unified { memory },
            parent: parent.clone(),
        };
        match std::fs::write(parent.join("cgroup.subtree_control"), wanted)
            .and_then(|()| probe(&place))
        {
            Ok(()) => return Some(place),
            Err(e) => tried.push(format!("{}: {e}", parent.display())),
        }
    }
    None
}

/// This process's cgroup folder in the v1 hierarchy of `controller`.
fn v1_parent(own: &str, mounts: &str, controller: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })?;
    let (root, mount) = mount_of(mounts, "cgroup", Some(controller))?;
    Some(mount.join(Path::new(path).strip_prefix(&root).ok()?))
}

/// The (root in its hierarchy, mount point) of the first mount of `fstype` whose super
/// options name `controller`.
fn mount_of(mounts: &str, fstype: &str, controller: Option<&str>) -> Option<(PathBuf, PathBuf)> {
    mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split_whitespace();
        let (kind, _source, options) = (after.next()?, after.next()?, after.next()?);
        let named = controller.is_none_or(|c| options.split(',').any(|o| o == c));
        if kind != fstype || !named {
            return None;
        }
        let mut before = before.split_whitespace().skip(3);
        let (root, mount) = (before.next()?, before.next()?);
        Some((PathBuf::from(root), PathBuf::from(mount)))
    })
}

/// Makes and removes a tree cgroup in `place`.
fn probe(place: &Place) -> io::Result<()> {
    let dir = place
        .parent
        .join(format!("{PREFIX}probe-{}", std::process::id()));
    std::fs::create_dir(&dir)?;
    let limit = place.kind.pids_file().map(|f| dir.join(f));
    let usable = limit.map_or(Ok(()), |f| std::fs::metadata(f).map(drop));
    std::fs::remove_dir(&dir)?;
    usable
}

impl Kind {
    fn pids_file(self) -> Option<&'static str> {
        match self {
            Kind::Unified { .. } | Kind::Pids => Some("pids.max"),
            Kind::Memory => None,
        }
    }

    /// The files written, in order, for `limits` (a missing optional one is skipped).
    fn settings(self, limits: &Limits) -> Vec<(&'static str, u64, bool)> {
        let processes = limits.processes + HARNESS_PROCESSES;
        match self {
            Kind::Unified { memory } => {
                let mut set = vec![("pids.max", processes, true)];
                if memory {
                    set.push(("memory.max", limits.memory, true));
                    set.push(("memory.swap.max", 0, false));
                }
                set
            }
            Kind::Pids => vec![("pids.max", processes, true)],
            Kind::Memory => vec![
                ("memory.limit_in_bytes", limits.memory, true),
                ("memory.memsw.limit_in_bytes", limits.memory, false),
            ],
        }
    }
}

/// One tree's cgroup (a folder per hierarchy), with a handle on each `cgroup.procs` for the
/// tree to join by.
#[derive(Debug)]
pub struct TreeCgroup {
    dirs: Vec<PathBuf>,
    procs: Arc<Vec<OwnedFd>>,
}

impl TreeCgroup {
    /// A cgroup holding `limits`; `Ok(None)` where this machine has no place for one.
    pub fn create(limits: &Limits) -> io::Result<Option<TreeCgroup>> {
        let Ok(places) = places() else {
            return Ok(None);
        };
        let name = unique_name();
        let mut made = TreeCgroup {
            dirs: Vec::new(),
            procs: Arc::new(Vec::new()),
        };
        let mut procs = Vec::new();
        for place in places {
            let dir = place.parent.join(&name);
            std::fs::create_dir(&dir)?;
            made.dirs.push(dir.clone());
            for (file, value, required) in place.kind.settings(limits) {
                match std::fs::write(dir.join(file), value.to_string()) {
                    Err(e) if required => {
                        return Err(io::Error::new(e.kind(), format!("{file}: {e}")));
                    }
                    _ => {}
                }
            }
            procs.push(rustix::fs::open(
                dir.join("cgroup.procs"),
                rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?);
        }
        made.procs = Arc::new(procs);
        Ok(Some(made))
    }

    /// A `pre_exec` hook: the calling process joins the cgroup (in every hierarchy). Register
    /// it before any hook that forks, so everything of the tree is inside. System calls only.
    pub fn join_hook(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let procs = Arc::clone(&self.procs);
        move || {
            for fd in procs.iter() {
                // "0": the writing process.
                rustix::io::write(fd.as_fd(), b"0")?;
            }
            Ok(())
        }
    }

    /// Whether the tree reached its process or memory limit: the names of those it did.
    pub fn reached(&self) -> Vec<&'static str> {
        let count = |dir: &Path, file: &str, key: &str| -> u64 {
            std::fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|t| {
                    t.lines().find_map(|l| {
                        let (k, v) = l.split_once(' ')?;
                        (k == key).then(|| v.trim().parse().ok())?
                    })
                })
                .unwrap_or(0)
        };
        let mut reached = Vec::new();
        for dir in &self.dirs {
            if count(dir, "pids.events", "max") > 0 {
                reached.push("processes");
            }
            if count(dir, "memory.events", "oom_kill") > 0
                || count(dir, "memory.oom_control", "oom_kill") > 0
            {
                reached.push("memory");
            }
        }
        reached
    }

    /// Kills whatever is left in the cgroup, then removes it (waiting at most
    /// [`EMPTY_WITHIN`]; one that will not go is left for [`remove_abandoned`]). Blocking.
    pub fn finish(self) {
        let until = std::time::Instant::now() + EMPTY_WITHIN;
        let Some(first) = self.dirs.first() else {
            return;
        };
        loop {
            let left = members(first);
            for pid in &left {
                if let Some(pid) = rustix::process::Pid::from_raw(*pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            let removed = self
                .dirs
                .iter()
                .all(|d| std::fs::remove_dir(d).is_ok() || !d.exists());
            if removed || std::time::Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The processes in the cgroup folder `dir`.
fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn unique_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{PREFIX}{}-{}-{:08x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    )
}

/// Removes the tree cgroups that processes killed before they could remove them left behind
/// (empty, older than [`ABANDONED_AFTER`]); returns how many.
pub fn remove_abandoned() -> usize {
    let Ok(places) = places() else {
        return 0;
    };
    let mut removed = 0;
    for place in places {
        let Ok(entries) = std::fs::read_dir(&place.parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let named = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(PREFIX));
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age >= ABANDONED_AFTER));
            let dir = entry.path();
            if named && old && members(&dir).is_empty() && std::fs::remove_dir(&dir).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const OWN: &str = "\
8:pids:/
4:memory:/process_api/79a4
0::/
";

    #[test]
    fn the_v1_folders_of_this_process_are_found_from_its_cgroup_and_the_mounts() {
        assert_eq!(
            v1_parent(OWN, MOUNTS, "pids"),
            Some(PathBuf::from("/sys/fs/cgroup/pids/"))
        );
        assert_eq!(
            v1_parent(OWN, MOUNTS, "memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/79a4"))
        );
        assert_eq!(v1_parent(OWN, MOUNTS, "cpu"), None);
        assert_eq!(
            mount_of(MOUNTS, "cgroup2", None),
            Some(("/".into(), "/sys/fs/cgroup/unified".into()))
        );
    }

    /// Where this machine allows it (root, writable cgroups: CI), a tree in its cgroup cannot
    /// have more processes than its limit, and nothing of it survives `finish`.
    #[test]
    fn a_tree_in_its_cgroup_cannot_fork_past_its_limit_and_ends_with_it() {
        use std::os::unix::process::CommandExt as _;
        if let Some(why) = available() {
            assert!(!rustix::process::geteuid().is_root(), "as root: {why}");
            return;
        }
        let limits = Limits {
            processes: 16,
            ..Limits::DEFAULT
        };
        let cgroup = TreeCgroup::create(&limits).unwrap().unwrap();
        // Forks sleepers until a fork fails (dash then gives up), at most 200.
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args([
            "-c",
            "i=0; while [ $i -lt 200 ]; do sleep 600 & i=$((i+1)); done",
        ])
        .stderr(std::process::Stdio::null());
        // SAFETY: the hook makes system calls only.
        unsafe {
            cmd.pre_exec(cgroup.join_hook());
        }
        cmd.status().unwrap();
        let held = members(&cgroup.dirs[0]).len() as u64;
        assert!(held <= limits.processes + HARNESS_PROCESSES, "{held}");
        assert!(held >= limits.processes, "{held}");
        assert_eq!(cgroup.reached(), ["processes"]);
        let dirs = cgroup.dirs.clone();
        cgroup.finish();
        assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    }
}
