//! Preloaded into an agent whose clock runs `WIRECHECK_AGENT_CLOCK_SCALE` times faster, before
//! libfaketime (`fake_wireserver::clock::agent_env`). libfaketime scales the agent's clocks,
//! sleeps and poll/epoll/socket timeouts, but Debian's 0.9.10 passes two waits to the kernel
//! with a deadline read off the agent's sped-up clock, which the kernel reads off the real one:
//! `sem_clockwait` (every timed wait of Python's `threading`: `Event.wait`, `Lock.acquire`,
//! `Condition.wait`, `queue.get`) and `pthread_cond_clockwait` (C++'s `wait_until`;
//! libfaketime issue #469). Such a wait then lasts years: WALinuxAgent's daemon hangs in its
//! first `Event.wait(timeout)`. Here each such deadline is moved onto the real monotonic clock:
//! what remains of it on the agent's clock, divided by the scale, from now.
//!
//! Rust's standard library makes the futex system call itself, through `syscall(3)`, with a
//! deadline read off the agent's `CLOCK_MONOTONIC` (every `Condvar::wait_timeout`,
//! `thread::park_timeout` and `mpsc::recv_timeout`: reqwest's blocking client waits for its
//! answer so). `syscall` is interposed too: a futex wait's deadline is moved the same way, a
//! relative timeout divided by the scale, and every other call passes through unchanged. Its
//! definition takes the six argument registers a variadic call fills (x86_64 and aarch64 pass
//! variadic integer arguments as they pass fixed ones).
//!
//! Nothing else is touched; without the variable (or with a scale of 1) the waits pass through
//! unchanged.

use std::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use libc::{clockid_t, pthread_cond_t, pthread_mutex_t, sem_t, timespec};

/// The variable giving the agent's speed (agent seconds per wall second).
const SCALE_VAR: &CStr = c"WIRECHECK_AGENT_CLOCK_SCALE";

const NS_PER_S: i128 = 1_000_000_000;

/// The agent's speed, read once (1 when unset or unreadable). No `std::sync` here or below:
/// its waits are futex calls through `syscall`, which this library defines, so a thread
/// waiting for another's initialisation would call back into it. A race only reads the
/// variable twice.
fn scale() -> i128 {
    static SCALE: AtomicI64 = AtomicI64::new(0);
    let known = SCALE.load(Ordering::Relaxed);
    if known > 0 {
        return i128::from(known);
    }
    // SAFETY: getenv of a constant name; the value is copied before anything else runs.
    let value = unsafe { libc::getenv(SCALE_VAR.as_ptr()) };
    let read = if value.is_null() {
        1
    } else {
        // SAFETY: getenv returned a NUL-terminated string.
        let value = unsafe { CStr::from_ptr(value) };
        value
            .to_str()
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|s| (1..=1000).contains(s))
            .unwrap_or(1)
    };
    SCALE.store(read, Ordering::Relaxed);
    i128::from(read)
}

fn ns(t: &timespec) -> i128 {
    i128::from(t.tv_sec) * NS_PER_S + i128::from(t.tv_nsec)
}

fn timespec_of(ns: i128) -> timespec {
    timespec {
        tv_sec: (ns / NS_PER_S) as libc::time_t,
        tv_nsec: (ns % NS_PER_S) as libc::c_long,
    }
}

/// `deadline`, on the agent's `clock`, as a deadline on the real monotonic clock.
///
/// # Safety
/// `deadline` points at a valid timespec.
unsafe fn real_deadline(clock: clockid_t, deadline: *const timespec) -> timespec {
    let mut agent_now = timespec_of(0);
    let mut real_now = timespec_of(0);
    // SAFETY: both point at timespecs owned here. The first call goes to libfaketime's
    // clock_gettime (the agent's clock); the second is the system call, which nothing fakes.
    unsafe {
        libc::clock_gettime(clock, &mut agent_now);
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC,
            &mut real_now,
        );
    }
    // SAFETY: the caller's promise.
    let remaining = (ns(unsafe { &*deadline }) - ns(&agent_now)).max(0);
    timespec_of(ns(&real_now) + remaining / scale())
}

/// The next definition of `name` after this library (the C library's), looked up once into
/// `cache` (0: not yet; a race looks it up twice, to the same address).
fn next(name: &CStr, cache: &AtomicUsize) -> usize {
    let known = cache.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    // SAFETY: dlsym with a NUL-terminated name.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    cache.store(found, Ordering::Relaxed);
    found
}

type Syscall = unsafe extern "C" fn(libc::c_long, ...) -> libc::c_long;

/// The futex operations that wait with a timeout, and how the kernel reads it.
const FUTEX_WAIT: libc::c_long = 0;
const FUTEX_WAIT_BITSET: libc::c_long = 9;
const FUTEX_CMD_MASK: libc::c_long = !(128 | 256);
const FUTEX_CLOCK_REALTIME: libc::c_long = 256;

/// The C library's `syscall`, found once.
fn next_syscall() -> Option<Syscall> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let next = next(c"syscall", &NEXT);
    // SAFETY: the C library's syscall has this signature.
    (next != 0).then(|| unsafe { std::mem::transmute::<usize, Syscall>(next) })
}

/// `syscall(2)`: a futex wait's timeout moved onto the real clock, everything else unchanged.
///
/// # Safety
/// As `syscall(2)`; a caller passing fewer arguments leaves the rest as whatever its registers
/// hold, which is passed on as the C library's own `syscall` would.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    number: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    a4: libc::c_long,
    a5: libc::c_long,
    a6: libc::c_long,
) -> libc::c_long {
    let Some(next) = next_syscall() else {
        // SAFETY: sets errno of this thread.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    };
    let timeout = a4 as *const timespec;
    let waits = number == libc::SYS_futex && !timeout.is_null() && scale() > 1;
    if waits {
        // The operation is an int: the upper half of its register is whatever it was.
        let op = libc::c_long::from(a2 as i32);
        let cmd = op & FUTEX_CMD_MASK;
        let moved = if cmd == FUTEX_WAIT {
            // Relative: agent seconds, divided.
            // SAFETY: the caller's timeout, a valid timespec by the futex contract.
            Some((op, timespec_of(ns(unsafe { &*timeout }).max(0) / scale())))
        } else if cmd == FUTEX_WAIT_BITSET {
            // Absolute, on the agent's monotonic or (flagged) real-time clock: moved onto the
            // real monotonic clock, the flag cleared.
            let clock = if op & FUTEX_CLOCK_REALTIME != 0 {
                libc::CLOCK_REALTIME
            } else {
                libc::CLOCK_MONOTONIC
            };
            // SAFETY: as above.
            Some((op & !FUTEX_CLOCK_REALTIME, unsafe {
                real_deadline(clock, timeout)
            }))
        } else {
            // The PI operations' timeouts (and futex_waitv, another call) pass unchanged.
            None
        };
        if let Some((op, moved)) = moved {
            // SAFETY: the caller's futex call with a timeout owned here.
            return unsafe { next(number, a1, op, a3, &moved as *const timespec, a5, a6) };
        }
    }
    // SAFETY: the caller's arguments, unchanged.
    unsafe { next(number, a1, a2, a3, a4, a5, a6) }
}

type SemClockwait = unsafe extern "C" fn(*mut sem_t, clockid_t, *const timespec) -> c_int;
type CondClockwait = unsafe extern "C" fn(
    *mut pthread_cond_t,
    *mut pthread_mutex_t,
    clockid_t,
    *const timespec,
) -> c_int;

/// `sem_clockwait(3)`, its deadline moved onto the real clock.
///
/// # Safety
/// As `sem_clockwait(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sem_clockwait(
    sem: *mut sem_t,
    clock: clockid_t,
    deadline: *const timespec,
) -> c_int {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let next = next(c"sem_clockwait", &NEXT);
    if next == 0 {
        // SAFETY: sets errno of this thread.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    }
    // SAFETY: `next` is the C library's sem_clockwait.
    let next: SemClockwait = unsafe { std::mem::transmute(next) };
    if deadline.is_null() || scale() == 1 {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { next(sem, clock, deadline) };
    }
    // SAFETY: the caller's promise that `deadline` is valid.
    let real = unsafe { real_deadline(clock, deadline) };
    // SAFETY: the caller's semaphore, a deadline owned here.
    unsafe { next(sem, libc::CLOCK_MONOTONIC, &real) }
}

/// `pthread_cond_clockwait(3)`, its deadline moved onto the real clock.
///
/// # Safety
/// As `pthread_cond_clockwait(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_clockwait(
    cond: *mut pthread_cond_t,
    mutex: *mut pthread_mutex_t,
    clock: clockid_t,
    deadline: *const timespec,
) -> c_int {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let next = next(c"pthread_cond_clockwait", &NEXT);
    if next == 0 {
        return libc::ENOSYS;
    }
    // SAFETY: `next` is the C library's pthread_cond_clockwait.
    let next: CondClockwait = unsafe { std::mem::transmute(next) };
    if deadline.is_null() || scale() == 1 {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { next(cond, mutex, clock, deadline) };
    }
    // SAFETY: the caller's promise that `deadline` is valid.
    let real = unsafe { real_deadline(clock, deadline) };
    // SAFETY: the caller's condition and mutex, a deadline owned here.
    unsafe { next(cond, mutex, libc::CLOCK_MONOTONIC, &real) }
}
