//! 16 writer processes on one KVP pool at once, with a reader that behaves like hv_kvp_daemon:
//!
//! * 8 `provision-report` processes upsert (4 each on their own key, 4 all on
//!   `PROVISIONING_REPORT`), 3 reports each, one after the other;
//! * 8 appenders (`flock` + whole-file `fcntl` write lock, one 2560-byte `write` per record, as
//!   cloud-init and azure-init append) add 60 records each;
//! * the reader loops: whole-file `fcntl` `F_SETLKW` write lock, read everything, truncate and
//!   rewrite it (hv_kvp_daemon's update), unlock.
//!
//! Afterwards: the file is a whole number of records, no record is torn, none is lost, each
//! upserted key is there once with its last value, and the reader never saw a partial record.
//! (The reader loops without pausing: with its lock taken away, records are lost in every run.)

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod reliability_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::Duration;

use fake_wireserver::{Fake, FakeConfig};
use reliability_support::{provision_report, read_pool, run_with_hard_stop, runtime};
use wirecheck_oracle::encoded::{Mode, parse};
use wirecheck_oracle::kvp::RECORD_SIZE;

const REPORTERS: usize = 8;
/// Reporters below this index upsert their own key; the others share `PROVISIONING_REPORT`.
const OWN_KEY_REPORTERS: usize = 4;
const REPORTS_EACH: usize = 3;
const APPENDERS: usize = 8;
const APPENDS_EACH: usize = 60;

/// Appends whole records under flock + a whole-file fcntl write lock (F_SETLKW), the order the
/// reporter takes them in. Values are derived from (writer, n) so a torn record shows.
const APPENDER: &str = r#"
import fcntl, os, sys, time
path, writer, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
for n in range(count):
    key = f"append_{writer}_{n}".encode()
    fill = chr(ord("a") + (writer + n) % 26) * (100 + (writer * 37 + n * 11) % 900)
    value = f"{writer}:{n}:{fill}".encode()
    record = key.ljust(512, b"\0") + value.ljust(2048, b"\0")
    fcntl.flock(fd, fcntl.LOCK_EX)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    written = os.write(fd, record)
    fcntl.lockf(fd, fcntl.LOCK_UN)
    fcntl.flock(fd, fcntl.LOCK_UN)
    if written != len(record):
        sys.exit(f"short write: {written}")
    time.sleep(0.001)
"#;

/// hv_kvp_daemon's update: F_SETLKW write lock on the whole file, read, truncate, rewrite.
/// Counts passes and how often the file it read was not a whole number of records.
const DAEMON: &str = r#"
import fcntl, json, os, sys, time
path, stop = sys.argv[1], sys.argv[2]
passes = ragged = 0
while True:
    last = os.path.exists(stop)
    fd = os.open(path, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    data = b""
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        data += chunk
    if len(data) % 2560:
        ragged += 1
    os.ftruncate(fd, 0)
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)
    fcntl.lockf(fd, fcntl.LOCK_UN)
    os.close(fd)
    passes += 1
    if last:
        break
print(json.dumps({"passes": passes, "ragged": ragged}))
"#;

fn appended_value(writer: usize, n: usize) -> String {
    let fill = char::from(b'a' + ((writer + n) % 26) as u8)
        .to_string()
        .repeat(100 + (writer * 37 + n * 11) % 900);
    format!("{writer}:{n}:{fill}")
}

fn reporter_key(i: usize) -> String {
    if i < OWN_KEY_REPORTERS {
        format!("reliability_writer_{i}")
    } else {
        "PROVISIONING_REPORT".to_owned()
    }
}

fn reason(i: usize, round: usize) -> String {
    format!("writer {i} round {round}")
}

fn run_reporter(pool: &Path, wireserver: &str, i: usize, round: usize) {
    let finished = run_with_hard_stop(
        Command::new(provision_report())
            .args(["failure", "--reason", &reason(i, round)])
            .arg(format!("--kvp-key={}", reporter_key(i)))
            .arg(format!("--kvp-pool={}", pool.display()))
            .arg(format!("--wireserver={wireserver}"))
            .args(["--no-imds", "--vm-id=0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a"])
            .args([
                "--timeout=10",
                "--retry-interval=0.2",
                "--request-timeout=5",
            ]),
        Duration::from_secs(60),
    );
    assert_eq!(
        finished.code(),
        Some(0),
        "reporter {i} round {round}:\n{}",
        finished.stderr
    );
    assert!(!finished.stderr.contains("panicked"), "{}", finished.stderr);
}

#[test]
fn sixteen_writers_and_a_daemon_lose_and_tear_nothing() {
    let rt = runtime();
    let fake = rt
        .block_on(Fake::start(FakeConfig::default()))
        .expect("fake starts");
    let wireserver = fake.wireserver_url();
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = dir.path().join(".kvp_pool_1");
    std::fs::write(&pool, b"").expect("create the pool (hv_kvp_daemon does)");
    let appender = dir.path().join("appender.py");
    let daemon = dir.path().join("daemon.py");
    std::fs::write(&appender, APPENDER).unwrap();
    std::fs::write(&daemon, DAEMON).unwrap();
    let stop = dir.path().join("stop");

    let reader = Command::new("python3")
        .arg(&daemon)
        .arg(&pool)
        .arg(&stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (the daemon-like reader)");

    let start = Barrier::new(REPORTERS + APPENDERS);
    std::thread::scope(|s| {
        for i in 0..REPORTERS {
            let (pool, wireserver, start) = (&pool, &wireserver, &start);
            s.spawn(move || {
                start.wait();
                for round in 0..REPORTS_EACH {
                    run_reporter(pool, wireserver, i, round);
                }
            });
        }
        for w in 0..APPENDERS {
            let (pool, appender, start) = (&pool, &appender, &start);
            s.spawn(move || {
                start.wait();
                let finished = run_with_hard_stop(
                    Command::new("python3")
                        .arg(appender)
                        .arg(pool)
                        .arg(w.to_string())
                        .arg(APPENDS_EACH.to_string()),
                    Duration::from_secs(60),
                );
                assert!(
                    finished.status.success(),
                    "appender {w}: {}",
                    finished.stderr
                );
            });
        }
    });
    std::fs::write(&stop, b"").unwrap();
    let reader = reader.wait_with_output().expect("reader");
    assert!(
        reader.status.success(),
        "reader: {}",
        String::from_utf8_lossy(&reader.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&reader.stdout).expect("reader stats");
    assert!(stats["passes"].as_u64().unwrap() > 0, "{stats}");
    assert_eq!(
        stats["ragged"].as_u64(),
        Some(0),
        "the daemon-like reader saw a partial record: {stats}"
    );

    let size = std::fs::metadata(&pool).unwrap().len() as usize;
    assert_eq!(size % RECORD_SIZE, 0, "pool size {size}");
    let view = read_pool(&pool);
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for record in &view.records {
        seen.entry(record.key.clone())
            .or_default()
            .push(record.value.clone());
    }
    let lost: Vec<String> = (0..APPENDERS)
        .flat_map(|w| (0..APPENDS_EACH).map(move |n| format!("append_{w}_{n}")))
        .filter(|key| !seen.contains_key(key))
        .collect();
    assert!(
        lost.is_empty(),
        "{} appended record(s) lost (of {}): {lost:?}",
        lost.len(),
        APPENDERS * APPENDS_EACH
    );
    for w in 0..APPENDERS {
        for n in 0..APPENDS_EACH {
            let key = format!("append_{w}_{n}");
            let values = seen.remove(&key).expect("checked above");
            assert_eq!(values.len(), 1, "{key} appears {} times", values.len());
            // The host's view is cut to 1022 value bytes; compare what it can see.
            let full = appended_value(w, n);
            let visible = &full[..full.len().min(1022)];
            assert_eq!(values[0], visible, "record {key} is torn");
        }
    }
    for i in 0..OWN_KEY_REPORTERS {
        let key = reporter_key(i);
        let values = seen
            .remove(&key)
            .unwrap_or_else(|| panic!("upserted record {key} was lost"));
        assert_eq!(values.len(), 1, "{key} appears {} times", values.len());
        assert_eq!(
            reason_of(&values[0]),
            reason(i, REPORTS_EACH - 1),
            "{key} does not hold its last report"
        );
    }
    let shared = seen
        .remove("PROVISIONING_REPORT")
        .expect("PROVISIONING_REPORT was lost");
    assert_eq!(
        shared.len(),
        1,
        "PROVISIONING_REPORT appears {} times",
        shared.len()
    );
    let last = reason_of(&shared[0]);
    assert!(
        (OWN_KEY_REPORTERS..REPORTERS).any(|i| last == reason(i, REPORTS_EACH - 1)),
        "PROVISIONING_REPORT holds {last:?}, not one writer's last report"
    );
    assert!(seen.is_empty(), "unexpected records: {seen:?}");
    assert_eq!(
        view.records.len(),
        APPENDERS * APPENDS_EACH + OWN_KEY_REPORTERS + 1
    );
    drop(fake);
}

fn reason_of(value: &str) -> String {
    let report = parse(value, Mode::Lenient)
        .unwrap_or_else(|e| panic!("record value is not an encoded report ({e}): {value:?}"));
    assert!(!report.truncated, "truncated report: {value:?}");
    report
        .fields
        .iter()
        .find(|(k, _)| k == "reason")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no reason in {value:?}"))
}
