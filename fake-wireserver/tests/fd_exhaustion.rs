//! Issue 13 review: when the process runs out of descriptors (EMFILE) before a listener reaches
//! its connection cap — several fakes in one process, as wirecheck runs them — the listener
//! closes its longest-idle connection to accept the new one instead of retrying `accept` until
//! someone else lets go. Its own test binary: it lowers this process's descriptor limit.

mod common;

use std::time::Duration;

use fake_wireserver::{Fake, FakeConfig};
use tokio::net::TcpStream;

use common::{Outcome, exchange, goalstate_get};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_longest_idle_connection_makes_room() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = Some(limit.maximum.map_or(1024, |m| m.min(1024)));
    setrlimit(Resource::Nofile, limit).unwrap();

    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let addr = fake.wireserver_addr().unwrap();
    // 200 idle connections (400 descriptors: both ends are in this process), well under the cap.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Everything else the process may open, taken.
    let mut hog = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        hog.push(f);
    }
    // One descriptor for the client's end; the fake's end has none left.
    drop(hog.pop());
    let outcome = exchange(addr, &goalstate_get(), Duration::from_secs(2)).await;
    drop(hog);
    match outcome {
        Outcome::Response(r) => assert_eq!(r.status, 200),
        other => panic!("no answer within 2 s with the descriptors exhausted: {other:?}"),
    }
    // The one closed to make room is the oldest.
    let first = common::read_outcome(&mut idle[0], Duration::from_millis(500)).await;
    assert!(matches!(first, Outcome::Eof(_)), "{first:?}");
    let last = common::read_outcome(&mut idle[199], Duration::from_millis(200)).await;
    assert!(matches!(last, Outcome::TimedOut(_)), "{last:?}");
}
