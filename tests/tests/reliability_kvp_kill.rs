//! `kill -9` of `provision-report` while it rewrites a pool with duplicate records, 200 times
//! (the loop and its checks: `wirecheck_e2e::kill_loop`). After every kill the pool, read with
//! the oracle as the host would, holds no torn record and has lost none; the kills must really
//! land during the rewrite; and one more unkilled run repairs what the last kill left.

mod reliability_support;

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use fake_wireserver::{Fake, FakeConfig};
use reliability_support::{provision_report, runtime};
use wirecheck_e2e::kill_loop::{self, VM_ID};
use wirecheck_oracle::kvp::RECORD_SIZE;

const ROUNDS: usize = 200;
/// 2,500 other records: a 6.4 MB pool, so that moving them down takes tens of milliseconds.
const OTHERS: usize = 2_500;

fn reporter(pool: &Path, wireserver: &str, round: usize) -> Command {
    let mut cmd = Command::new(provision_report());
    cmd.args(["failure", "--reason", &kill_loop::reason(round)])
        .arg(format!("--kvp-pool={}", pool.display()))
        .arg(format!("--wireserver={wireserver}"))
        .arg("--no-imds")
        .arg(format!("--vm-id={VM_ID}"))
        .args(["--timeout=10", "--retry-interval=0.2", "--log-level=warn"])
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY");
    cmd
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

    let stats = kill_loop::run(&pool, OTHERS, ROUNDS, 0.9, |round| {
        reporter(&pool, &wireserver, round)
    })
    .expect("the kill loop runs");
    eprintln!(
        "{ROUNDS} kills in {:.1?} (unkilled run {:.1?}): {} during the rewrite, {} before, {} \
         after; {} free slot(s) and {} duplicated record(s) left in all; {} torn, {} lost",
        stats.wall,
        stats.unkilled,
        stats.during,
        stats.before,
        stats.after,
        stats.free_slots,
        stats.duplicated,
        stats.torn_records,
        stats.lost_records
    );
    let damaged: Vec<String> = stats
        .damaged
        .iter()
        .take(5)
        .map(|(round, damage)| {
            let what: Vec<String> = damage.iter().map(ToString::to_string).collect();
            format!("round {round}: {}", what.join("; "))
        })
        .collect();
    assert!(
        stats.damaged.is_empty(),
        "{} of {ROUNDS} kills damaged the pool:\n{}",
        stats.damaged.len(),
        damaged.join("\n")
    );
    // The kills must really land inside the rewrite, or the loop proves nothing.
    assert!(
        stats.during >= ROUNDS / 4,
        "only {} of {ROUNDS} kills landed during the rewrite (unkilled run {:?})",
        stats.during,
        stats.unkilled
    );

    // The next unkilled run repairs what the last kill left.
    let repair = reporter(&pool, &wireserver, ROUNDS + 1)
        .output()
        .expect("run provision-report");
    assert!(
        repair.status.success(),
        "{}",
        String::from_utf8_lossy(&repair.stderr)
    );
    let originals: HashSet<Vec<u8>> = kill_loop::original_pool(OTHERS)
        .chunks_exact(RECORD_SIZE)
        .map(<[u8]>::to_vec)
        .collect();
    let left = kill_loop::check(
        &std::fs::read(&pool).unwrap(),
        &originals,
        OTHERS,
        ROUNDS + 1,
    )
    .unwrap_or_else(|damage| panic!("after a clean run: {damage:?}"));
    assert!(left.finished, "after a clean run: {left:?}");
    drop(fake);
}
