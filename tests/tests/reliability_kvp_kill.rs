//! `kill -9` of `provision-report` while it rewrites a pool with duplicate records, 200 times.
//!
//! Each round prepares the same pool: an earlier `PROVISIONING_REPORT` first (so that every
//! record after it has to move down when it is dropped), 2,500 records of another writer
//! with long values (a torn record shows as bytes that match no record), and two more earlier
//! reports further on. The reporter is started and killed with SIGKILL after a delay that
//! walks over the whole run, calibrated on an unkilled run first.
//!
//! After every kill the pool is read with the oracle (`fake_wireserver::oracle::kvp`), as the
//! host would, and must hold: whole records only; every record with a key byte-equal to a
//! record of the original pool or a complete new report; every other-writer record still
//! there; a report (old or new); at most one record present twice (the one being moved when
//! the kill came). Slots with an empty key are free slots (see reporter/src/kvp/pool.rs):
//! counted, allowed, and gone after the next unkilled run, which is checked at the end.

mod reliability_support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_wireserver::oracle::encoded::{Mode, parse};
use fake_wireserver::oracle::kvp::{RECORD_SIZE, decode_pool, encode_record};
use fake_wireserver::{Fake, FakeConfig};
use reliability_support::{provision_report, run_with_hard_stop, runtime};

const ROUNDS: usize = 200;
const OTHERS: usize = 2_500;
const KEY: &str = "PROVISIONING_REPORT";
/// Where the earlier reports sit (slot indexes in the original pool).
const EARLIER_REPORTS: [usize; 3] = [0, OTHERS / 2, OTHERS - 1];

fn other_key(j: usize) -> String {
    format!("writer_event_{j:05}")
}

/// Long (1,200–2,000 bytes: the value crosses a page boundary in most slots) and distinct per
/// record, so a record made of two records' bytes matches neither.
fn other_value(j: usize) -> String {
    let fill = char::from(b'a' + (j % 26) as u8)
        .to_string()
        .repeat(1_200 + (j * 37) % 800);
    format!("{j}:{fill}:{j}")
}

fn original_pool() -> Vec<u8> {
    let mut records: Vec<(String, String)> = (0..OTHERS)
        .map(|j| (other_key(j), other_value(j)))
        .collect();
    for (n, at) in EARLIER_REPORTS.iter().enumerate() {
        records.insert(
            *at,
            (
                KEY.to_owned(),
                format!("result=error|reason=earlier report {n}|agent=someone"),
            ),
        );
    }
    let mut pool = Vec::with_capacity(records.len() * RECORD_SIZE);
    for (k, v) in &records {
        pool.extend_from_slice(&encode_record(k, v).expect("valid record"));
    }
    pool
}

fn reason(round: usize) -> String {
    format!("kill loop round {round}")
}

fn reporter(pool: &Path, wireserver: &str, round: usize) -> Command {
    let mut cmd = Command::new(provision_report());
    cmd.args(["failure", "--reason", &reason(round)])
        .arg(format!("--kvp-pool={}", pool.display()))
        .arg(format!("--wireserver={wireserver}"))
        .args(["--no-imds", "--vm-id=0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a"])
        .args(["--timeout=10", "--retry-interval=0.2", "--log-level=warn"])
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY");
    cmd
}

/// What a killed round left.
#[derive(Debug, Default)]
struct Left {
    finished: bool,
    free_slots: usize,
    duplicated: usize,
    new_report: bool,
}

/// Checks the pool after a kill; panics with the round and what is wrong.
fn check(pool: &[u8], original: &HashMap<Vec<u8>, ()>, round: usize, expect_new: &str) -> Left {
    let at = format!("round {round}");
    let view = decode_pool(pool);
    assert_eq!(
        pool.len() % RECORD_SIZE,
        0,
        "{at}: the pool is {} bytes, not whole records: {:?}",
        pool.len(),
        view.findings
    );
    let mut left = Left::default();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for record in &view.records {
        let bytes = &pool[record.offset..record.offset + RECORD_SIZE];
        if record.key_bytes == 0 {
            left.free_slots += 1;
            continue;
        }
        *seen.entry(record.key.as_str()).or_default() += 1;
        if original.contains_key(bytes) {
            continue;
        }
        // Not an original record: it must be the new report, complete.
        assert_eq!(
            record.key, KEY,
            "{at}: record {} (offset {}) matches no record of the pool: a torn record (key {:?}, {} value bytes)",
            record.index, record.offset, record.key, record.value_bytes
        );
        assert!(
            record.findings.is_empty(),
            "{at}: new report record {} is damaged: {:?}",
            record.index,
            record.findings
        );
        let report = parse(&record.value, Mode::Lenient)
            .unwrap_or_else(|e| panic!("{at}: record {} is no encoded report: {e}", record.index));
        assert!(
            !report.truncated,
            "{at}: new report cut short: {:?}",
            record.value
        );
        assert_eq!(
            report.get("reason"),
            Some(expect_new),
            "{at}: {:?}",
            record.value
        );
        assert_eq!(
            report.get("vm_id"),
            Some("0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a"),
            "{at}: new report incomplete: {:?}",
            record.value
        );
        left.new_report = true;
    }
    let lost: Vec<String> = (0..OTHERS)
        .map(other_key)
        .filter(|k| !seen.contains_key(k.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "{at}: {} record(s) lost: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    assert!(
        seen.contains_key(KEY),
        "{at}: no {KEY} left, neither old nor new"
    );
    left.duplicated = seen
        .iter()
        .filter(|(k, n)| **k != KEY && **n > 1)
        .map(|(_, n)| n - 1)
        .sum();
    assert!(
        left.duplicated <= 1,
        "{at}: {} other records present twice (at most the one being moved may be)",
        left.duplicated
    );
    left.finished = left.free_slots == 0
        && seen.get(KEY) == Some(&1)
        && left.new_report
        && view.records.len() == OTHERS + 1;
    left
}

#[test]
fn kill_9_loop_of_200_rewrites_leaves_no_torn_record() {
    let rt = runtime();
    let fake = rt
        .block_on(Fake::start(FakeConfig::default()))
        .expect("fake starts");
    let wireserver = fake.wireserver_url();
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = dir.path().join(".kvp_pool_1");
    let original = original_pool();
    let originals: HashMap<Vec<u8>, ()> = original
        .chunks_exact(RECORD_SIZE)
        .map(|r| (r.to_vec(), ()))
        .collect();

    // Calibration: one unkilled run, whose result must be the finished state.
    std::fs::write(&pool, &original).unwrap();
    let calibration = run_with_hard_stop(
        &mut reporter(&pool, &wireserver, 0),
        Duration::from_secs(60),
    );
    assert_eq!(calibration.code(), Some(0), "{}", calibration.stderr);
    let left = check(&std::fs::read(&pool).unwrap(), &originals, 0, &reason(0));
    assert!(
        left.finished,
        "an unkilled run leaves one report and no free slot: {left:?}"
    );
    let full = calibration.elapsed;
    eprintln!("unkilled run: {full:.2?}");

    let (mut untouched, mut mid, mut finished, mut free, mut dups) = (0, 0, 0, 0, 0);
    let started = Instant::now();
    for round in 1..=ROUNDS {
        std::fs::write(&pool, &original).unwrap();
        // Delays walk over [0, 0.9 × the unkilled run), in a scrambled order.
        let fraction = ((round * 61) % ROUNDS) as f64 / ROUNDS as f64;
        let delay = full.mul_f64(0.9 * fraction);
        let mut child = reporter(&pool, &wireserver, round)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn provision-report");
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let status = child.wait().expect("wait");
        let bytes = std::fs::read(&pool).unwrap();
        let left = check(&bytes, &originals, round, &reason(round));
        let _ = status;
        if bytes == original {
            untouched += 1;
        } else if left.finished {
            finished += 1;
        } else {
            mid += 1;
        }
        free += left.free_slots;
        dups += left.duplicated;
    }
    eprintln!(
        "{ROUNDS} kills in {:.1?}: {mid} mid-rewrite, {untouched} before it, {finished} after it; \
         {free} free slot(s) and {dups} duplicated record(s) left in all; no torn record, none lost",
        started.elapsed()
    );
    // The kills must really land inside the rewrite, or the loop proves nothing.
    assert!(
        mid >= ROUNDS / 4,
        "only {mid} of {ROUNDS} kills landed during the rewrite (unkilled run {full:?})"
    );

    // The next unkilled run repairs what the last kill left.
    let repair = run_with_hard_stop(
        &mut reporter(&pool, &wireserver, ROUNDS + 1),
        Duration::from_secs(60),
    );
    assert_eq!(repair.code(), Some(0), "{}", repair.stderr);
    let left = check(
        &std::fs::read(&pool).unwrap(),
        &originals,
        ROUNDS + 1,
        &reason(ROUNDS + 1),
    );
    assert!(left.finished, "after a clean run: {left:?}");
    drop(fake);
}
