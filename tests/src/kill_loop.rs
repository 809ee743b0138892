//! The KVP kill loop, shared by `tests/tests/reliability_kvp_kill.rs` and the bench's
//! reliability part: a pool with duplicate records is rewritten by a process that is killed
//! with SIGKILL at a moment that walks over the whole run, and after each kill the pool is
//! judged with the oracle's reader (`wirecheck_oracle::kvp`), as the host would read it.
//!
//! The pool: an earlier `PROVISIONING_REPORT` first (so that every record after it has to
//! move down when it is dropped), `others` records of another writer with long values (a torn
//! record shows as bytes that match no record), and two more earlier reports further on.
//!
//! After a kill the pool must hold whole records only; every record with a key byte-equal to
//! a record of the original pool or a complete new report; every other-writer record; a
//! report (old or new); at most one record present twice (the one being moved when the kill
//! came). Slots with an empty key are free slots (reporter/src/kvp/pool.rs): counted, allowed.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wirecheck_oracle::encoded::{Mode, parse};
use wirecheck_oracle::kvp::{RECORD_SIZE, decode_pool, encode_record};

pub const KEY: &str = "PROVISIONING_REPORT";
/// The vm id the new report must carry.
pub const VM_ID: &str = "0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a";

pub fn other_key(j: usize) -> String {
    format!("writer_event_{j:05}")
}

/// Long (1,200–2,000 bytes: the value crosses a page boundary in most slots) and distinct per
/// record, so a record made of two records' bytes matches neither.
pub fn other_value(j: usize) -> String {
    let fill = char::from(b'a' + (j % 26) as u8)
        .to_string()
        .repeat(1_200 + (j * 37) % 800);
    format!("{j}:{fill}:{j}")
}

/// The reason the new report of `round` carries.
pub fn reason(round: usize) -> String {
    format!("kill loop round {round}")
}

/// The pool every round starts from.
pub fn original_pool(others: usize) -> Vec<u8> {
    let mut records: Vec<(String, String)> = (0..others)
        .map(|j| (other_key(j), other_value(j)))
        .collect();
    for (n, at) in [0, others / 2, others.saturating_sub(1)].iter().enumerate() {
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

/// What one kill left.
#[derive(Debug, Default, Clone)]
pub struct Left {
    /// One report, no free slot, every record once: what an unkilled run leaves.
    pub finished: bool,
    pub free_slots: usize,
    /// Other-writer records present more than once (extra copies).
    pub duplicated: usize,
    pub new_report: bool,
}

/// What is wrong with a pool after a kill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// Not a whole number of records.
    Ragged { size: usize },
    /// A record that is neither an original record nor a complete new report.
    Torn {
        index: usize,
        key: String,
        why: String,
    },
    /// Other-writer records missing.
    Lost { keys: Vec<String> },
    /// No report at all, old or new.
    NoReport,
    /// More than one record present twice.
    Duplicated { extra: usize },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Ragged { size } => write!(f, "the pool is {size} bytes, not whole records"),
            Damage::Torn { index, key, why } => {
                write!(f, "record {index} (key {key:?}) is torn: {why}")
            }
            Damage::Lost { keys } => write!(
                f,
                "{} record(s) lost, e.g. {:?}",
                keys.len(),
                &keys[..keys.len().min(5)]
            ),
            Damage::NoReport => write!(f, "no {KEY} left, neither old nor new"),
            Damage::Duplicated { extra } => write!(
                f,
                "{extra} extra copies of other records (at most the one being moved may be)"
            ),
        }
    }
}

/// Judges a pool after a kill.
pub fn check(
    pool: &[u8],
    originals: &HashSet<Vec<u8>>,
    others: usize,
    round: usize,
) -> Result<Left, Vec<Damage>> {
    if !pool.len().is_multiple_of(RECORD_SIZE) {
        return Err(vec![Damage::Ragged { size: pool.len() }]);
    }
    let view = decode_pool(pool);
    let mut damage = Vec::new();
    let mut left = Left::default();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let expected_reason = reason(round);
    for record in &view.records {
        let bytes = &pool[record.offset..record.offset + RECORD_SIZE];
        if record.key_bytes == 0 {
            left.free_slots += 1;
            continue;
        }
        *seen.entry(record.key.as_str()).or_default() += 1;
        if originals.contains(bytes) {
            continue;
        }
        let torn = |why: String| Damage::Torn {
            index: record.index,
            key: record.key.clone(),
            why,
        };
        if record.key != KEY {
            damage.push(torn(format!(
                "matches no record of the pool ({} value bytes)",
                record.value_bytes
            )));
            continue;
        }
        if !record.findings.is_empty() {
            damage.push(torn(format!("{:?}", record.findings)));
            continue;
        }
        match parse(&record.value, Mode::Lenient) {
            Ok(report)
                if !report.truncated
                    && report.get("reason") == Some(expected_reason.as_str())
                    && report.get("vm_id") == Some(VM_ID) =>
            {
                left.new_report = true
            }
            Ok(_) => damage.push(torn(format!("incomplete report {:?}", record.value))),
            Err(e) => damage.push(torn(format!("not an encoded report: {e}"))),
        }
    }
    let lost: Vec<String> = (0..others)
        .map(other_key)
        .filter(|k| !seen.contains_key(k.as_str()))
        .collect();
    if !lost.is_empty() {
        damage.push(Damage::Lost { keys: lost });
    }
    if !seen.contains_key(KEY) {
        damage.push(Damage::NoReport);
    }
    left.duplicated = seen
        .iter()
        .filter(|(k, n)| **k != KEY && **n > 1)
        .map(|(_, n)| n - 1)
        .sum();
    if left.duplicated > 1 {
        damage.push(Damage::Duplicated {
            extra: left.duplicated,
        });
    }
    left.finished = left.free_slots == 0
        && seen.get(KEY) == Some(&1)
        && left.new_report
        && view.records.len() == others + 1;
    if damage.is_empty() {
        Ok(left)
    } else {
        Err(damage)
    }
}

/// Counts over a whole loop.
#[derive(Debug, Default, Clone)]
pub struct LoopStats {
    pub rounds: usize,
    /// The unkilled run the delays were scaled to.
    pub unkilled: Duration,
    pub wall: Duration,
    /// Kills that found the pool as prepared, half rewritten, or finished.
    pub before: usize,
    pub during: usize,
    pub after: usize,
    pub free_slots: usize,
    pub duplicated: usize,
    /// Rounds whose pool was damaged (torn, lost, ...), with what was wrong.
    pub damaged: Vec<(usize, Vec<Damage>)>,
    /// Other-writer records lost, over all rounds.
    pub lost_records: usize,
    /// Torn records, over all rounds.
    pub torn_records: usize,
}

/// Runs the loop: `writer(round)` is the command that rewrites `pool` (upserting the report of
/// `round`). Round 0 is the unkilled calibration run (three times); rounds 1..=`rounds` are killed after a
/// delay walking over [0, `span` × the unkilled run) in a scrambled order.
pub fn run(
    pool: &Path,
    others: usize,
    rounds: usize,
    span: f64,
    mut writer: impl FnMut(usize) -> Command,
) -> std::io::Result<LoopStats> {
    let original = original_pool(others);
    let originals: HashSet<Vec<u8>> = original
        .chunks_exact(RECORD_SIZE)
        .map(<[u8]>::to_vec)
        .collect();
    let mut stats = LoopStats {
        rounds,
        ..LoopStats::default()
    };
    let spawn = |cmd: &mut Command| {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    };
    // Calibration: the quickest of three unkilled runs (the first pays for cold caches).
    stats.unkilled = Duration::MAX;
    for _ in 0..3 {
        std::fs::write(pool, &original)?;
        let started = Instant::now();
        let status = spawn(&mut writer(0))?.wait()?;
        stats.unkilled = stats.unkilled.min(started.elapsed());
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "the unkilled calibration run failed: {status}"
            )));
        }
    }
    let record = |stats: &mut LoopStats, round: usize, result: Result<Left, Vec<Damage>>| {
        if let Err(damage) = &result {
            for d in damage {
                match d {
                    Damage::Lost { keys } => stats.lost_records += keys.len(),
                    Damage::Torn { .. } => stats.torn_records += 1,
                    _ => {}
                }
            }
        }
        match result {
            Ok(left) => {
                stats.free_slots += left.free_slots;
                stats.duplicated += left.duplicated;
                left
            }
            Err(damage) => {
                stats.damaged.push((round, damage));
                Left::default()
            }
        }
    };
    let calibration = check(&std::fs::read(pool)?, &originals, others, 0);
    if !matches!(&calibration, Ok(left) if left.finished) {
        return Err(std::io::Error::other(format!(
            "the unkilled calibration run did not leave the finished pool: {calibration:?}"
        )));
    }
    let loop_started = Instant::now();
    for round in 1..=rounds {
        std::fs::write(pool, &original)?;
        let fraction = ((round * 61) % rounds.max(1)) as f64 / rounds.max(1) as f64;
        let delay = stats.unkilled.mul_f64(span * fraction);
        let mut child = spawn(&mut writer(round))?;
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        child.wait()?;
        let bytes = std::fs::read(pool)?;
        let untouched = bytes == original;
        let left = record(&mut stats, round, check(&bytes, &originals, others, round));
        if untouched {
            stats.before += 1;
        } else if left.finished {
            stats.after += 1;
        } else {
            stats.during += 1;
        }
    }
    stats.wall = loop_started.elapsed();
    Ok(stats)
}
