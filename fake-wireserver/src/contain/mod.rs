//! What every contained agent gets just before it execs, whoever starts it (wirecheck's runner
//! for `url`/`proxy` agents, `fake-wireserver sandbox --unprivileged` for sandbox agents):
//!
//! * an identity that is not the host's root ([`userns::UnprivilegedRoot`]): an agent started
//!   by root runs as root of a user namespace of its own whose root is nobody (65534) on the
//!   host, so it reads and writes only what any local user could;
//! * no capabilities and `no_new_privs` ([`drop_capabilities`]);
//! * the system-call filter ([`seccomp`]): no io_uring, keyrings, Unix or vsock sockets, new
//!   namespaces, mounts, and the rest container runtimes refuse by default.
//!
//! All of it runs between fork and exec: system calls only, on memory made before the fork.

pub mod seccomp;
pub mod userns;

/// In the agent, just before exec: no capabilities now or after exec, whatever its uid (root
/// included: uid 0 then gets none from the emptied bounding set), and no way to gain any
/// (`no_new_privs`: set-uid programs do not elevate). An agent run as root can then neither
/// undo its mounts, nor mount a `/proc` of the host, nor join another namespace.
///
/// # Safety
/// Only between fork and exec: system calls only.
pub unsafe fn drop_capabilities() -> std::io::Result<()> {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl(2) and capset(2) on our own process, with structures that live through
    // the calls.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        for cap in 0..64 {
            // EINVAL past the kernel's last capability.
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// For an agent provisioning a guest, root of its guest namespace
/// ([`userns::UnprivilegedRoot::new_guest`]): `no_new_privs` and the [`seccomp`] filter, its
/// capabilities kept. They hold only in its own namespace (files of the ids it maps, its own
/// host name), which it needs to create users and hand them homes; on the host it is nobody.
///
/// # Safety
/// Only between fork and exec: system calls only.
pub unsafe fn lock_down_guest() -> std::io::Result<()> {
    // SAFETY: prctl(2) on our own process; the caller is between fork and exec.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        seccomp::install()
    }
}

/// [`drop_capabilities`], then the [`seccomp`] filter: the last steps before exec.
///
/// # Safety
/// Only between fork and exec: system calls only.
pub unsafe fn lock_down() -> std::io::Result<()> {
    // SAFETY: the caller is between fork and exec.
    unsafe {
        drop_capabilities()?;
        seccomp::install()
    }
}
