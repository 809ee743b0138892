//! Raw HTTP exchanges with a server under test: exact bytes out, everything that came back.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One blocking exchange: `request` as written (it should say `Connection: close`), then
/// everything the server sent until it closed, as text. Bounded by a 10 s read timeout.
pub fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut conn = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    conn.write_all(request.as_bytes())
        .expect("the request is written");
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer)
        .unwrap_or_else(|e| panic!("reading the answer from {addr}: {e}"));
    String::from_utf8_lossy(&answer).into_owned()
}
