//! When a request really arrived: the kernel's receive time of the bytes that completed its
//! head (`SO_TIMESTAMPNS`), not the moment the fake's task got round to reading them.
//!
//! Under load the fake's tasks run late (a busy runtime, a starved sandbox), and a request
//! stamped when it was read looks later than it was sent: an agent's retry that came too soon
//! could look like a correct wait. The checks had to allow every stall the runner measured
//! around such a stamp, and at agent time each millisecond of it N times over, so a loaded
//! machine left most waits unjudged. The kernel stamps each segment as it is queued to the
//! socket, on loopback within the agent's own `send`: no scheduling delay of the fake's is in
//! it. A read's stamp is its newest segment's: for a head sent with its body, or after it in
//! the same breath, the head's. TCP only: it stamps nothing it did not stamp on arrival (the
//! first requests after the kernel was asked, which turns stamping on in deferred work, come
//! unstamped), where UDP would stamp a datagram when it is read. A stamp is realtime; it
//! becomes an [`Instant`] by its age against the realtime clock now (read between two reads
//! of the monotonic clock, again if they were apart), and is dropped (the caller falls back
//! to its own clock and says the time is not exact) when it is in the future or older than
//! [`MAX_AGE`]: only a step of the realtime clock between the arrival and the read can make
//! it wrong, by that step.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// The oldest stamp believed: a request's bytes wait in the socket until the fake's task reads
/// them, seconds on the worst loaded machine seen, never a minute.
const MAX_AGE: Duration = Duration::from_secs(60);

/// The most two reads of the monotonic clock around one of the realtime clock may be apart
/// for the pair to date a stamp: a preemption in between would make it late by as much.
const CLOCK_PAIR_SPREAD: Duration = Duration::from_micros(200);

/// Asks the kernel to stamp what arrives on `socket`: a listener, whose connections inherit it,
/// or one connection (best effort: without it every read is unstamped, and times are the
/// fake's own). The kernel turns stamping on in deferred work the first time a socket asks,
/// so a listener asks as it is made, before any request: one sent within that moment is
/// unstamped, never mis-stamped.
pub(crate) fn enable(socket: &impl AsFd) {
    let on: libc::c_int = 1;
    // SAFETY: a plain setsockopt on a descriptor `socket` owns, with a c_int option value.
    let _ = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Reads at most `want` bytes into `buf`'s spare capacity; the number read (0: end of stream)
/// and when the last of them arrived, when the kernel said.
pub(crate) async fn read(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    want: usize,
) -> io::Result<(usize, Option<Instant>)> {
    buf.reserve(want);
    loop {
        stream.readable().await?;
        match stream.try_io(Interest::READABLE, || {
            recv_stamped(stream.as_fd(), buf, want)
        }) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            done => return done,
        }
    }
}

/// One `recvmsg` into `buf`'s spare capacity, with room for the timestamp's control message.
fn recv_stamped(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    want: usize,
) -> io::Result<(usize, Option<Instant>)> {
    let spare = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: want.min(spare.len()),
    };
    // u64s: aligned for cmsghdr; room for one timespec message and then some.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; zeroed is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the iovec points into `buf`'s spare capacity of at least `iov_len` bytes, the
    // control buffer is `control`, both alive for the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &raw mut msg, libc::MSG_DONTWAIT) };
    let Ok(n) = usize::try_from(n) else {
        return Err(io::Error::last_os_error());
    };
    debug_assert!(n <= iov.iov_len);
    // SAFETY: the kernel wrote `n` bytes (at most `iov_len`) at the start of the spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Ok((n, stamp_of(&msg).and_then(instant_of)))
}

/// The `SCM_TIMESTAMPNS` message of a `recvmsg` result, if the kernel gave one.
fn stamp_of(msg: &libc::msghdr) -> Option<libc::timespec> {
    let mut stamp = None;
    // SAFETY: `msg` is a msghdr recvmsg filled; the CMSG macros walk its control buffer within
    // `msg_controllen`, and the data is read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                stamp = Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(cmsg).cast::<libc::timespec>(),
                ));
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    stamp
}

/// A realtime stamp as an [`Instant`], by its age now; `None` if it is in the future or older
/// than [`MAX_AGE`].
fn instant_of(stamp: libc::timespec) -> Option<Instant> {
    let secs = u64::try_from(stamp.tv_sec).ok()?;
    let nanos = u32::try_from(stamp.tv_nsec).ok()?;
    let at = UNIX_EPOCH.checked_add(Duration::new(secs, nanos))?;
    let (real_now, now) = clock_pair()?;
    let age = real_now.duration_since(at).ok()?;
    (age <= MAX_AGE).then(|| now.checked_sub(age)).flatten()
}

/// The realtime clock now, and the monotonic clock at the same moment (between two reads at
/// most [`CLOCK_PAIR_SPREAD`] apart; `None` when three tries were preempted).
fn clock_pair() -> Option<(SystemTime, Instant)> {
    (0..3).find_map(|_| {
        let before = Instant::now();
        let real = SystemTime::now();
        let after = Instant::now();
        let spread = after - before;
        (spread <= CLOCK_PAIR_SPREAD).then(|| (real, before + spread / 2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn pair(stamped: bool) -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        if stamped {
            enable(&listener);
        }
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    /// Sends probes until the kernel's deferred switch to stamping is done (bounded).
    async fn stamping_on(client: &mut TcpStream, server: &TcpStream) {
        for _ in 0..100 {
            client.write_all(b"x").await.unwrap();
            let (_, at) = read(server, &mut Vec::new(), 8).await.unwrap();
            if at.is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the kernel never stamped a loopback TCP segment");
    }

    /// The point of the module: bytes read long after they arrived are stamped when they
    /// arrived (the fake's task was busy for 300 ms in between).
    #[tokio::test(flavor = "current_thread")]
    async fn bytes_read_late_are_stamped_when_they_arrived() {
        let (mut client, server) = pair(true).await;
        stamping_on(&mut client, &server).await;
        let sent = Instant::now();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let mut buf = Vec::new();
        let (n, at) = read(&server, &mut buf, 8192).await.unwrap();
        let read_at = Instant::now();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
        let at = at.expect("the kernel stamps loopback TCP");
        assert!(at >= sent - Duration::from_millis(5), "{at:?} {sent:?}");
        assert!(
            at < sent + Duration::from_millis(100),
            "stamped {:?} after the send, read {:?} after it",
            at - sent,
            read_at - sent
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn without_stamps_reads_still_work_unstamped() {
        let (mut client, server) = pair(false).await;
        client.write_all(b"abc").await.unwrap();
        let mut buf = b"x".to_vec();
        let (n, at) = read(&server, &mut buf, 2).await.unwrap();
        assert_eq!((n, at, buf.as_slice()), (2, None, &b"xab"[..]));
        drop(client);
        let (n, _) = read(&server, &mut buf, 8).await.unwrap();
        assert_eq!((n, buf.as_slice()), (1, &b"xabc"[..]));
        let (n, _) = read(&server, &mut buf, 8).await.unwrap();
        assert_eq!(n, 0, "end of stream");
    }

    #[test]
    fn stamps_in_the_future_or_too_old_are_not_believed() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let ts = |d: Duration| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
        };
        assert!(instant_of(ts(now + Duration::from_secs(5))).is_none());
        assert!(instant_of(ts(now - MAX_AGE - Duration::from_secs(5))).is_none());
        let recent = instant_of(ts(now - Duration::from_millis(200))).unwrap();
        let age = Instant::now() - recent;
        assert!(
            age >= Duration::from_millis(200) && age < Duration::from_millis(300),
            "{age:?}"
        );
    }
}
