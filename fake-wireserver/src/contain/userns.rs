//! A user namespace for an agent started by root: uid 0 and gid 0 inside are nobody (65534)
//! and nogroup (65534) on the host, so the agent still runs "as root" (programs that insist on
//! uid 0 start), but every permission check on the host's files is nobody's: it cannot read
//! `/etc/shadow`, root's keys or root's private folders, nor write anything root owns. What it
//! must write (its case folder, its pool) is handed to it ([`hand_over`]).
//!
//! Made by a forked child that unshares the namespace, whose maps the parent (root) writes:
//! a process cannot map an id other than its own into a namespace it is in. The namespace then
//! lives while the handle does; each agent joins it between fork and exec ([`UnprivilegedRoot::
//! enter`]), after everything that needs the host's root (mounts, its PID namespace's `/proc`).

use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::Path;
use std::sync::Arc;

/// The host uid an agent's root is (the kernel's overflow uid: nobody).
pub const OUTSIDE_UID: u32 = 65534;
/// The host gid an agent's root group is (nogroup).
pub const OUTSIDE_GID: u32 = 65534;
/// In a guest's namespace ([`UnprivilegedRoot::new_guest`]) ids 1 to 65535 are this plus the
/// id on the host: ids of no host account, so the users an agent creates own nothing there.
pub const GUEST_ID_BASE: u32 = 1_000_000;
/// Ids a guest's namespace maps (0 to this, exclusive).
pub const GUEST_IDS: u32 = 65536;

/// The host id of id `inside` of a guest's namespace (`None`: it has none).
pub fn guest_host_id(inside: u32) -> Option<u32> {
    match inside {
        0 => Some(OUTSIDE_UID),
        i if i < GUEST_IDS => Some(GUEST_ID_BASE + i),
        _ => None,
    }
}

/// A user namespace whose root is [`OUTSIDE_UID`]/[`OUTSIDE_GID`] on the host.
#[derive(Debug, Clone)]
pub struct UnprivilegedRoot {
    namespace: Arc<OwnedFd>,
    /// A guest's: its ids 1 to 65535 mapped too, and a host name of its own ([`Self::enter`]).
    guest: bool,
}

impl UnprivilegedRoot {
    /// A new one; needs root (`CAP_SETUID`, `CAP_SETGID` and `CAP_SYS_ADMIN`), and a kernel
    /// and policy that allow user namespaces. Blocks for a fork and a few writes: call it off
    /// an async runtime's workers.
    pub fn new() -> io::Result<UnprivilegedRoot> {
        Self::made(false)
    }

    /// The same for an agent that provisions a guest: its root is still nobody on the host,
    /// but the users and groups it creates (ids 1 to 65535) are ids of their own there
    /// ([`guest_host_id`]), so it can hand them homes; and it gets a UTS namespace of its own,
    /// so it may set the guest's host name.
    pub fn new_guest() -> io::Result<UnprivilegedRoot> {
        Self::made(true)
    }

    fn made(guest: bool) -> io::Result<UnprivilegedRoot> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        // SAFETY: the child only makes system calls on memory made before the fork, then
        // `_exit`s; it never returns into Rust code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above. Every descriptor but its end of the pair is closed: a copy of
            // another thread's pair (forked at the same moment) would keep that helper waiting.
            unsafe {
                keep_only(theirs.as_raw_fd());
                unshare_and_wait(theirs.as_raw_fd())
            }
        }
        drop(theirs);
        let made = map_and_keep(pid, &ours, guest);
        // A byte, not the end of the stream, lets the child go: another thread's helper, forked
        // before this one closes `theirs`, may hold a copy of our end for a moment.
        // SAFETY: send(2) on our own socket; MSG_NOSIGNAL: a child already gone is no SIGPIPE.
        unsafe {
            libc::send(
                ours.as_raw_fd(),
                [1u8].as_ptr().cast(),
                1,
                libc::MSG_NOSIGNAL,
            )
        };
        drop(ours);
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        made.map(|namespace| UnprivilegedRoot {
            namespace: Arc::new(namespace),
            guest,
        })
    }

    /// Between fork and exec, in a child of root, after everything that needs the host's
    /// root: leaves every supplementary group (root's, such as `shadow` or `disk`, would stay
    /// otherwise), joins the namespace and becomes its root (nobody on the host). Keeps the
    /// capabilities the namespace gives: drop them next ([`super::drop_capabilities`]).
    ///
    /// # Safety
    /// Only between fork and exec: system calls only.
    pub unsafe fn enter(&self) -> io::Result<()> {
        let check = |r: libc::c_long| {
            if r == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        // SAFETY: raw system calls on this (single-threaded) process: libc's set*id wrappers
        // would try to reach threads a forked child does not have.
        unsafe {
            check(libc::syscall(
                libc::SYS_setgroups,
                0usize,
                std::ptr::null::<libc::gid_t>(),
            ))?;
            check(libc::c_long::from(libc::setns(
                self.namespace.as_raw_fd(),
                libc::CLONE_NEWUSER,
            )))?;
            check(libc::syscall(libc::SYS_setresgid, 0u32, 0u32, 0u32))?;
            check(libc::syscall(libc::SYS_setresuid, 0u32, 0u32, 0u32))?;
            if self.guest {
                check(libc::c_long::from(libc::unshare(libc::CLONE_NEWUTS)))?;
            }
        }
        Ok(())
    }
}

/// Closes every descriptor of this (forked) process but `fd`.
///
/// # Safety
/// Only in a freshly forked child: system calls only.
unsafe fn keep_only(fd: libc::c_int) {
    let fd = fd as libc::c_uint;
    // SAFETY: close_range(2) (Linux 5.9; containment needs 5.12) on our own table.
    unsafe {
        if fd > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, fd - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, fd + 1, u32::MAX, 0u32);
    }
}

/// The child of [`UnprivilegedRoot::new`]: unshares a user namespace, says so on `socket` (0,
/// or the errno), waits for the parent's byte (or the end of the stream), exits.
///
/// # Safety
/// Only in a freshly forked child.
unsafe fn unshare_and_wait(socket: libc::c_int) -> ! {
    // SAFETY: system calls on our own process and a local buffer.
    unsafe {
        let errno = if libc::unshare(libc::CLONE_NEWUSER) == 0 {
            0
        } else {
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL)
        };
        libc::write(socket, errno.to_ne_bytes().as_ptr().cast(), 4);
        let mut byte = 0u8;
        libc::read(socket, (&mut byte as *mut u8).cast(), 1);
        libc::_exit(0)
    }
}

/// In the parent: once the child `pid` said it unshared, writes its maps and opens its
/// namespace.
fn map_and_keep(
    pid: libc::pid_t,
    socket: &std::os::unix::net::UnixStream,
    guest: bool,
) -> io::Result<OwnedFd> {
    use std::io::Read as _;
    let mut status = [0u8; 4];
    (&*socket).read_exact(&mut status).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("the user namespace helper ended early: {e}"),
        )
    })?;
    let errno = i32::from_ne_bytes(status);
    if errno != 0 {
        let e = io::Error::from_raw_os_error(errno);
        return Err(io::Error::new(
            e.kind(),
            format!("unshare(CLONE_NEWUSER): {e}"),
        ));
    }
    let proc = Path::new("/proc").join(pid.to_string());
    // A guest's ids 1 to 65535 too, one line more ([`guest_host_id`]).
    let more = match guest {
        true => format!("1 {} {}\n", GUEST_ID_BASE + 1, GUEST_IDS - 1),
        false => String::new(),
    };
    for (file, text) in [
        ("setgroups", "deny".to_owned()),
        ("uid_map", format!("0 {OUTSIDE_UID} 1\n{more}")),
        ("gid_map", format!("0 {OUTSIDE_GID} 1\n{more}")),
    ] {
        let path = proc.join(file);
        std::fs::write(&path, text)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    }
    let path = proc.join("ns/user");
    let fd = rustix::fs::open(
        &path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(fd)
}

/// Gives `path` to the agent's host identity ([`OUTSIDE_UID`], [`OUTSIDE_GID`]), without
/// following a link: what the agent must be able to write (its case folder, its pool file).
pub fn hand_over(path: &Path) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(OUTSIDE_UID), Some(OUTSIDE_GID)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot hand {} to the agent: {e}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Helpers made on several threads at once all end: each used to wait for the end of a
    /// stream whose other end a helper forked at the same moment on another thread held, and
    /// both threads waited for their helpers forever (a `wirecheck prop` run hung).
    #[test]
    fn namespaces_made_on_many_threads_at_once_are_all_made() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not run: making the namespace needs root");
            return;
        }
        let (done, finished) = std::sync::mpsc::channel();
        for _ in 0..8 {
            let done = done.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    UnprivilegedRoot::new().unwrap();
                }
                done.send(()).unwrap();
            });
        }
        for thread in 0..8 {
            finished
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("thread {thread} of 8 never finished: a helper hangs"));
        }
    }

    /// Root only (CI): a child that entered the namespace is root inside, nobody outside, in no
    /// supplementary group, and cannot read what only root may.
    #[test]
    fn an_agent_in_the_namespace_is_root_inside_and_nobody_on_the_host() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not run: making the namespace needs root");
            return;
        }
        let root = UnprivilegedRoot::new().unwrap();
        let mut cmd = std::process::Command::new("sh");
        cmd.args([
            "-c",
            "id -u; id -g; id -G; cat /proc/self/uid_map; cat /etc/shadow >/dev/null 2>&1 && echo read-shadow; exit 0",
        ]);
        let entering = root.clone();
        // SAFETY: `enter` only makes system calls.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || entering.enter());
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert_eq!(lines[..3], ["0", "0", "0"], "{text}");
        let map: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(map, ["0", "65534", "1"], "{text}");
        assert!(!text.contains("read-shadow"), "{text}");
    }
}
