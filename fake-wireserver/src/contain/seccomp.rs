//! The system-call filter every contained agent execs under (seccomp, installed after
//! `no_new_privs`; inherited by everything it starts, and it cannot be removed).
//!
//! Refused with EPERM, as container runtimes refuse them by default (Docker's default profile
//! is the reference):
//!
//! * io_uring (`io_uring_setup`, `_enter`, `_register`): its operations never pass through this
//!   filter, so a ring's `IORING_OP_SOCKET` would make the Unix socket `socket()` may not;
//! * the kernel keyrings (`add_key`, `keyctl`, `request_key`): a key would outlive the case
//!   and the run, and be shared by everything run as the same user;
//! * `bpf`, `userfaultfd`, `perf_event_open`: kernel attack surface no agent needs;
//! * kernels and modules (`kexec_*`, `init_module`, `finit_module`, `delete_module`), swap,
//!   `reboot`, `acct`, the clocks (`settimeofday`, `clock_settime`, `clock_adjtime`) and the
//!   kernel log (`syslog`);
//! * `open_by_handle_at` (a file by its handle, past every mount that hides it), `ptrace`,
//!   `process_vm_readv` / `_writev`;
//! * every mount call (`mount`, `umount2`, `pivot_root`, the `fsopen` family, `open_tree`,
//!   `move_mount`, `mount_setattr`), `setns`, and `unshare` or `clone` with a namespace flag: a
//!   namespace of its own would give the agent capabilities again (over that namespace);
//!   `clone3`, whose flags a filter cannot read, fails with ENOSYS, so C libraries fall back to
//!   `clone`.
//!
//! Refused with EACCES: `socket(AF_UNIX)` (a read-only mount does not stop a `connect()` to a
//! named socket, and the machine's lead out of every namespace: Docker's, systemd's, D-Bus's;
//! `socketpair` stays allowed) and `socket(AF_VSOCK)` (the hypervisor's, off the machine), and
//! every system call of another architecture than the native one (a 32-bit `int 0x80`, x32).
//!
//! The program is built at compile time (no allocation between fork and exec) from the
//! native architecture's numbers (`libc::SYS_*`, x86_64 or aarch64) and checks
//! `AUDIT_ARCH_*` first.

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instruction {
    /// The operation (`BPF_LD | BPF_W | BPF_ABS`, ...).
    pub code: u16,
    /// Instructions skipped when a jump's condition holds.
    pub jt: u8,
    /// Instructions skipped when it does not.
    pub jf: u8,
    /// The operand.
    pub k: u32,
}

/// The native architecture as seccomp names it (`AUDIT_ARCH_*` of `<linux/audit.h>`).
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xC000_00B7;

/// x32 system calls (x86_64 only) carry this bit in their number.
const X32_BIT: u32 = 0x4000_0000;

/// Refused with EPERM whatever their arguments.
pub const REFUSED: [libc::c_long; 37] = [
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_add_key,
    libc::SYS_keyctl,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_syslog,
    libc::SYS_open_by_handle_at,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
];

/// Socket families refused with EACCES.
pub const REFUSED_FAMILIES: [libc::c_int; 2] = [libc::AF_UNIX, libc::AF_VSOCK];

/// The namespace flags of `clone` (its low byte is the exit signal, so no `CLONE_NEWTIME`).
pub const CLONE_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;
/// `CLONE_NEWTIME` of `<linux/sched.h>` (not in the libc crate for glibc targets).
pub const CLONE_NEWTIME: u32 = 0x80;
/// The namespace flags of `unshare`.
pub const UNSHARE_NAMESPACES: u32 = CLONE_NAMESPACES | CLONE_NEWTIME;

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// `SECCOMP_RET_ALLOW`.
pub const ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_ERRNO` with `errno`.
pub const fn refuse(errno: libc::c_int) -> u32 {
    0x0005_0000 | errno as u32
}

// `struct seccomp_data`: nr at 0, arch at 4, args[0] at 16 (its low half: little-endian).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;
#[cfg(not(target_endian = "little"))]
compile_error!("the filter reads the low half of args[0] at offset 16: little-endian only");

// Where each part of the program starts.
const CHECKS: usize = 5;
const SPECIAL: usize = CHECKS + REFUSED.len();
const SOCKET: usize = SPECIAL + 5;
const CLONE: usize = SOCKET + 2 + REFUSED_FAMILIES.len();
const UNSHARE: usize = CLONE + 3;
const EPERM_AT: usize = UNSHARE + 3;
const EACCES_AT: usize = EPERM_AT + 1;
const ENOSYS_AT: usize = EACCES_AT + 1;
/// Instructions in the program.
pub const LENGTH: usize = ENOSYS_AT + 1;

const fn op(code: u16, k: u32, jt: u8, jf: u8) -> Instruction {
    Instruction { code, jt, jf, k }
}

/// The jump offset from the instruction at `at` to the one at `to`.
const fn to(at: usize, to: usize) -> u8 {
    assert!(to > at && to - at - 1 <= u8::MAX as usize);
    (to - at - 1) as u8
}

/// Jump to `target` when the accumulator equals `k`, else go on.
const fn when(at: usize, k: u32, target: usize) -> Instruction {
    op(JEQ_K, k, to(at, target), 0)
}

const fn build() -> [Instruction; LENGTH] {
    let mut p = [op(RET_K, ALLOW, 0, 0); LENGTH];
    p[0] = op(LD_W_ABS, ARCH, 0, 0);
    p[1] = op(JEQ_K, AUDIT_ARCH, 1, 0);
    p[2] = op(RET_K, refuse(libc::EACCES), 0, 0);
    p[3] = op(LD_W_ABS, NR, 0, 0);
    p[4] = op(JGE_K, X32_BIT, to(4, EACCES_AT), 0);
    let mut i = 0;
    while i < REFUSED.len() {
        p[CHECKS + i] = when(CHECKS + i, REFUSED[i] as u32, EPERM_AT);
        i += 1;
    }
    p[SPECIAL] = when(SPECIAL, libc::SYS_socket as u32, SOCKET);
    p[SPECIAL + 1] = when(SPECIAL + 1, libc::SYS_clone as u32, CLONE);
    p[SPECIAL + 2] = when(SPECIAL + 2, libc::SYS_unshare as u32, UNSHARE);
    p[SPECIAL + 3] = when(SPECIAL + 3, libc::SYS_clone3 as u32, ENOSYS_AT);
    p[SPECIAL + 4] = op(RET_K, ALLOW, 0, 0);
    p[SOCKET] = op(LD_W_ABS, ARG0_LOW, 0, 0);
    let mut f = 0;
    while f < REFUSED_FAMILIES.len() {
        let at = SOCKET + 1 + f;
        p[at] = when(at, REFUSED_FAMILIES[f] as u32, EACCES_AT);
        f += 1;
    }
    p[SOCKET + 1 + REFUSED_FAMILIES.len()] = op(RET_K, ALLOW, 0, 0);
    p[CLONE] = op(LD_W_ABS, ARG0_LOW, 0, 0);
    p[CLONE + 1] = op(JSET_K, CLONE_NAMESPACES, to(CLONE + 1, EPERM_AT), 0);
    p[CLONE + 2] = op(RET_K, ALLOW, 0, 0);
    p[UNSHARE] = op(LD_W_ABS, ARG0_LOW, 0, 0);
    p[UNSHARE + 1] = op(JSET_K, UNSHARE_NAMESPACES, to(UNSHARE + 1, EPERM_AT), 0);
    p[UNSHARE + 2] = op(RET_K, ALLOW, 0, 0);
    p[EPERM_AT] = op(RET_K, refuse(libc::EPERM), 0, 0);
    p[EACCES_AT] = op(RET_K, refuse(libc::EACCES), 0, 0);
    p[ENOSYS_AT] = op(RET_K, refuse(libc::ENOSYS), 0, 0);
    p
}

/// The agent filter, built at compile time.
pub static PROGRAM: [Instruction; LENGTH] = build();

/// Installs [`PROGRAM`] on the calling thread (and everything it execs or starts). Needs
/// `no_new_privs` (or `CAP_SYS_ADMIN`) first.
///
/// # Safety
/// Async-signal-safe (one `prctl`, no allocation): for use between fork and exec.
pub unsafe fn install() -> std::io::Result<()> {
    #[repr(C)]
    struct Fprog {
        len: u16,
        filter: *const Instruction,
    }
    let prog = Fprog {
        len: LENGTH as u16,
        filter: PROGRAM.as_ptr(),
    };
    // SAFETY: the program is static and the call copies it.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const Fprog,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What the filter answers for one system call: a classic-BPF interpreter of the instructions
/// [`PROGRAM`] uses, over `struct seccomp_data`'s fields (for tests).
pub fn verdict(arch: u32, nr: u32, arg0: u64) -> u32 {
    let word = |offset: u32| match offset {
        NR => nr,
        ARCH => arch,
        ARG0_LOW => arg0 as u32,
        other => panic!("the filter reads offset {other}"),
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let Instruction { code, jt, jf, k } = PROGRAM[pc];
        let jump = |taken: bool| pc + 1 + usize::from(if taken { jt } else { jf });
        pc = match code {
            LD_W_ABS => {
                acc = word(k);
                pc + 1
            }
            JEQ_K => jump(acc == k),
            JGE_K => jump(acc >= k),
            JSET_K => jump(acc & k != 0),
            RET_K => return k,
            other => panic!("instruction {other:#x} at {pc}"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(nr: libc::c_long, arg0: u64) -> u32 {
        verdict(AUDIT_ARCH, nr as u32, arg0)
    }

    #[test]
    fn every_refused_system_call_gets_eperm_and_ordinary_ones_pass() {
        for nr in REFUSED {
            assert_eq!(call(nr, 0), refuse(libc::EPERM), "system call {nr}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_connect,
            libc::SYS_socketpair,
            libc::SYS_exit_group,
        ] {
            assert_eq!(call(nr, 0), ALLOW, "system call {nr}");
        }
    }

    #[test]
    fn unix_and_vsock_sockets_are_refused_inet_ones_are_not() {
        assert_eq!(
            call(libc::SYS_socket, libc::AF_UNIX as u64),
            refuse(libc::EACCES)
        );
        assert_eq!(
            call(libc::SYS_socket, libc::AF_VSOCK as u64),
            refuse(libc::EACCES)
        );
        for family in [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK] {
            assert_eq!(call(libc::SYS_socket, family as u64), ALLOW);
        }
    }

    #[test]
    fn new_namespaces_are_refused_forks_and_threads_are_not() {
        let fork = libc::SIGCHLD as u64;
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(call(libc::SYS_clone, fork), ALLOW);
        assert_eq!(call(libc::SYS_clone, thread), ALLOW);
        assert_eq!(call(libc::SYS_unshare, libc::CLONE_FILES as u64), ALLOW);
        for flag in [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWCGROUP,
        ] {
            assert_eq!(
                call(libc::SYS_clone, fork | flag as u64),
                refuse(libc::EPERM)
            );
            assert_eq!(call(libc::SYS_unshare, flag as u64), refuse(libc::EPERM));
        }
        assert_eq!(
            call(libc::SYS_unshare, u64::from(CLONE_NEWTIME)),
            refuse(libc::EPERM)
        );
        assert_eq!(call(libc::SYS_clone3, 0), refuse(libc::ENOSYS));
    }

    #[test]
    fn another_architectures_calls_and_x32_calls_are_refused() {
        const AUDIT_ARCH_I386: u32 = 0x4000_0003;
        assert_eq!(verdict(AUDIT_ARCH_I386, 3, 0), refuse(libc::EACCES));
        assert_eq!(
            verdict(AUDIT_ARCH, libc::SYS_read as u32 | X32_BIT, 0),
            refuse(libc::EACCES)
        );
    }

    /// The numbers come from `libc`; these are the kernel's own tables
    /// (`arch/x86/entry/syscalls/syscall_64.tbl`, `include/uapi/asm-generic/unistd.h`).
    #[test]
    fn the_filter_uses_the_kernels_numbers_for_this_architecture() {
        #[cfg(target_arch = "x86_64")]
        let expected = [
            (libc::SYS_io_uring_setup, 425),
            (libc::SYS_add_key, 248),
            (libc::SYS_keyctl, 250),
            (libc::SYS_socket, 41),
            (libc::SYS_clone, 56),
            (libc::SYS_unshare, 272),
            (libc::SYS_clone3, 435),
        ];
        #[cfg(target_arch = "aarch64")]
        let expected = [
            (libc::SYS_io_uring_setup, 425),
            (libc::SYS_add_key, 217),
            (libc::SYS_keyctl, 219),
            (libc::SYS_socket, 198),
            (libc::SYS_clone, 220),
            (libc::SYS_unshare, 97),
            (libc::SYS_clone3, 435),
        ];
        for (ours, kernels) in expected {
            assert_eq!(ours, kernels);
        }
    }

    /// The filter as the kernel applies it, in a forked child (it cannot be removed again).
    #[test]
    fn a_filtered_process_gets_the_refusals_the_filter_promises() {
        // SAFETY: the child makes system calls only, then `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // Each failed expectation sets one bit of the exit status.
            let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            let mut wrong = 0;
            // SAFETY: system calls on this child only; none of the refused ones succeeds.
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || install().is_err() {
                    libc::_exit(100);
                }
                let mut params = [0u8; 120];
                if libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) >= 0
                    || errno() != libc::EPERM
                {
                    wrong |= 1;
                }
                let key = libc::syscall(
                    libc::SYS_add_key,
                    c"user".as_ptr(),
                    c"wirecheck-seccomp-test".as_ptr(),
                    c"x".as_ptr(),
                    1usize,
                    -4i32, // KEY_SPEC_USER_KEYRING
                );
                if key >= 0 || errno() != libc::EPERM {
                    wrong |= 2;
                }
                if libc::unshare(libc::CLONE_NEWUSER) == 0 || errno() != libc::EPERM {
                    wrong |= 4;
                }
                if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) >= 0 || errno() != libc::EACCES
                {
                    wrong |= 8;
                }
                if libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) < 0 {
                    wrong |= 16;
                }
                libc::_exit(wrong);
            }
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "{status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "bits of what was not refused");
    }
}
