//! Arbitrary bytes over raw TCP never make the fake panic, and it still answers a normal request
//! afterwards. (Its own test binary: the panic hook below is process-wide.)

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fake_wireserver::{Fake, FakeConfig};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{exchange, goalstate_get, response};

fn input() -> impl Strategy<Value = Vec<u8>> {
    let heads = prop_oneof![
        Just(b"".to_vec()),
        Just(b"GET / HTTP/1.1\r\n".to_vec()),
        Just(b"POST /machine?comp=health HTTP/1.1\r\nHost: 168.63.129.16\r\n".to_vec()),
        Just(b"POST /provisioning/health HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec()),
        Just(
            b"GET http://169.254.169.254/metadata/instance HTTP/1.1\r\nContent-Length: 5\r\n\r\n"
                .to_vec()
        ),
        Just(b"CONNECT 168.63.129.16:443 HTTP/1.1\r\n\r\n".to_vec()),
    ];
    (heads, proptest::collection::vec(any::<u8>(), 0..2048)).prop_map(|(mut h, tail)| {
        h.extend(tail);
        h
    })
}

#[test]
fn arbitrary_bytes_never_break_the_fake() {
    // The hook is the process's: it counts only panics on this fake's runtime threads, not
    // the deliberate ones of the tests beside it in this binary (api_validation's builders).
    const FAKE_THREADS: &str = "robustness-fake";
    let panicked = Arc::new(AtomicBool::new(false));
    let flag = panicked.clone();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some(FAKE_THREADS) {
            flag.store(true, Ordering::SeqCst);
        }
        default_hook(info);
    }));

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(FAKE_THREADS)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(async {
        Fake::start(
            FakeConfig::default()
                .with_proxy()
                .read_timeout(Duration::from_millis(300))
                .max_body_bytes(4096),
        )
        .await
        .unwrap()
    });
    let addrs = [
        fake.wireserver_addr().unwrap(),
        fake.imds_addr().unwrap(),
        fake.proxy_addr().unwrap(),
    ];

    let config = ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    };
    proptest!(config, |(bytes in input(), which in 0usize..3, half_close in any::<bool>())| {
        rt.block_on(async {
            let mut stream = TcpStream::connect(addrs[which]).await.unwrap();
            // The fake may close early (e.g. a 400 on garbage): write errors are fine.
            let _ = stream.write_all(&bytes).await;
            if half_close {
                let _ = stream.shutdown().await;
            }
            // Whatever comes back, it must come back (or close) within the read timeout.
            let mut sink = vec![0u8; 65536];
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            loop {
                match tokio::time::timeout_at(deadline, stream.read(&mut sink)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    Ok(Ok(_)) => {}
                    Err(_) => panic!("the fake kept the connection open past its read timeout"),
                }
            }
        });
        prop_assert!(!panicked.load(Ordering::SeqCst), "the fake panicked");
        // And it still serves a normal request.
        let r = rt.block_on(exchange(addrs[0], &goalstate_get(), Duration::from_secs(5)));
        prop_assert_eq!(response(r).status, 200);
    });
    assert!(!panicked.load(Ordering::SeqCst));
    // Every request, even garbage, left a journal entry or nothing at all; none is half-written.
    for e in fake.journal() {
        serde_json::to_string(&e).unwrap();
    }
    drop(fake);
}
