//! A private network namespace for agents the runner starts in-process (`attach = "url"` and
//! `"proxy"`): its only interface is `lo`, the fake's listeners are bound inside it, and the
//! agent's processes join it before they exec. Every case has its own, so an agent cannot
//! reach a neighbour's fake (a forged report to another case's port finds nothing there).
//!
//! Proxy agents are given the real addresses (168.63.129.16, 169.254.169.254) and `http_proxy`;
//! one that ignored the proxy, or a url agent that fell back to the well-known address when its
//! loopback URL refused, would, in the host's namespace, send its report to the real wireserver
//! of the machine wirecheck runs on (an Azure CI runner has one). Inside this namespace such a
//! request fails with "network unreachable" and nothing leaves the machine, while the agent
//! still talks to the fake's own sockets: no relay, so resets, hangs and partial answers reach
//! it exactly as the fake acts them out.
//!
//! As root, a short-lived thread of its own unshares the network namespace, brings `lo` up,
//! binds the listeners and keeps a handle to the namespace, so no runtime thread ever moves.
//! Without root, a forked child makes a user namespace (mapping only the caller's own uid and
//! gid) with a network namespace inside, binds the listeners there and hands them and both
//! namespaces back over a socket (`SCM_RIGHTS`); the agent then joins the user namespace
//! first. Whether this machine allows it is asked once, by [`crate::containment`].

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// A network namespace that lives while this handle (or a socket bound in it) does, with the
/// user namespace that owns it when it was made without root.
#[derive(Debug, Clone)]
pub struct NetNs {
    fd: Arc<OwnedFd>,
    user: Option<Arc<OwnedFd>>,
}

impl NetNs {
    /// A new namespace with `lo` up, and `count` listeners bound on `127.0.0.1:0` inside it.
    pub fn with_loopback_listeners(count: usize) -> io::Result<(NetNs, Vec<TcpListener>)> {
        if rustix::process::geteuid().is_root() {
            Self::privileged(count)
        } else {
            Self::in_user_namespace(count)
        }
    }

    /// Whether joining this namespace also joins a user namespace of our own (no root).
    pub fn has_user_namespace(&self) -> bool {
        self.user.is_some()
    }

    fn privileged(count: usize) -> io::Result<(NetNs, Vec<TcpListener>)> {
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
                Ok((
                    NetNs {
                        fd: Arc::new(fd),
                        user: None,
                    },
                    listeners,
                ))
            })?
            .join()
            .map_err(|_| io::Error::other("the namespace thread panicked"))?
    }

    /// Without root: a forked child unshares a user namespace (mapping only our own uid and
    /// gid) and a network namespace, brings `lo` up, binds the listeners and sends them back
    /// with both namespaces over a socket pair.
    pub(crate) fn in_user_namespace(count: usize) -> io::Result<(NetNs, Vec<TcpListener>)> {
        use std::os::fd::AsRawFd as _;
        if count > MAX_LISTENERS {
            return Err(io::Error::other(format!(
                "at most {MAX_LISTENERS} listeners per namespace"
            )));
        }
        // Everything the child needs is made before the fork: after it, only system calls.
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        let uid_map = format!("{uid} {uid} 1\n");
        let gid_map = format!("{gid} {gid} 1\n");
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let fd_count = count + 2;
        // SAFETY: CMSG_SPACE is arithmetic.
        let space =
            unsafe { libc::CMSG_SPACE((fd_count * std::mem::size_of::<libc::c_int>()) as u32) };
        let mut control = vec![0u8; space as usize];
        // SAFETY: the child runs only async-signal-safe system calls on memory made before
        // the fork (no allocation, no lock), then `_exit`s; it never returns into Rust code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above.
            let code = unsafe {
                userns_child(
                    theirs.as_raw_fd(),
                    count,
                    uid_map.as_bytes(),
                    gid_map.as_bytes(),
                    &mut control,
                )
            };
            // SAFETY: ends the child without running destructors or atexit handlers.
            unsafe { libc::_exit(code) }
        }
        drop(theirs);
        let received = receive_fds(&ours, fd_count, &mut control);
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let mut fds = received?.into_iter();
        let (Some(user), Some(net)) = (fds.next(), fds.next()) else {
            return Err(io::Error::other("the namespace helper sent no namespaces"));
        };
        let listeners = fds.map(TcpListener::from).collect::<Vec<_>>();
        if listeners.len() != count {
            return Err(io::Error::other(
                "the namespace helper sent too few listeners",
            ));
        }
        Ok((
            NetNs {
                fd: Arc::new(net),
                user: Some(Arc::new(user)),
            },
            listeners,
        ))
    }

    /// Runs `make` on a thread of its own inside this namespace, for what must be made there
    /// (a socket belongs to the namespace it was made in). Only for a namespace made by root:
    /// joining the user namespace of one made without root needs a single-threaded process.
    pub fn make_inside<T: Send + 'static>(
        &self,
        make: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        if self.user.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a namespace made without root is joined only by a single-threaded process",
            ));
        }
        let fd = self.fd.clone();
        std::thread::Builder::new()
            .name("wirecheck-netns-make".into())
            .spawn(move || {
                rustix::thread::move_into_link_name_space(
                    fd.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .map_err(io::Error::from)?;
                make()
            })?
            .join()
            .map_err(|_| io::Error::other("the thread making it panicked"))?
    }

    /// Moves the calling process into this namespace (its user namespace first); for
    /// `pre_exec`, between fork and exec (`setns` is async-signal-safe and allocates nothing;
    /// joining a user namespace needs a single-threaded process, which a forked child is).
    pub fn enter(&self) -> io::Result<()> {
        if let Some(user) = &self.user {
            rustix::thread::move_into_link_name_space(
                user.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::User),
            )
            .map_err(io::Error::from)?;
        }
        rustix::thread::move_into_link_name_space(
            self.fd.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .map_err(io::Error::from)
    }
}

/// Listeners one namespace can be made with.
const MAX_LISTENERS: usize = 8;

/// The forked child of [`NetNs::in_user_namespace`]: returns its exit status. Sends a 4-byte
/// status (0, or the errno of the step that failed) and, on success, the user namespace, the
/// network namespace and `count` listening sockets.
///
/// # Safety
/// Only for a freshly forked child: it makes system calls only, on memory that exists already.
unsafe fn userns_child(
    socket: libc::c_int,
    count: usize,
    uid_map: &[u8],
    gid_map: &[u8],
    control: &mut [u8],
) -> libc::c_int {
    let fail = |socket: libc::c_int| -> libc::c_int {
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL);
        let bytes = errno.to_ne_bytes();
        // SAFETY: a plain write of 4 bytes on our socket.
        unsafe { libc::write(socket, bytes.as_ptr().cast(), bytes.len()) };
        1
    };
    // SAFETY: system calls on our own process and on buffers that live through the calls.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
            return fail(socket);
        }
        for (path, text) in [
            (c"/proc/self/setgroups", b"deny".as_slice()),
            (c"/proc/self/uid_map", uid_map),
            (c"/proc/self/gid_map", gid_map),
        ] {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::write(fd, text.as_ptr().cast(), text.len()) != text.len() as isize {
                return fail(socket);
            }
            libc::close(fd);
        }
        if loopback_up().is_err() {
            return fail(socket);
        }
        let mut fds = [-1 as libc::c_int; MAX_LISTENERS + 2];
        for (slot, path) in fds
            .iter_mut()
            .zip([c"/proc/self/ns/user", c"/proc/self/ns/net"])
        {
            *slot = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if *slot < 0 {
                return fail(socket);
            }
        }
        for slot in fds.iter_mut().skip(2).take(count) {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                return fail(socket);
            }
            let one: libc::c_int = 1;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            if libc::bind(
                fd,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) != 0
                || libc::listen(fd, 1024) != 0
            {
                return fail(socket);
            }
            *slot = fd;
        }
        let sent = &fds[..count + 2];
        let status = 0i32.to_ne_bytes();
        let mut iov = libc::iovec {
            iov_base: status.as_ptr() as *mut libc::c_void,
            iov_len: status.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return fail(socket);
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(sent) as u32) as _;
        std::ptr::copy_nonoverlapping(
            sent.as_ptr(),
            libc::CMSG_DATA(cmsg).cast::<libc::c_int>(),
            sent.len(),
        );
        if libc::sendmsg(socket, &msg, 0) < 0 {
            return fail(socket);
        }
        0
    }
}

/// Receives [`userns_child`]'s status and `count` file descriptors (close-on-exec).
fn receive_fds(
    socket: &std::os::unix::net::UnixStream,
    count: usize,
    control: &mut [u8],
) -> io::Result<Vec<OwnedFd>> {
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    let mut status = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: status.as_mut_ptr().cast(),
        iov_len: status.len(),
    };
    // SAFETY: recvmsg into buffers that live through the call; the descriptors it hands over
    // are ours to own.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        let n = libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        let errno = i32::from_ne_bytes(status);
        if n < 4 {
            return Err(io::Error::other(
                "the namespace helper ended without an answer",
            ));
        }
        if errno != 0 {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if fds.len() != count {
            return Err(io::Error::other(format!(
                "the namespace helper sent {} descriptors, {count} expected",
                fds.len()
            )));
        }
        Ok(fds)
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

    /// A child that joined `ns` sees nothing but `lo` and reaches `listener`, bound inside
    /// it; the caller stays where it was.
    fn assert_joined(ns: &NetNs, listener: &TcpListener) {
        let before = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let port = listener.local_addr().unwrap().port();
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

    /// The namespace as this user gets it (root: the privileged one; otherwise inside a user
    /// namespace of our own), where this machine allows it.
    #[test]
    fn children_join_a_namespace_with_only_loopback() {
        if let Some(why) = crate::containment::unavailable() {
            assert!(why.contains("refuses"), "{why}");
            return;
        }
        let (ns, listeners) = NetNs::with_loopback_listeners(2).unwrap();
        assert_eq!(listeners.len(), 2);
        assert_joined(&ns, &listeners[1]);
    }

    /// The unprivileged path, also when the tests run as root (CI): the user namespace maps
    /// only our own ids, and the child joins it before the network namespace.
    #[test]
    fn a_namespace_made_inside_a_user_namespace_is_joined_the_same_way() {
        let (ns, listeners) = match NetNs::in_user_namespace(3) {
            Ok(made) => made,
            // A machine that refuses unprivileged user namespaces says so in `containment::unavailable`.
            Err(e) if !rustix::process::geteuid().is_root() => {
                assert!(crate::containment::unavailable().is_some(), "{e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert!(ns.has_user_namespace());
        assert_eq!(listeners.len(), 3);
        for l in &listeners {
            assert_eq!(l.local_addr().unwrap().ip().to_string(), "127.0.0.1");
        }
        assert_joined(&ns, &listeners[2]);
        assert!(NetNs::in_user_namespace(MAX_LISTENERS + 1).is_err());
    }
}
