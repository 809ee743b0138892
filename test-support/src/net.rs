//! A loopback port on which nothing answers, for as long as the test holds it.

use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;

use rustix::net::{AddressFamily, SocketType, bind, getsockname, socket};

/// A TCP port of 127.0.0.1 that refuses every connection: bound, never listening, and held
/// until dropped. Binding a listener and closing it to get a "free" port races with every
/// other process on the machine, which may take the port in between; a bound socket keeps it.
pub struct ClosedPort {
    _socket: OwnedFd,
    addr: SocketAddr,
}

impl ClosedPort {
    pub fn new() -> ClosedPort {
        let socket = socket(AddressFamily::INET, SocketType::STREAM, None).expect("a TCP socket");
        bind(&socket, &SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).expect("bind 127.0.0.1:0");
        let addr = getsockname(&socket)
            .ok()
            .and_then(|a| SocketAddr::try_from(a).ok())
            .expect("the bound address");
        ClosedPort {
            _socket: socket,
            addr,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Default for ClosedPort {
    fn default() -> Self {
        ClosedPort::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_port_refuses_and_stays_taken() {
        let port = ClosedPort::new();
        let err = std::net::TcpStream::connect(port.addr()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
        // Nobody else can listen on it while it is held.
        assert!(std::net::TcpListener::bind(port.addr()).is_err());
        assert!(port.url().starts_with("http://127.0.0.1:"));
    }
}
