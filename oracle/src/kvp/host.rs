//! What the Hyper-V host keeps of a pool (docs/protocol.md §7.1): one record per key.
//!
//! hv_kvp_daemon hands the host every record by index, duplicates included, and the host keeps
//! only one record per key (azure-init PR #313). Which one it keeps is not documented: the
//! daemon's own keyed read returns the first match, its enumeration passes them all. So the
//! oracle takes the strict reading: of records sharing a key, none is sure to reach the host.
//! Writers that need more than 1022 bytes give each chunk its own key (`…|<index>`, cloud-init's
//! `msg_i` slices and PR #313's diagnostics); [`suffix_chunked_events`] reads those back as one
//! event, in index order.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{HostRecord, KEY_SIZE, PROVISIONING_REPORT_KEY, PoolView};
use crate::bounds::{MAX_FINDINGS_OF_A_KIND, Repeats};
use crate::finding::Finding;
use crate::id;

/// Records the host sees under one key (its first 254 bytes), more than one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateKey {
    /// The key as the host sees it.
    pub key: String,
    /// The records under it, in file order.
    pub records: Vec<usize>,
}

/// Every key the host sees more than once, in order of first appearance. Empty keys are left
/// out (`kvp.key.empty` covers them).
pub fn duplicate_keys(records: &[HostRecord]) -> Vec<DuplicateKey> {
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<DuplicateKey> = Vec::new();
    for record in records.iter().filter(|r| !r.key.is_empty()) {
        crate::bounds::step(1);
        match at.get(record.key.as_str()) {
            Some(&g) => groups[g].records.push(record.index),
            None => {
                at.insert(&record.key, groups.len());
                groups.push(DuplicateKey {
                    key: record.key.clone(),
                    records: vec![record.index],
                });
            }
        }
    }
    groups.retain(|g| g.records.len() > 1);
    groups
}

/// `records 3, 4 and 7`; past 16 records, `records 3, 4, … and 9 more`, so a message stays
/// short whatever the pool holds.
pub(super) fn list(records: &[usize]) -> String {
    let shown = &records[..records.len().min(MAX_FINDINGS_OF_A_KIND)];
    let names: Vec<String> = shown.iter().map(usize::to_string).collect();
    if records.len() > shown.len() {
        return format!(
            "records {}, … and {} more",
            names.join(", "),
            records.len() - shown.len()
        );
    }
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => {
            format!("records {} and {last}", rest.join(", "))
        }
        _ => format!("record {}", names.join("")),
    }
}

/// One `kvp.key.duplicate` warning per key the host sees more than once. `PROVISIONING_REPORT`
/// has findings of its own (`kvp.provisioning-report.split` / `.multiple`).
pub(super) fn duplicate_findings(
    records: &[HostRecord],
    findings: &mut Vec<Finding>,
    repeats: &mut Repeats,
) {
    for dup in duplicate_keys(records) {
        if dup.key == PROVISIONING_REPORT_KEY {
            continue;
        }
        repeats.push(findings, id::kvp::KEY_DUPLICATE, || Finding::warning(
            id::kvp::KEY_DUPLICATE,
            format!(
                "key {:?} is in {}: the host keeps one record per key (azure-init PR #313), so all but one are lost, and which one survives is not documented (§7.1); give each record its own key (e.g. a `|<index>` suffix)",
                dup.key,
                list(&dup.records)
            ),
        ));
    }
}

/// The on-disk value bytes of a record, up to its NUL.
fn value_bytes<'a>(bytes: &'a [u8], record: &HostRecord) -> &'a [u8] {
    let start = record.offset + KEY_SIZE;
    &bytes[start..start + record.value_bytes]
}

/// How many bytes at the end of `value` start a character the value does not finish.
fn open_tail(value: &[u8]) -> usize {
    match std::str::from_utf8(value) {
        Err(e) if e.error_len().is_none() => value.len() - e.valid_up_to(),
        _ => 0,
    }
}

/// `kvp.value.split-character`: one record's value ends inside a character that the next
/// record of the same event finishes. Each record alone is then invalid UTF-8, which the
/// kernel's UTF-8 → UTF-16 conversion for the host rejects (azure-init `doc/kvp.md`), so
/// neither record reaches the host intact. `pairs` are (record, next chunk of its event).
pub(super) fn split_character_findings(
    bytes: &[u8],
    records: &[HostRecord],
    pairs: impl IntoIterator<Item = (usize, usize)>,
    findings: &mut Vec<Finding>,
    repeats: &mut Repeats,
) {
    for (a, b) in pairs {
        let (head, tail) = (
            value_bytes(bytes, &records[a]),
            value_bytes(bytes, &records[b]),
        );
        let open = open_tail(head);
        let continued = tail.iter().take_while(|&&c| c & 0xC0 == 0x80).count();
        if open == 0 || continued == 0 {
            continue;
        }
        let mut joined = head[head.len() - open..].to_vec();
        joined.extend_from_slice(&tail[..continued.min(3)]);
        let Some(ch) = String::from_utf8_lossy(&joined).chars().next() else {
            continue;
        };
        let hex = |b: &[u8]| {
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        repeats.push(findings, id::kvp::VALUE_SPLIT_CHARACTER, || Finding::warning(
            id::kvp::VALUE_SPLIT_CHARACTER,
            format!(
                "records {a} and {b} (key {:?}): the value is cut inside the character {ch:?} (bytes {} | {}); each record alone is invalid UTF-8, which the kernel's conversion for the host rejects (§7.1); cut chunks on character boundaries",
                records[a].key,
                hex(&head[head.len() - open..]),
                hex(&tail[..continued.min(3)])
            ),
        ));
    }
}

/// Pairs of consecutive records under one key, as azure-init main writes its chunks.
pub(super) fn same_key_runs(records: &[HostRecord]) -> Vec<(usize, usize)> {
    records
        .windows(2)
        .filter(|w| !w[0].key.is_empty() && w[0].key == w[1].key)
        .map(|w| (w[0].index, w[1].index))
        .collect()
}

/// An event written as chunks under unique keys `<base>|<index>` (PR #313's diagnostics, and
/// any writer following cloud-init's naming), read back as one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkedEvent {
    /// The key without its `|<index>` suffix.
    pub key: String,
    /// Record indexes in chunk order.
    pub records: Vec<usize>,
    /// The chunks' on-disk bytes joined in order (lossy UTF-8 only if the whole is invalid).
    pub value: String,
    /// Gaps in the indexes, or an index written twice.
    pub findings: Vec<Finding>,
}

/// The base and index of a chunk key: at least three `|` fields before a decimal index of at
/// most four digits (PR #313 caps an event at 1023 chunks). cloud-init's keys are read by
/// [`super::cloud_init_split_events`], which also checks `msg_i`.
fn chunk_key(key: &str) -> Option<(&str, u64)> {
    if key.starts_with("CLOUD_INIT|") {
        return None;
    }
    let (base, index) = key.rsplit_once('|')?;
    let digits = !index.is_empty() && index.len() <= 4 && index.bytes().all(|b| b.is_ascii_digit());
    if !digits || base.matches('|').count() < 2 {
        return None;
    }
    Some((base, index.parse().ok()?))
}

/// Groups `<base>|<index>` records into events, joined in index order. An event missing an
/// index (the host never saw it, or the writer skipped it) is a `kvp.chunk.gap` warning.
pub fn suffix_chunked_events(bytes: &[u8], view: &PoolView) -> Vec<ChunkedEvent> {
    chunked_events(bytes, &view.records)
}

pub(super) fn chunked_events(bytes: &[u8], records: &[HostRecord]) -> Vec<ChunkedEvent> {
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<(&str, Vec<(u64, usize)>)> = Vec::new();
    for record in records {
        crate::bounds::step(1);
        let Some((base, index)) = chunk_key(&record.key) else {
            continue;
        };
        let g = *at.entry(base).or_insert_with(|| {
            groups.push((base, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push((index, record.index));
    }
    groups
        .into_iter()
        .map(|(base, mut chunks)| {
            chunks.sort();
            let mut findings = Vec::new();
            let indexes: Vec<u64> = chunks.iter().map(|c| c.0).collect();
            if indexes.iter().enumerate().any(|(n, &i)| i != n as u64) {
                let shown = &indexes[..indexes.len().min(MAX_FINDINGS_OF_A_KIND)];
                findings.push(Finding::warning(
                    id::kvp::CHUNK_GAP,
                    format!(
                        "event {base:?}: chunk indexes {shown:?}{}, expected 0..{} once each; the event cannot be read whole",
                        if shown.len() < indexes.len() { " …" } else { "" },
                        chunks.len()
                    ),
                ));
            }
            let order: Vec<usize> = chunks.iter().map(|c| c.1).collect();
            let joined: Vec<u8> = order
                .iter()
                .flat_map(|&r| value_bytes(bytes, &records[r]).iter().copied())
                .collect();
            ChunkedEvent {
                key: base.to_string(),
                records: order,
                value: String::from_utf8_lossy(&joined).into_owned(),
                findings,
            }
        })
        .collect()
}

/// Consecutive chunks of each suffix-chunked event, for [`split_character_findings`].
pub(super) fn chunk_pairs(events: &[ChunkedEvent]) -> Vec<(usize, usize)> {
    events
        .iter()
        .flat_map(|e| e.records.windows(2).map(|w| (w[0], w[1])))
        .collect()
}
