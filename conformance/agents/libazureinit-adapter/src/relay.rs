//! Byte relays between the parent's network namespace and the adapter's own: the fake's proxy
//! listener is on the parent's loopback, which a new network namespace cannot reach, so the
//! connections cross over a Unix socket (a file, visible in both namespaces).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::thread;

/// A full-duplex stream that can be split in two and half-closed.
trait Duplex: Read + Write + Send + Sized + 'static {
    fn split(&self) -> io::Result<Self>;
    fn close_write(&self);
}

impl Duplex for TcpStream {
    fn split(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl Duplex for UnixStream {
    fn split(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// Parent side: every connection on `listener` is relayed to `target` (the fake's proxy).
pub fn spawn_unix_to_tcp(listener: UnixListener, target: SocketAddr) {
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(inner) = conn else { continue };
            match TcpStream::connect(target) {
                Ok(outer) => pipe(inner, outer),
                Err(e) => eprintln!("libazureinit-adapter: proxy {target} unreachable: {e}"),
            }
        }
    });
}

/// Child side: every connection on `listener` (127.0.0.1 in the new namespace) is relayed to
/// the parent's Unix socket.
pub fn spawn_tcp_to_unix(listener: TcpListener, socket: PathBuf) {
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(inner) = conn else { continue };
            match UnixStream::connect(&socket) {
                Ok(outer) => pipe(inner, outer),
                Err(e) => eprintln!(
                    "libazureinit-adapter: relay socket {} unreachable: {e}",
                    socket.display()
                ),
            }
        }
    });
}

/// Copies both directions until each side ends, passing half-closes on.
fn pipe<A: Duplex, B: Duplex>(a: A, b: B) {
    let (Ok(a_write), Ok(b_write)) = (a.split(), b.split()) else {
        return;
    };
    one_way(a, b_write);
    one_way(b, a_write);
}

fn one_way<R: Duplex, W: Duplex>(mut from: R, mut to: W) {
    thread::spawn(move || {
        let _ = io::copy(&mut from, &mut to);
        to.close_write();
    });
}
