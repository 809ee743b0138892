//! A private network namespace for agents the runner starts in-process (`attach = "proxy"`
//! always, `"url"` when root): its only interface is `lo`, the fake's listeners are bound inside
//! it, and the agent's processes join it before they exec.
//!
//! Proxy agents are given the real addresses (168.63.129.16, 169.254.169.254) and `http_proxy`;
//! one that ignored the proxy, or a url agent that fell back to the well-known address when its
//! loopback URL refused, would, in the host's namespace, send its report to the real wireserver
//! of the machine wirecheck runs on (an Azure CI runner has one). Inside this namespace such a
//! request fails with "network unreachable" and nothing leaves the machine, while the agent
//! still talks to the fake's own sockets: no relay, so resets, hangs and partial answers reach
//! it exactly as the fake acts them out.
//!
//! Network namespaces are per thread: a short-lived thread of its own unshares, brings `lo` up,
//! binds the listeners and keeps a handle to the namespace, so no runtime thread ever moves.
//! Needs root (CAP_SYS_ADMIN); [`unavailable`] says so before a scenario is attempted (proxy
//! agents are then skipped; url agents run in the runner's namespace, on their loopback URLs).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// A network namespace that lives while this handle (or a socket bound in it) does.
#[derive(Debug, Clone)]
pub struct NetNs {
    fd: Arc<OwnedFd>,
}

impl NetNs {
    /// A new namespace with `lo` up, and `count` listeners bound on `127.0.0.1:0` inside it.
    pub fn with_loopback_listeners(count: usize) -> io::Result<(NetNs, Vec<TcpListener>)> {
        std::thread::Builder::new()
            .name("wirecheck-netns".into())
            .spawn(move || -> io::Result<(NetNs, Vec<TcpListener>)> {
                // SAFETY: only the network namespace is unshared (not the file table, the
                // hazard `unshare_unsafe` documents), and only on this thread of our own.
                unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }
                    .map_err(|e| io::Error::new(e.kind(), format!("unshare(CLONE_NEWNET): {e}")))?;
                loopback_up()
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot bring lo up: {e}")))?;
                let foreign = non_loopback_interfaces()?;
                if !foreign.is_empty() {
                    return Err(io::Error::other(format!(
                        "the new network namespace has interfaces other than lo: {}",
                        foreign.join(", ")
                    )));
                }
                let fd = rustix::fs::open(
                    "/proc/thread-self/ns/net",
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
                .map_err(|e| io::Error::new(e.kind(), format!("/proc/thread-self/ns/net: {e}")))?;
                let listeners = (0..count)
                    .map(|_| TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))
                    .collect::<io::Result<Vec<_>>>()?;
                Ok((NetNs { fd: Arc::new(fd) }, listeners))
            })?
            .join()
            .map_err(|_| io::Error::other("the namespace thread panicked"))?
    }

    /// Moves the calling process into this namespace; for `pre_exec`, between fork and exec
    /// (`setns` is async-signal-safe and allocates nothing).
    pub fn enter(&self) -> io::Result<()> {
        rustix::thread::move_into_link_name_space(
            self.fd.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .map_err(io::Error::from)
    }
}

/// `ip link set lo up` for the calling thread's namespace, without a process: SIOCGIFFLAGS,
/// then SIOCSIFFLAGS with IFF_UP.
fn loopback_up() -> io::Result<()> {
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    // SAFETY: plain syscalls on a socket this function owns and a zeroed `ifreq` (a C struct
    // for which all-zero is valid) carrying the NUL-terminated name "lo".
    unsafe {
        let raw = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let socket = OwnedFd::from_raw_fd(raw);
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *to = *from as libc::c_char;
        }
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) < 0 {
            return Err(io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Why proxy agents cannot be isolated on this machine, if they cannot.
pub fn unavailable() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some(
            "attach = \"proxy\" runs the agent in a private network namespace (so a request \
             that ignores the proxy cannot reach the real 168.63.129.16), which needs root"
                .into(),
        );
    }
    None
}

/// Interface names of the calling thread's network namespace other than `lo`.
fn non_loopback_interfaces() -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    Ok(text
        .lines()
        .skip(2)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .filter(|name| !name.is_empty() && name != "lo")
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;
    use std::process::Command;

    /// Root only (CI runs as root): a child that joined the namespace sees nothing but `lo`
    /// and reaches a listener bound inside it, while this thread stays where it was.
    #[test]
    fn children_join_a_namespace_with_only_loopback() {
        if let Some(why) = unavailable() {
            assert!(why.contains("needs root"), "{why}");
            return;
        }
        let before = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let (ns, listeners) = NetNs::with_loopback_listeners(2).unwrap();
        assert_eq!(listeners.len(), 2);
        let port = listeners[1].local_addr().unwrap().port();
        let mut cmd = Command::new("bash");
        cmd.args([
            "-c",
            &format!("cat /proc/self/net/dev; exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
        ]);
        let joined = ns.clone();
        // SAFETY: `enter` only calls setns(2).
        unsafe {
            cmd.pre_exec(move || joined.enter());
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let names: Vec<&str> = text
            .lines()
            .skip(2)
            .filter_map(|l| l.split_once(':'))
            .map(|(n, _)| n.trim())
            .collect();
        assert_eq!(names, ["lo"], "{text}");
        assert!(text.contains("connected"), "{text}");
        assert_eq!(
            std::fs::read_link("/proc/thread-self/ns/net").unwrap(),
            before
        );
    }
}
