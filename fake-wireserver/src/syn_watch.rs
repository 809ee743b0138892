//! When an agent tried a host nobody serves. Nothing listens there, so the kernel answers each
//! SYN with a RST and the fake never sees the attempt; a packet socket, behind a classic BPF
//! filter that passes only TCP SYNs to the watched addresses, records when each one arrived
//! (the kernel's receive stamp) on the fake's clock. An agent's retry loop against a refused
//! host is then timed like one against a served host: its start-up (spawn to first attempt),
//! its attempts past a budget. The sandbox watches its `--refuse`d hosts on its `lo`; wirecheck
//! watches a url agent's closed ports inside the agent's network namespace. What the socket
//! dropped, or what came past [`MAX_ATTEMPTS`], is counted (`lost`): a list with any lost is
//! not the whole loop.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::clock::AgentClock;

/// The most attempts recorded (an agent retrying every 5 s for 20 minutes makes 240).
pub const MAX_ATTEMPTS: usize = 20_000;

/// The most packets read once told to stop (the queue then holds what came before).
const MAX_DRAIN: usize = 10_000;

/// How often the watcher looks at its stop flag while no SYN comes.
const POLL: Duration = Duration::from_millis(20);

/// `SIOCGSTAMPNS` (linux/sockios.h): the last packet's receive time, `CLOCK_REALTIME`.
const SIOCGSTAMPNS: libc::c_ulong = 0x8907;
/// `SO_ATTACH_FILTER` (asm-generic/socket.h; the same on x86-64 and arm64).
const SO_ATTACH_FILTER: libc::c_int = 26;
/// `PACKET_STATISTICS` and `PACKET_OUTGOING` (linux/if_packet.h).
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_OUTGOING: u8 = 4;
/// Bytes of each packet kept: an IPv4 header (at most 60) and a TCP header's first 20.
const SNAP: u32 = 80;

/// One connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynAttempt {
    /// When its SYN arrived, on the fake's clock (the journal's `at_ms`).
    pub at_ms: u64,
    /// Where it was going.
    pub to: SocketAddrV4,
}

/// What the watch recorded.
#[derive(Debug, Default)]
pub struct Attempts {
    /// In the order they came.
    pub attempts: Vec<SynAttempt>,
    /// SYNs not recorded: dropped by the socket, or past [`MAX_ATTEMPTS`].
    pub lost: u64,
}

/// The running watch; [`SynWatch::stop`] ends it and hands over what it saw.
/// Dropped without [`SynWatch::stop`] (an error path), its thread ends by itself.
pub struct SynWatch {
    stop: Arc<AtomicBool>,
    /// Attempts kept so far.
    seen: Arc<AtomicU64>,
    thread: Option<JoinHandle<Attempts>>,
}

impl SynWatch {
    /// Watches `socket` (made by [`syn_socket`], in the namespace to watch) on another thread,
    /// timed on `clock`.
    pub fn start(socket: OwnedFd, clock: AgentClock) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicU64::new(0));
        let (flag, count) = (stop.clone(), seen.clone());
        let thread = std::thread::Builder::new()
            .name("syn-watch".into())
            .spawn(move || watch(&socket, (&flag, &count), clock))?;
        Ok(SynWatch {
            stop,
            seen,
            thread: Some(thread),
        })
    }

    /// How many attempts it has seen so far.
    pub fn seen(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }

    /// The count [`SynWatch::seen`] reads, to read from elsewhere.
    pub fn seen_counter(&self) -> Arc<AtomicU64> {
        self.seen.clone()
    }

    /// Stops watching (after the agent is gone) and returns the attempts, in order.
    pub fn stop(mut self) -> Attempts {
        self.stop.store(true, Ordering::Relaxed);
        let joined = self.thread.take().map(JoinHandle::join);
        match joined {
            Some(Ok(seen)) => seen,
            // A watcher that panicked saw an unknown number: not a whole list.
            _ => Attempts {
                attempts: Vec::new(),
                lost: 1,
            },
        }
    }
}

impl Drop for SynWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads SYNs until told to stop, then the ones already queued.
fn watch(
    socket: &OwnedFd,
    (stop, seen_so_far): (&AtomicBool, &AtomicU64),
    clock: AgentClock,
) -> Attempts {
    let mut seen = Attempts::default();
    let mut drained = 0;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping {
            // What came before the stop is queued; a stream that never pauses is not waited
            // out.
            drained += 1;
            if drained > MAX_DRAIN {
                break;
            }
        }
        match next_syn(socket) {
            Some((to, at)) if seen.attempts.len() < MAX_ATTEMPTS => {
                seen.attempts.push(SynAttempt {
                    at_ms: clock.ms(at),
                    to,
                });
                seen_so_far.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => seen.lost += 1,
            // Timed out (or interrupted): nothing queued.
            None if stopping => break,
            None => {}
        }
    }
    seen.lost += u64::from(dropped(socket));
    seen.attempts.sort_by_key(|a| a.at_ms);
    seen
}

/// The most addresses and ports a filter tests (the platform's two hosts, a case's closed
/// ports).
pub const MAX_TARGETS: usize = 4;

/// A packet socket on interface `ifindex` (0: every interface) of the calling thread's network
/// namespace that receives the first [`SNAP`] bytes of each incoming IPv4 TCP SYN (without
/// ACK) to one of `addresses` and, unless `ports` is empty, one of `ports`, with a [`POLL`]
/// receive timeout. Needs `CAP_NET_RAW` there.
pub fn syn_socket(ifindex: u32, addresses: &[Ipv4Addr], ports: &[u16]) -> std::io::Result<OwnedFd> {
    if addresses.is_empty() || addresses.len() > MAX_TARGETS || ports.len() > MAX_TARGETS {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "a SYN watch takes 1 to {MAX_TARGETS} addresses and at most {MAX_TARGETS} ports"
            ),
        ));
    }
    let protocol = (libc::ETH_P_IP as u16).to_be();
    // SAFETY: plain system calls on a descriptor this function owns; every pointer passed is
    // to a live local of the size given.
    unsafe {
        // Protocol 0 receives nothing until bound: no packet is queued before the filter.
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let program = syn_filter(addresses, ports);
        let fprog = libc::sock_fprog {
            len: program.len() as u16,
            filter: program.as_ptr().cast_mut(),
        };
        setsockopt(&fd, libc::SOL_SOCKET, SO_ATTACH_FILTER, &fprog)?;
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: POLL.as_micros() as libc::suseconds_t,
        };
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &timeout)?;
        let mut addr: libc::sockaddr_ll = std::mem::zeroed();
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol;
        addr.sll_ifindex = ifindex as i32;
        let bound = libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        );
        if bound != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The first stamp asked for turns the kernel's receive stamps on: asked now, before
        // the agent runs, its first SYN has one.
        let _ = received_at(&fd);
        Ok(fd)
    }
}

/// `setsockopt` with a value of type `T`.
///
/// # Safety
/// `T` must be the option's C type.
unsafe fn setsockopt<T>(fd: &OwnedFd, level: i32, name: i32, value: &T) -> std::io::Result<()> {
    // SAFETY: `value` is a live `T` of the size given; the caller vouches for the type.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The classic BPF program: an unfragmented IPv4 TCP packet to one of `addresses` (and one of
/// `ports`, unless empty) whose flags have SYN without ACK is kept ([`SNAP`] bytes), anything
/// else dropped. The socket is `SOCK_DGRAM`, so offset 0 is the IPv4 header. At most
/// [`MAX_TARGETS`] of each (a jump reaches 255 instructions).
fn syn_filter(addresses: &[Ipv4Addr], ports: &[u16]) -> Vec<libc::sock_filter> {
    use libc::{
        BPF_ABS, BPF_B, BPF_H, BPF_IND, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_LDX,
        BPF_MSH, BPF_RET, BPF_W,
    };
    let (n, m) = (addresses.len() as u8, ports.len() as u8);
    // Layout: 0 protocol, 1 is-TCP, 2 dst address, 3.. one test per address; then fragment
    // offset, its test, header length, flags, the ACK test, the SYN test; then the dst port
    // and one test per port when there are ports; keep, drop.
    let frag = 3 + n;
    let port_tests = frag + 6 + u8::from(m > 0);
    let keep_at = port_tests + m;
    let drop_at = keep_at + 1;
    let mut p = vec![
        op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 9),
        op(BPF_JMP | BPF_JEQ | BPF_K, 0, to(1, drop_at), 6),
        op(BPF_LD | BPF_W | BPF_ABS, 0, 0, 16),
    ];
    let addresses: Vec<u32> = addresses.iter().map(|a| u32::from(*a)).collect();
    p.extend(one_of(&addresses, 3, frag, drop_at));
    p.extend([
        op(BPF_LD | BPF_H | BPF_ABS, 0, 0, 6),
        op(BPF_JMP | BPF_JSET | BPF_K, to(frag + 1, drop_at), 0, 0x1fff),
        op(BPF_LDX | BPF_B | BPF_MSH, 0, 0, 0),
        op(BPF_LD | BPF_B | BPF_IND, 0, 0, 13),
        // SYN set and ACK clear.
        op(BPF_JMP | BPF_JSET | BPF_K, to(frag + 4, drop_at), 0, 0x10),
        op(BPF_JMP | BPF_JSET | BPF_K, 0, to(frag + 5, drop_at), 0x02),
    ]);
    if m > 0 {
        p.push(op(BPF_LD | BPF_H | BPF_IND, 0, 0, 2));
        let ports: Vec<u32> = ports.iter().map(|p| u32::from(*p)).collect();
        p.extend(one_of(&ports, port_tests, keep_at, drop_at));
    }
    p.push(op(BPF_RET | BPF_K, 0, 0, SNAP));
    p.push(op(BPF_RET | BPF_K, 0, 0, 0));
    debug_assert_eq!(p.len(), usize::from(drop_at) + 1);
    p
}

/// One classic BPF instruction.
fn op(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// A jump's offset from instruction `from` to `target`: it counts from the next instruction.
fn to(from: u8, target: u8) -> u8 {
    target - from - 1
}

/// Tests of the loaded value against each of `values`, the first at instruction `first`: a
/// match jumps to `hit`, no match after the last one to `miss`.
fn one_of(values: &[u32], first: u8, hit: u8, miss: u8) -> Vec<libc::sock_filter> {
    use libc::{BPF_JEQ, BPF_JMP, BPF_K};
    values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let at = first + i as u8;
            let jf = if i + 1 == values.len() {
                to(at, miss)
            } else {
                0
            };
            op(BPF_JMP | BPF_JEQ | BPF_K, to(at, hit), jf, *value)
        })
        .collect()
}

/// The next SYN's destination and receive time; `None` when none came within [`POLL`].
fn next_syn(socket: &OwnedFd) -> Option<(SocketAddrV4, Instant)> {
    loop {
        if let Some(syn) = read_packet(socket)? {
            return Some(syn);
        }
    }
}

/// One packet: `None` when none came within [`POLL`], `Some(None)` for one that is not an
/// incoming SYN after all.
fn read_packet(socket: &OwnedFd) -> Option<Option<(SocketAddrV4, Instant)>> {
    let mut buf = [0u8; SNAP as usize];
    // SAFETY: zeroed C structs, filled by the kernel; the buffer's length is its own.
    let (len, from) = unsafe {
        let mut from: libc::sockaddr_ll = std::mem::zeroed();
        let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        let len = libc::recvfrom(
            socket.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            (&raw mut from).cast(),
            &mut from_len,
        );
        (len, from)
    };
    let Ok(len) = usize::try_from(len) else {
        // A timeout is the poll; another error would come back at once: wait as long.
        let e = std::io::Error::last_os_error();
        if !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::Interrupted
                | std::io::ErrorKind::TimedOut
        ) {
            std::thread::sleep(POLL);
        }
        return None;
    };
    // A socket bound to one protocol sees the receive side only; an outgoing copy is skipped
    // all the same, as is anything too short to hold the headers the filter read.
    if from.sll_pkttype == PACKET_OUTGOING {
        return Some(None);
    }
    let at = received_at(socket);
    Some(parse_syn(&buf[..len.min(buf.len())]).map(|to| (to, at)))
}

/// Where a SYN the filter passed was going: its IPv4 destination and TCP port.
fn parse_syn(packet: &[u8]) -> Option<SocketAddrV4> {
    let header = usize::from(packet.first()? & 0x0f) * 4;
    let addr: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
    let port: [u8; 2] = packet.get(header + 2..header + 4)?.try_into().ok()?;
    Some(SocketAddrV4::new(
        Ipv4Addr::from(addr),
        u16::from_be_bytes(port),
    ))
}

/// When the packet just read arrived, by the kernel's stamp, as an `Instant`: the watcher may
/// read it late on a loaded machine, the stamp is not. Now, when the kernel gives none.
fn received_at(socket: &OwnedFd) -> Instant {
    let now = Instant::now();
    let mut stamp = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the ioctl writes one timespec into a live local.
    let r = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCGSTAMPNS as _, &raw mut stamp) };
    if r != 0 {
        return now;
    }
    let stamp = SystemTime::UNIX_EPOCH + Duration::new(stamp.tv_sec as u64, stamp.tv_nsec as u32);
    let ago = SystemTime::now().duration_since(stamp).unwrap_or_default();
    now.checked_sub(ago).unwrap_or(now)
}

/// Packets the socket dropped for want of room (`PACKET_STATISTICS`).
fn dropped(socket: &OwnedFd) -> u32 {
    #[repr(C)]
    #[derive(Default)]
    struct TpacketStats {
        packets: u32,
        drops: u32,
    }
    let mut stats = TpacketStats::default();
    let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into a live local.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            (&raw mut stats).cast(),
            &mut len,
        )
    };
    if r == 0 { stats.drops } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal IPv4 + TCP header: `to`, `port`, `flags`, fragment offset `frag`.
    fn packet(to: Ipv4Addr, port: u16, flags: u8, frag: u16) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[9] = 6;
        p[12..16].copy_from_slice(&[127, 0, 0, 1]);
        p[16..20].copy_from_slice(&to.octets());
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&port.to_be_bytes());
        p[33] = flags;
        p
    }

    /// Runs a classic BPF program (the subset [`syn_filter`] uses) on `p`.
    fn run(program: &[libc::sock_filter], p: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let byte = |i: usize| u32::from(p[i]);
        loop {
            let i = program[pc];
            let code = u32::from(i.code);
            pc += 1;
            match code {
                c if c == (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) => a = byte(i.k as usize),
                c if c == (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) => {
                    a = (byte(i.k as usize) << 8) | byte(i.k as usize + 1)
                }
                c if c == (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) => {
                    a = u32::from_be_bytes(p[i.k as usize..i.k as usize + 4].try_into().unwrap())
                }
                c if c == (libc::BPF_LDX | libc::BPF_B | libc::BPF_MSH) => {
                    x = (byte(i.k as usize) & 0xf) * 4
                }
                c if c == (libc::BPF_LD | libc::BPF_B | libc::BPF_IND) => {
                    a = byte((x + i.k) as usize)
                }
                c if c == (libc::BPF_LD | libc::BPF_H | libc::BPF_IND) => {
                    a = (byte((x + i.k) as usize) << 8) | byte((x + i.k) as usize + 1)
                }
                c if c == (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) => {
                    pc += usize::from(if a == i.k { i.jt } else { i.jf })
                }
                c if c == (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) => {
                    pc += usize::from(if a & i.k != 0 { i.jt } else { i.jf })
                }
                c if c == (libc::BPF_RET | libc::BPF_K) => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn the_filter_keeps_only_syns_to_the_refused_addresses() {
        let wire = Ipv4Addr::new(168, 63, 129, 16);
        let imds = Ipv4Addr::new(169, 254, 169, 254);
        let other = Ipv4Addr::new(127, 0, 0, 1);
        for refused in [vec![wire], vec![wire, imds]] {
            let program = syn_filter(&refused, &[]);
            let keeps = |p: &[u8]| run(&program, p) == SNAP;
            assert!(keeps(&packet(wire, 80, 0x02, 0)));
            assert!(keeps(&packet(wire, 32526, 0x02, 0)));
            assert_eq!(keeps(&packet(imds, 80, 0x02, 0)), refused.contains(&imds));
            assert!(!keeps(&packet(other, 80, 0x02, 0)), "another address");
            assert!(!keeps(&packet(wire, 80, 0x12, 0)), "a SYN-ACK");
            assert!(!keeps(&packet(wire, 80, 0x10, 0)), "an ACK");
            assert!(!keeps(&packet(wire, 80, 0x04, 0)), "a RST");
            assert!(!keeps(&packet(wire, 80, 0x02, 0x0010)), "a later fragment");
            let mut udp = packet(wire, 80, 0x02, 0);
            udp[9] = 17;
            assert!(!keeps(&udp), "not TCP");
        }
    }

    #[test]
    fn with_ports_the_filter_keeps_only_syns_to_those_ports() {
        let lo = Ipv4Addr::LOCALHOST;
        for ports in [vec![40001], vec![40001, 40002], vec![1, 2, 3, 40002]] {
            let program = syn_filter(&[lo], &ports);
            let keeps = |p: &[u8]| run(&program, p) == SNAP;
            for port in [40001, 40002, 80] {
                assert_eq!(
                    keeps(&packet(lo, port, 0x02, 0)),
                    ports.contains(&port),
                    "{port}"
                );
            }
            assert!(!keeps(&packet(lo, 40002, 0x12, 0)), "a SYN-ACK");
            assert!(!keeps(&packet(
                Ipv4Addr::new(10, 0, 0, 1),
                ports[0],
                0x02,
                0
            )));
            // With options the TCP header starts further on: the port is read from there.
            let mut long = vec![0x46u8; 44];
            long[..20].copy_from_slice(&packet(lo, 0, 0, 0)[..20]);
            long[0] = 0x46;
            long[24..28].copy_from_slice(&[0x9c, 0x40, (ports[0] >> 8) as u8, ports[0] as u8]);
            long[37] = 0x02;
            assert!(keeps(&long));
        }
    }

    #[test]
    fn a_filter_takes_a_bounded_number_of_targets() {
        let many = vec![Ipv4Addr::LOCALHOST; MAX_TARGETS + 1];
        assert!(syn_socket(0, &many, &[]).is_err());
        assert!(syn_socket(0, &[], &[]).is_err());
        assert!(syn_socket(0, &[Ipv4Addr::LOCALHOST], &[1; MAX_TARGETS + 1]).is_err());
    }

    #[test]
    fn a_syn_names_its_destination() {
        let wire = Ipv4Addr::new(168, 63, 129, 16);
        assert_eq!(
            parse_syn(&packet(wire, 80, 0x02, 0)),
            Some(SocketAddrV4::new(wire, 80))
        );
        assert_eq!(parse_syn(&[0x45; 10]), None);
    }
}
