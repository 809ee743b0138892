//! The open connections of one agent listener, so that a flood of idle connections cannot
//! starve agents: the listener holds at most `cap`, and at the cap (or when the process is out
//! of descriptors) an idle connection is closed to make room for the new one.
//!
//! "Idle" means the fake is waiting for (or still reading) a request on it: the client has not
//! sent a complete request. A connection whose request is being answered — including a
//! scripted `hang` or `delay` — is busy and is never closed for room; when every connection is
//! busy the listener waits for one to end, as before.
//!
//! Which idle connection goes first: one that never sent a byte, then one inside its first
//! request, then one that has completed a request (an agent between two keep-alive requests);
//! within each, the one silent the longest (idle time counts from the last byte read). So a
//! flood of new connections closes its own connections first, not an agent's slow head or
//! keep-alive connection.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Sleep;

use crate::sync::lock;

/// How often the "at its connection limit" warning may repeat per listener.
const WARN_EVERY: Duration = Duration::from_secs(10);

pub(crate) struct ConnTable {
    cap: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    next_id: u64,
    open: HashMap<u64, Slot>,
    evicted: u64,
    warned_at: Option<Instant>,
}

struct Slot {
    /// `Some(last byte read, or start of waiting)` while waiting for or reading a request.
    idle_since: Option<Instant>,
    /// The last byte read (or registration), idle or busy.
    last: Instant,
    stage: Stage,
    evict: Arc<Notify>,
}

/// How far a connection has got; the lower stages are closed for room first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// Not a byte yet.
    Silent,
    /// Inside its first request.
    Started,
    /// Has completed a request.
    Served,
}

/// What [`ConnTable::make_room`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// Under the cap: nothing closed.
    Free,
    /// The longest-idle connection was told to close. `warn` is set at most every
    /// [`WARN_EVERY`], with the total closed so far.
    Evicted { total: u64, warn: bool },
    /// At the cap and every connection is busy.
    Full,
}

impl ConnTable {
    pub(crate) fn new(cap: usize) -> Arc<ConnTable> {
        Arc::new(ConnTable {
            cap: cap.max(1),
            inner: Mutex::new(Inner {
                next_id: 0,
                open: HashMap::new(),
                evicted: 0,
                warned_at: None,
            }),
        })
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// A new connection, idle until it has a complete request.
    pub(crate) fn register(self: &Arc<Self>) -> ConnHandle {
        let evict = Arc::new(Notify::new());
        let mut inner = lock(&self.inner);
        let id = inner.next_id;
        inner.next_id += 1;
        inner.open.insert(
            id,
            Slot {
                idle_since: Some(Instant::now()),
                last: Instant::now(),
                stage: Stage::Silent,
                evict: evict.clone(),
            },
        );
        ConnHandle {
            table: self.clone(),
            id,
            evict,
            received: Mutex::new(None),
        }
    }

    /// Before a new connection is registered: at the cap, tells an idle connection to close
    /// (it leaves the table at once, so the count stays at the cap).
    pub(crate) fn make_room(&self) -> Room {
        let mut inner = lock(&self.inner);
        if inner.open.len() < self.cap {
            return Room::Free;
        }
        Self::evict_one(&mut inner, false)
    }

    /// Like [`ConnTable::make_room`], but when every connection is busy the one silent the
    /// longest goes: for the admin listener, whose connections are busy from a request's first
    /// byte (a client can start a request and never finish it) and which cannot wait.
    pub(crate) fn make_room_even_busy(&self) -> Room {
        let mut inner = lock(&self.inner);
        if inner.open.len() < self.cap {
            return Room::Free;
        }
        Self::evict_one(&mut inner, true)
    }

    /// Out of descriptors below the cap: tells an idle connection to close, whatever the count.
    pub(crate) fn shed(&self) -> Room {
        Self::evict_one(&mut lock(&self.inner), false)
    }

    /// Closes the idle connection that matters least (see the module comment); with
    /// `even_busy`, the busy one silent the longest when none is idle.
    fn evict_one(inner: &mut Inner, even_busy: bool) -> Room {
        let idle = inner
            .open
            .iter()
            .filter_map(|(id, s)| s.idle_since.map(|t| ((s.stage, t), *id)))
            .min()
            .map(|(_, id)| id);
        let victim = idle.or_else(|| {
            even_busy
                .then(|| inner.open.iter().map(|(id, s)| (s.last, *id)).min())
                .flatten()
                .map(|(_, id)| id)
        });
        let Some(id) = victim else {
            return Room::Full;
        };
        if let Some(slot) = inner.open.remove(&id) {
            slot.evict.notify_one();
        }
        inner.evicted += 1;
        let now = Instant::now();
        let warn = inner
            .warned_at
            .is_none_or(|t| now.saturating_duration_since(t) >= WARN_EVERY);
        if warn {
            inner.warned_at = Some(now);
        }
        Room::Evicted {
            total: inner.evicted,
            warn,
        }
    }

    /// Idle or busy from now. A connection already idle keeps its idle time: the serving task
    /// marks it idle when it first runs, and the runtime starts tasks in no fixed order, so
    /// its first mark says when it was scheduled, not how long the client has been silent.
    fn set_idle(&self, id: u64, idle: bool) {
        if let Some(slot) = lock(&self.inner).open.get_mut(&id) {
            let now = Instant::now();
            slot.idle_since = idle.then(|| slot.idle_since.unwrap_or(now));
            slot.last = now;
            if !idle {
                slot.stage = Stage::Served;
            }
        }
    }

    /// Bytes arrived: the idle time starts again, and the connection is no longer silent.
    fn touch(&self, id: u64) {
        if let Some(slot) = lock(&self.inner).open.get_mut(&id) {
            let now = Instant::now();
            slot.last = now;
            if slot.idle_since.is_some() {
                slot.idle_since = Some(now);
            }
            slot.stage = slot.stage.max(Stage::Started);
        }
    }
}

/// One registered connection; dropping it leaves the table.
pub(crate) struct ConnHandle {
    table: Arc<ConnTable>,
    id: u64,
    evict: Arc<Notify>,
    /// When the bytes of the latest read arrived, by the kernel ([`crate::rx_stamp`]); `None`
    /// when it did not say. Bytes read ahead (a pipelined request) came with that read.
    received: Mutex<Option<Instant>>,
}

impl ConnHandle {
    /// Waiting for the next request (keep-alive): closable for room again.
    pub(crate) fn idle(&self) {
        self.table.set_idle(self.id, true);
    }

    /// A complete request is being answered: never closed for room.
    pub(crate) fn busy(&self) {
        self.table.set_idle(self.id, false);
    }

    /// Bytes of a request arrived (every read: a slow head is not idle), at `received` by the
    /// kernel's stamp when it gave one.
    pub(crate) fn touch(&self, received: Option<Instant>) {
        *lock(&self.received) = received;
        self.table.touch(self.id);
    }

    /// When the bytes read last arrived, by the kernel (`None`: it did not say).
    pub(crate) fn received(&self) -> Option<Instant> {
        *lock(&self.received)
    }

    /// Completes when the listener closes this connection for room (a permit is kept, so a
    /// notice sent between two waits is not lost).
    pub(crate) fn evicted(&self) -> &Notify {
        &self.evict
    }
}

/// Open admin connections at most (the library and wirecheck use one or two at a time).
pub(crate) const MAX_ADMIN_CONNECTIONS: usize = 64;

/// The admin listener for `axum::serve`, bounded like an agent listener.
pub(crate) struct AdminListener {
    inner: TcpListener,
    table: Arc<ConnTable>,
    idle_timeout: Duration,
}

impl AdminListener {
    pub(crate) fn new(inner: TcpListener, idle_timeout: Duration) -> Self {
        AdminListener {
            inner,
            table: ConnTable::new(MAX_ADMIN_CONNECTIONS),
            idle_timeout,
        }
    }
}

impl axum::serve::Listener for AdminListener {
    type Io = AdminIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (AdminIo, SocketAddr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    if let Room::Evicted { total, warn: true } = self.table.make_room_even_busy() {
                        tracing::warn!(
                            "admin: at its {MAX_ADMIN_CONNECTIONS}-connection limit; closed the connection silent the longest ({total} closed so far)"
                        );
                    }
                    let handle = self.table.register();
                    let evicted = Box::pin(handle.evict.clone().notified_owned());
                    let io = AdminIo {
                        stream,
                        handle,
                        evicted,
                        idle: Box::pin(tokio::time::sleep(self.idle_timeout)),
                        idle_timeout: self.idle_timeout,
                        answering: false,
                        wrote: false,
                    };
                    return (io, addr);
                }
                // Out of descriptors: close an idle connection (its socket goes when its task
                // next polls it), else back off instead of spinning.
                Err(e) => {
                    let shed = crate::fdlimit::out_of_descriptors(&e)
                        && matches!(self.table.shed(), Room::Evicted { .. });
                    if shed {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    } else {
                        tracing::warn!("admin accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// An admin connection: reads end with an error once it is evicted or silent too long (no
/// byte read or written for the idle timeout). From the first byte of a request until its
/// answer is written it is busy, not closed for room while any connection is idle: someone
/// without the token cannot push out the library's request in progress with connections that
/// say nothing. When all 64 are busy the one silent the longest goes (a request in progress
/// sends its bytes at once; a client that started one and went quiet does not hold the cap).
pub(crate) struct AdminIo {
    stream: TcpStream,
    handle: ConnHandle,
    evicted: Pin<Box<OwnedNotified>>,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    /// A request has begun and its answer is not written yet.
    answering: bool,
    /// Bytes were written since the last read (the answer): the next read waits for a new
    /// request.
    wrote: bool,
}

impl AdminIo {
    fn active(&mut self) {
        let next = tokio::time::Instant::now() + self.idle_timeout;
        self.idle.as_mut().reset(next);
    }
}

impl AsyncRead for AdminIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.evicted.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "closed to make room: the admin listener is at its connection limit",
            )));
        }
        if this.wrote {
            // The answer is out: waiting for the next request, closable for room again.
            this.wrote = false;
            this.answering = false;
            this.handle.idle();
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    if !this.answering {
                        this.answering = true;
                        this.handle.busy();
                    }
                    this.handle.touch(None);
                    this.active();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.idle.as_mut().poll(cx).is_ready() => Poll::Ready(Err(
                std::io::Error::new(std::io::ErrorKind::TimedOut, "admin connection idle"),
            )),
            other => other,
        }
    }
}

impl AsyncWrite for AdminIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            this.wrote = true;
            this.active();
        }
        polled
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            this.wrote = true;
            this.active();
        }
        polled
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Drop for ConnHandle {
    fn drop(&mut self) {
        lock(&self.table.inner).open.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_connection_makes_room_and_busy_ones_never_do() {
        let table = ConnTable::new(2);
        let a = table.register();
        std::thread::sleep(Duration::from_millis(2));
        let b = table.register();
        assert_eq!(
            table.make_room(),
            Room::Evicted {
                total: 1,
                warn: true
            }
        );
        // `a` was told (the permit waits for its next read) and left the table.
        assert!(futures_now(a.evicted()));
        assert!(!futures_now(b.evicted()));
        assert_eq!(table.make_room(), Room::Free);
        let c = table.register();
        b.busy();
        c.busy();
        assert_eq!(table.make_room(), Room::Full);
        c.idle();
        assert_eq!(
            table.make_room(),
            Room::Evicted {
                total: 2,
                warn: false
            }
        );
        assert!(futures_now(c.evicted()));
        drop(b);
        assert_eq!(table.make_room(), Room::Free);
    }

    #[test]
    fn silent_connections_go_first_then_started_then_served() {
        let table = ConnTable::new(3);
        let served = table.register();
        served.busy();
        served.idle();
        std::thread::sleep(Duration::from_millis(2));
        let started = table.register();
        started.touch(None);
        std::thread::sleep(Duration::from_millis(2));
        let silent = table.register();
        let evicted = |h: &ConnHandle| futures_now(h.evicted());
        assert!(matches!(table.make_room(), Room::Evicted { .. }));
        assert!(evicted(&silent) && !evicted(&started) && !evicted(&served));
        // A byte refreshes the idle time: the one silent longer goes first among equals.
        let later = table.register();
        later.touch(None);
        std::thread::sleep(Duration::from_millis(2));
        started.touch(None);
        assert!(matches!(table.make_room(), Room::Evicted { .. }));
        assert!(evicted(&later) && !evicted(&started));
        // Out of descriptors, below the cap: the same order.
        assert!(matches!(table.shed(), Room::Evicted { .. }));
        assert!(evicted(&started) && !evicted(&served));
    }

    #[test]
    fn a_connection_marked_idle_by_its_task_keeps_the_time_it_was_accepted() {
        // The accept loop registers `first` then `second`; their tasks start in the other
        // order (two worker threads, a loaded machine), each marking itself idle.
        let table = ConnTable::new(2);
        let first = table.register();
        let second = table.register();
        std::thread::sleep(Duration::from_millis(2));
        second.idle();
        std::thread::sleep(Duration::from_millis(2));
        first.idle();
        assert!(matches!(table.make_room(), Room::Evicted { .. }));
        assert!(futures_now(first.evicted()) && !futures_now(second.evicted()));
        // Between two keep-alive requests the idle time starts when the answer is done.
        let third = table.register();
        second.busy();
        third.busy();
        third.idle();
        std::thread::sleep(Duration::from_millis(2));
        second.idle();
        assert!(matches!(table.make_room(), Room::Evicted { .. }));
        assert!(futures_now(third.evicted()) && !futures_now(second.evicted()));
    }

    /// Whether a notification is ready without waiting.
    fn futures_now(n: &Notify) -> bool {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(1), n.notified())
                .await
                .is_ok()
        })
    }
}
