//! Resource limits for a process tree the caller starts but does not trust (an agent under
//! test): how many processes and threads it may have, how much memory it may use, the largest
//! file it may write and how many files it may hold open. One agent's fork bomb or memory hog
//! is then its own failure, never a neighbour's, nor the harness's (a fork that fails with
//! EAGAIN, "os error 11", in the middle of someone else's case).
//!
//! Two mechanisms, each where it holds:
//!
//! * A cgroup per tree ([`cgroup`]), where this machine lets this process make one (root, and a
//!   cgroup hierarchy it may write: cgroup v1's `pids` and `memory` controllers, or a cgroup2
//!   hierarchy whose controllers it may hand out). It holds the process count (`pids.max`) and
//!   the memory of the whole tree (the kernel's OOM killer ends the tree's largest process past
//!   it); it is made below this process's own cgroup, so an outer limit (a container's) still
//!   holds; the tree joins it before it starts anything; whatever is left in it when the tree
//!   is done is killed.
//! * Rlimits, set in the process that execs, everywhere: RLIMIT_DATA (memory, per process),
//!   RLIMIT_FSIZE (a write past it gets SIGXFSZ), RLIMIT_NOFILE, and RLIMIT_NPROC only when the
//!   tree has a user namespace of its own: it counts a uid's processes in that namespace, while
//!   in the initial one it would count every process of the user (wirecheck's and the other
//!   agents' included), and root is exempt from it.
//!
//! The harness's own processes around the tree (a waiter and a PID namespace's init) are
//! started before anything of the tree, and [`HARNESS_PROCESSES`] more are allowed for them.

pub mod cgroup;

use std::fmt;

use rustix::process::{Resource, Rlimit};

/// Processes the harness keeps in the tree's cgroup beside the tree (a waiter, an init).
pub const HARNESS_PROCESSES: u64 = 2;

/// What one process tree may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Processes and threads at once.
    pub processes: u64,
    /// Memory, in bytes: of the whole tree with a cgroup, else of each process.
    pub memory: u64,
    /// The largest file it may write, in bytes.
    pub file_size: u64,
    /// Files (descriptors) each process may hold open.
    pub open_files: u64,
}

const MIB: u64 = 1 << 20;

impl Limits {
    /// Far above what a provisioning agent needs (cloud-init, WALinuxAgent and afterburn use a
    /// few dozen threads, some hundred MiB, files of a few MiB, some dozen descriptors), far
    /// below what one agent would need to starve the machine, even in every slot of a run at
    /// once (64 × 258 processes stay below Linux's smallest default `pid_max`, 32,768).
    pub const DEFAULT: Limits = Limits {
        processes: 256,
        memory: 1024 * MIB,
        file_size: 1024 * MIB,
        open_files: 1024,
    };

    /// The accepted ranges, per field: `(name, least, most)`, in the field's unit.
    pub const RANGES: [(&'static str, u64, u64); 4] = [
        ("processes", 16, 32_768),
        ("memory_mib", 64, 1 << 20),
        ("file_size_mib", 1, 1 << 20),
        ("open_files", 64, 1 << 20),
    ];

    /// The field `name` (one of [`Limits::RANGES`]) set to `value`, in its unit; `Err` says
    /// what is expected.
    pub fn set(&mut self, name: &str, value: i64) -> Result<(), String> {
        let Some((_, least, most)) = Self::RANGES.iter().find(|(n, _, _)| *n == name) else {
            return Err(format!(
                "unknown limit {name:?}; expected one of {}",
                Self::RANGES.map(|r| r.0).join(", ")
            ));
        };
        let Some(value) = u64::try_from(value)
            .ok()
            .filter(|v| (*least..=*most).contains(v))
        else {
            return Err(format!(
                "expected a whole number from {least} to {most}, got {value}"
            ));
        };
        match name {
            "processes" => self.processes = value,
            "memory_mib" => self.memory = value * MIB,
            "file_size_mib" => self.file_size = value * MIB,
            _ => self.open_files = value,
        }
        Ok(())
    }

    /// Parses the form [`fmt::Display`] writes (`processes=512,memory_mib=2048,...`): every
    /// field named is set, the others keep their defaults.
    pub fn parse(text: &str) -> Result<Limits, String> {
        let mut limits = Limits::DEFAULT;
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected NAME=NUMBER"))?;
            let value: i64 = value
                .parse()
                .map_err(|_| format!("{part:?}: expected a whole number"))?;
            limits
                .set(name, value)
                .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(limits)
    }

    /// The rlimits the process that execs gets (`own_user_namespace`: RLIMIT_NPROC too), each
    /// capped at the hard limit in effect (which cannot be raised).
    pub fn rlimits(&self, own_user_namespace: bool) -> Rlimits {
        let mut set = vec![
            (Resource::Data, self.memory),
            (Resource::Fsize, self.file_size),
            (Resource::Nofile, self.open_files),
        ];
        if own_user_namespace {
            set.push((Resource::Nproc, self.processes + HARNESS_PROCESSES));
        }
        Rlimits(
            set.into_iter()
                .map(|(resource, value)| {
                    let cap = rustix::process::getrlimit(resource).maximum;
                    (resource, cap.map_or(value, |cap| value.min(cap)))
                })
                .collect(),
        )
    }
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "processes={},memory_mib={},file_size_mib={},open_files={}",
            self.processes,
            self.memory / MIB,
            self.file_size / MIB,
            self.open_files
        )
    }
}

/// The limits of one process tree, made before it starts: its cgroup where this machine has
/// one ([`cgroup::available`]), and its rlimits.
#[derive(Debug)]
pub struct TreeLimits {
    cgroup: Option<cgroup::TreeCgroup>,
    rlimits: Rlimits,
}

impl TreeLimits {
    /// `own_user_namespace`: the tree runs in a user namespace of its own (RLIMIT_NPROC then
    /// holds its process count where no cgroup does).
    pub fn new(limits: &Limits, own_user_namespace: bool) -> std::io::Result<TreeLimits> {
        Ok(TreeLimits {
            cgroup: cgroup::TreeCgroup::create(limits)?,
            rlimits: limits.rlimits(own_user_namespace),
        })
    }

    /// Registers the tree's hooks on `cmd`: joining its cgroup now (call it before any hook
    /// that forks the tree's processes), and its rlimits after every hook registered later
    /// (those run only in the process that execs: a hook that forks and never returns keeps
    /// its own limits). Returns the second registration to call once the others are in.
    pub fn join(&self, cmd: &mut tokio::process::Command) -> RlimitsLast {
        if let Some(cgroup) = &self.cgroup {
            // SAFETY: the hook makes system calls only.
            unsafe {
                cmd.pre_exec(cgroup.join_hook());
            }
        }
        RlimitsLast(self.rlimits.clone())
    }

    /// Which limits the tree reached that only its cgroup can tell (`processes`, `memory`).
    pub fn reached(&self) -> Vec<&'static str> {
        self.cgroup.as_ref().map_or_else(Vec::new, |c| c.reached())
    }

    /// Ends what is left of the tree in its cgroup and removes the cgroup (blocking, for at
    /// most a few seconds: call it off async workers).
    pub fn finish(self) {
        if let Some(cgroup) = self.cgroup {
            cgroup.finish();
        }
    }
}

/// The rlimits hook, registered last ([`TreeLimits::join`]).
#[derive(Debug)]
#[must_use = "register it with `then_rlimits` after the other hooks"]
pub struct RlimitsLast(Rlimits);

impl RlimitsLast {
    /// Registers the rlimits on `cmd`, after every hook registered so far.
    pub fn then_rlimits(self, cmd: &mut tokio::process::Command) {
        let rlimits = self.0;
        // SAFETY: the hook makes system calls only.
        unsafe {
            cmd.pre_exec(move || rlimits.apply());
        }
    }
}

/// Rlimits made before a fork, to set in the child that execs ([`Rlimits::apply`]).
#[derive(Debug, Clone)]
pub struct Rlimits(Vec<(Resource, u64)>);

impl Rlimits {
    /// Sets each limit, soft and hard (the tree cannot raise them again). System calls only:
    /// for a `pre_exec` hook.
    pub fn apply(&self) -> std::io::Result<()> {
        for (resource, value) in &self.0 {
            rustix::process::setrlimit(
                *resource,
                Rlimit {
                    current: Some(*value),
                    maximum: Some(*value),
                },
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_round_trip_through_their_text_and_refuse_what_is_out_of_range() {
        let custom = Limits {
            processes: 64,
            memory: 100 * MIB,
            file_size: 8 * MIB,
            open_files: 256,
        };
        assert_eq!(Limits::parse(&custom.to_string()), Ok(custom));
        assert_eq!(Limits::parse(""), Ok(Limits::DEFAULT));
        assert_eq!(
            Limits::parse("processes=8").unwrap_err(),
            "processes: expected a whole number from 16 to 32768, got 8"
        );
        assert!(
            Limits::parse("threads=8")
                .unwrap_err()
                .contains("expected one of processes, memory_mib, file_size_mib, open_files")
        );
        assert!(Limits::parse("memory_mib=lots").is_err());
    }

    /// In a child: a write past RLIMIT_FSIZE ends it with SIGXFSZ, and it cannot raise the
    /// limit back.
    #[test]
    fn a_file_past_the_size_limit_ends_the_writer_with_sigxfsz() {
        use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            file_size: MIB,
            ..Limits::DEFAULT
        };
        let rlimits = limits.rlimits(false);
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args([
            "-c",
            "ulimit -f unlimited 2>/dev/null; exec head -c 3000000 /dev/zero > big",
        ])
        .current_dir(dir.path());
        // SAFETY: the hook makes system calls only.
        unsafe {
            cmd.pre_exec(move || rlimits.apply());
        }
        let status = cmd.status().unwrap();
        let sigxfsz = rustix::process::Signal::XFSZ.as_raw();
        assert_eq!(status.signal(), Some(sigxfsz), "{status:?}");
        assert_eq!(
            std::fs::metadata(dir.path().join("big")).unwrap().len(),
            MIB
        );
    }
}
