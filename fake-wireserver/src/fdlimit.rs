//! The open-file limit (RLIMIT_NOFILE). Each agent listener holds up to its connection cap of
//! sockets, and the usual soft limit (1,024) is below what the default caps need: the binaries
//! raise the soft limit to the hard one at startup, and a fake derives its per-listener cap
//! from the limit in effect when that is lower (`listener_cap`).

use std::sync::atomic::{AtomicU64, Ordering};

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors kept for everything but agent connections: the admin listener's connections,
/// the journal file, scenario files, the runtime, and (in wirecheck) agents' pipes.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// A listener never gets fewer connections than this from `listener_cap`.
pub const MIN_LISTENER_CAP: usize = 16;

/// The Linux kernel's default `fs.nr_open`: a soft limit above it is refused.
const NR_OPEN_DEFAULT: u64 = 1 << 20;

/// The soft limit before [`raise_to_hard_limit`] (0 = not raised), for agent children.
static ORIGINAL_SOFT: AtomicU64 = AtomicU64::new(0);

/// Raises the soft open-file limit to the hard limit (at most `fs.nr_open`). Returns the soft
/// limit in effect afterwards (`None` = unlimited). Failing to raise is not an error: the caps
/// then follow the lower limit.
pub fn raise_to_hard_limit() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    let ceiling = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(NR_OPEN_DEFAULT);
    let target = limit.maximum.unwrap_or(ceiling).min(ceiling);
    match limit.current {
        Some(current) if current < target => {
            let raised = Rlimit {
                current: Some(target),
                maximum: limit.maximum,
            };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                ORIGINAL_SOFT.store(current, Ordering::Relaxed);
                return Some(target);
            }
            Some(current)
        }
        other => other,
    }
}

/// In a child between fork and exec: puts back the soft limit [`raise_to_hard_limit`] found,
/// so programs run under test see the limit they would see anyway (some still use
/// `select(2)`, which cannot take descriptors over 1,023). Only a system call; no allocation.
pub fn restore_for_child() {
    let original = ORIGINAL_SOFT.load(Ordering::Relaxed);
    if original == 0 {
        return;
    }
    let limit = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(original),
            maximum: limit.maximum,
        },
    );
}

/// The soft open-file limit now (`None` = unlimited).
pub(crate) fn soft_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

/// The connection cap for each of `listeners` agent listeners: `configured`, or less when the
/// open-file limit `soft` (after [`RESERVED_DESCRIPTORS`]) cannot hold that many on each.
pub(crate) fn listener_cap(configured: usize, listeners: usize, soft: Option<u64>) -> usize {
    let Some(soft) = soft else {
        return configured;
    };
    let per = soft.saturating_sub(RESERVED_DESCRIPTORS) / listeners.max(1) as u64;
    let per = usize::try_from(per).unwrap_or(usize::MAX);
    configured.min(per.max(MIN_LISTENER_CAP)).max(1)
}

/// Whether an `accept` failed for want of descriptors (process or system).
pub(crate) fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::MFILE.raw_os_error()
            || code == rustix::io::Errno::NFILE.raw_os_error()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_follows_a_lower_descriptor_limit() {
        assert_eq!(listener_cap(1024, 2, None), 1024);
        assert_eq!(listener_cap(1024, 2, Some(1 << 20)), 1024);
        assert_eq!(listener_cap(1024, 2, Some(1024)), (1024 - 256) / 2);
        assert_eq!(listener_cap(1024, 4, Some(1024)), 192);
        assert_eq!(listener_cap(1024, 2, Some(100)), MIN_LISTENER_CAP);
        assert_eq!(listener_cap(8, 2, Some(100)), 8);
        assert_eq!(listener_cap(1024, 0, Some(1024)), 768);
    }

    #[test]
    fn emfile_and_enfile_are_out_of_descriptors() {
        assert!(out_of_descriptors(&std::io::Error::from_raw_os_error(24)));
        assert!(out_of_descriptors(&std::io::Error::from_raw_os_error(23)));
        assert!(!out_of_descriptors(&std::io::Error::from_raw_os_error(104)));
    }
}
