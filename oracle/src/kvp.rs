//! Hyper-V KVP pool files as the host sees them (docs/protocol.md §7).
//!
//! A pool is a bare sequence of 2560-byte records (512-byte key + 2048-byte value, UTF-8, NUL
//! padded). The host surfaces only the first 254 key bytes and 1022 value bytes; [`decode_pool`]
//! returns that view plus findings about everything a writer got wrong on disk.

use serde::{Deserialize, Serialize};

use super::bounds::Repeats;
use super::encoded::{self, EncodedReport, Mode};
use super::finding::{Finding, Severity};
use super::id;

mod host;
pub use host::{ChunkedEvent, DuplicateKey, duplicate_keys, suffix_chunked_events};

/// One record: key field + value field.
pub const RECORD_SIZE: usize = 2560;
/// The key field's size on disk (NUL-padded).
pub const KEY_SIZE: usize = 512;
/// The value field's size on disk (NUL-padded).
pub const VALUE_SIZE: usize = 2048;
/// What the host surfaces of a key (bytes).
pub const HOST_KEY_MAX: usize = 254;
/// What the host surfaces of a value (bytes).
pub const HOST_VALUE_MAX: usize = 1022;

/// The key under which cloud-init and azure-init write their encoded report (§7.2, §7.3).
pub const PROVISIONING_REPORT_KEY: &str = "PROVISIONING_REPORT";

/// One record of a pool as the host reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// 0-based position in the pool.
    pub index: usize,
    /// Byte offset of the record in the pool file.
    pub offset: usize,
    /// As the host sees it: cut to 254 bytes, lossy UTF-8.
    pub key: String,
    /// As the host sees it: cut to 1022 bytes, lossy UTF-8.
    pub value: String,
    /// On-disk length before the first NUL.
    pub key_bytes: usize,
    /// On-disk length before the first NUL.
    pub value_bytes: usize,
    /// What is wrong with this record (ids start with `kvp.`).
    pub findings: Vec<Finding>,
}

/// A whole pool file as the host reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolView {
    /// The file's size in bytes.
    pub size: usize,
    /// Every record, in file order.
    pub records: Vec<HostRecord>,
    /// The last `PROVISIONING_REPORT` record (its index; for a report azure-init split into
    /// 1022-byte chunks, the index of the first chunk) and the lenient parse of its chunks
    /// rejoined: what the agent meant, not what the host shows (`kvp.provisioning-report.split`).
    pub provisioning_report: Option<(usize, EncodedReport)>,
    /// Pool-level findings: size not a multiple of 2560, an unparsable provisioning report, …
    pub findings: Vec<Finding>,
}

impl PoolView {
    /// Every finding: the pool's, then each record's.
    pub fn all_findings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .chain(self.records.iter().flat_map(|r| r.findings.iter()))
    }
}

/// Why a record cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvpError {
    /// An empty key.
    #[error("key is empty; a KVP record needs a key")]
    KeyEmpty,
    /// A key longer than its field allows.
    #[error("key is {len} bytes; a KVP key holds at most {max} bytes plus its NUL")]
    KeyTooLong {
        /// The key's length in bytes.
        len: usize,
        /// The most it may have.
        max: usize,
    },
    /// A value longer than its field allows.
    #[error("value is {len} bytes; a KVP value holds at most {max} bytes plus its NUL")]
    ValueTooLong {
        /// The value's length in bytes.
        len: usize,
        /// The most it may have.
        max: usize,
    },
    /// A NUL byte inside the key or value.
    #[error("{field} has a NUL byte at offset {at}; NUL ends a KVP field")]
    Nul {
        /// `"key"` or `"value"`.
        field: &'static str,
        /// Its byte offset.
        at: usize,
    },
}

/// Encodes one NUL-padded record, enforcing the on-disk limits (key ≤ 511 bytes, value ≤ 2047
/// bytes, no NUL). The host limits (254/1022) are not enforced here: [`decode_pool`] reports them.
pub fn encode_record(key: &str, value: &str) -> Result<[u8; RECORD_SIZE], KvpError> {
    if key.is_empty() {
        return Err(KvpError::KeyEmpty);
    }
    if key.len() >= KEY_SIZE {
        return Err(KvpError::KeyTooLong {
            len: key.len(),
            max: KEY_SIZE - 1,
        });
    }
    if value.len() >= VALUE_SIZE {
        return Err(KvpError::ValueTooLong {
            len: value.len(),
            max: VALUE_SIZE - 1,
        });
    }
    for (field, text) in [("key", key), ("value", value)] {
        if let Some(at) = text.bytes().position(|b| b == 0) {
            return Err(KvpError::Nul { field, at });
        }
    }
    let mut record = [0u8; RECORD_SIZE];
    record[..key.len()].copy_from_slice(key.as_bytes());
    record[KEY_SIZE..KEY_SIZE + value.len()].copy_from_slice(value.as_bytes());
    Ok(record)
}

/// Encodes records one after another, as an appending writer would.
pub fn encode_pool<'a>(
    records: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<u8>, KvpError> {
    let mut pool = Vec::new();
    for (key, value) in records {
        pool.extend_from_slice(&encode_record(key, value)?);
    }
    Ok(pool)
}

/// Decodes a pool file as the host sees it. Never panics.
pub fn decode_pool(bytes: &[u8]) -> PoolView {
    let mut findings = Vec::new();
    let records: Vec<HostRecord> = bytes
        .chunks_exact(RECORD_SIZE)
        .enumerate()
        .map(|(index, record)| decode_record(index, record))
        .collect();

    let partial = bytes.len() % RECORD_SIZE;
    if partial != 0 {
        let offset = bytes.len() - partial;
        let key_end = bytes[offset..]
            .iter()
            .take(KEY_SIZE)
            .position(|&b| b == 0)
            .unwrap_or(partial.min(KEY_SIZE));
        findings.push(Finding::error(
            id::kvp::POOL_SIZE,
            format!(
                "the pool is {} bytes, not a multiple of {RECORD_SIZE}: a partial record of {partial} bytes at offset {offset} (key {:?}) follows {} whole records; a reader of whole records drops it",
                bytes.len(),
                String::from_utf8_lossy(&bytes[offset..offset + key_end]),
                records.len()
            ),
        ));
    }

    let provisioning_report = provisioning_report(bytes, &records, &mut findings);
    // What the host keeps: one record per key, each record on its own.
    let mut repeats = Repeats::default();
    host::duplicate_findings(&records, &mut findings, &mut repeats);
    let chunked = host::chunked_events(bytes, &records);
    for f in chunked.iter().flat_map(|e| e.findings.iter()) {
        repeats.push(&mut findings, id::kvp::CHUNK_GAP, || f.clone());
    }
    let mut pairs = host::same_key_runs(&records);
    pairs.extend(host::chunk_pairs(&chunked));
    host::split_character_findings(bytes, &records, pairs, &mut findings, &mut repeats);
    repeats.finish(&mut findings, id::kvp::REPEATED);
    PoolView {
        size: bytes.len(),
        records,
        provisioning_report,
        findings,
    }
}

fn decode_record(index: usize, record: &[u8]) -> HostRecord {
    let offset = index * RECORD_SIZE;
    let mut findings = Vec::new();
    let key = &record[..KEY_SIZE];
    let value = &record[KEY_SIZE..];
    let key_bytes = check_field(index, offset, 0, &KEY_IDS, key, HOST_KEY_MAX, &mut findings);
    let value_bytes = check_field(
        index,
        offset,
        KEY_SIZE,
        &VALUE_IDS,
        value,
        HOST_VALUE_MAX,
        &mut findings,
    );
    if key_bytes == 0 {
        findings.push(Finding::error(
            id::kvp::KEY_EMPTY,
            format!("record {index} (offset {offset}): the key is empty; every record needs a key"),
        ));
    }
    HostRecord {
        index,
        offset,
        key: String::from_utf8_lossy(&key[..key_bytes.min(HOST_KEY_MAX)]).into_owned(),
        value: String::from_utf8_lossy(&value[..value_bytes.min(HOST_VALUE_MAX)]).into_owned(),
        key_bytes,
        value_bytes,
        findings,
    }
}

/// The finding ids of one record field (key or value).
struct FieldIds {
    name: &'static str,
    fills_field: &'static str,
    padding: &'static str,
    invalid_utf8: &'static str,
    over_host_limit: &'static str,
}

const KEY_IDS: FieldIds = FieldIds {
    name: "key",
    fills_field: id::kvp::KEY_FILLS_FIELD,
    padding: id::kvp::KEY_PADDING,
    invalid_utf8: id::kvp::KEY_INVALID_UTF8,
    over_host_limit: id::kvp::KEY_OVER_HOST_LIMIT,
};

const VALUE_IDS: FieldIds = FieldIds {
    name: "value",
    fills_field: id::kvp::VALUE_FILLS_FIELD,
    padding: id::kvp::VALUE_PADDING,
    invalid_utf8: id::kvp::VALUE_INVALID_UTF8,
    over_host_limit: id::kvp::VALUE_OVER_HOST_LIMIT,
};

/// Length of one NUL-terminated field, with findings for what the host or the daemon would
/// trip over. `field_start` is the field's offset within its record.
fn check_field(
    index: usize,
    offset: usize,
    field_start: usize,
    ids: &FieldIds,
    field: &[u8],
    host_max: usize,
    findings: &mut Vec<Finding>,
) -> usize {
    let name = ids.name;
    let at = format!("record {index} (offset {offset})");
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    if len == field.len() {
        findings.push(Finding::error(
            ids.fills_field,
            format!(
                "{at}: the {name} fills all {} bytes with no NUL; on disk a {name} holds at most {} bytes plus its NUL (hv_kvp_daemon rejects it)",
                field.len(),
                field.len() - 1
            ),
        ));
    } else if let Some(junk) = field[len..].iter().position(|&b| b != 0) {
        findings.push(Finding::warning(
            ids.padding,
            format!(
                "{at}: non-NUL byte after the {name}'s terminating NUL at pool offset {}; the padding must be all NUL",
                offset + field_start + len + junk
            ),
        ));
    }
    if let Err(e) = std::str::from_utf8(&field[..len]) {
        findings.push(Finding::warning(
            ids.invalid_utf8,
            format!(
                "{at}: the {name} is not valid UTF-8 from byte {} on (a chunk boundary inside a character?); the kernel's UTF-8 to UTF-16 conversion for the host rejects it (§7.1)",
                e.valid_up_to()
            ),
        ));
    }
    if len > host_max {
        findings.push(Finding::warning(
            ids.over_host_limit,
            format!(
                "{at}: the {name} is {len} bytes; the host sees only the first {host_max} (§7.1)"
            ),
        ));
    }
    len
}

/// The records the last `PROVISIONING_REPORT` was written as: `first..=last`. azure-init main
/// cuts a long value into 1022-byte chunks under the same key (§7.3), so full records right
/// before the last one are its earlier chunks.
fn report_span(records: &[HostRecord]) -> Option<(usize, usize)> {
    let is_report = |r: &HostRecord| r.key == PROVISIONING_REPORT_KEY;
    let last = records.iter().rposition(is_report)?;
    let mut first = last;
    while first > 0
        && is_report(&records[first - 1])
        && records[first - 1].value_bytes == HOST_VALUE_MAX
    {
        first -= 1;
    }
    Some((first, last))
}

/// The on-disk value of the last `PROVISIONING_REPORT`, its chunks joined (lossy UTF-8 only
/// where the joined bytes are invalid), and the records it spans. This is what the agent
/// meant; the host shows one record of it at most (see `kvp.provisioning-report.split`).
pub fn provisioning_report_value(bytes: &[u8], view: &PoolView) -> Option<(Vec<usize>, String)> {
    let (first, last) = report_span(&view.records)?;
    let mut value = Vec::new();
    for record in &view.records[first..=last] {
        let start = record.offset + KEY_SIZE;
        value.extend_from_slice(bytes.get(start..start + record.value_bytes)?);
    }
    Some((
        (first..=last).collect(),
        String::from_utf8_lossy(&value).into_owned(),
    ))
}

/// Parses the last `PROVISIONING_REPORT`, its chunks rejoined, and says what the host keeps of
/// it: one record per key (azure-init PR #313), so a report in several records, or several
/// reports, do not all reach the host.
fn provisioning_report(
    bytes: &[u8],
    records: &[HostRecord],
    findings: &mut Vec<Finding>,
) -> Option<(usize, EncodedReport)> {
    let (first, last) = report_span(records)?;
    let mut value = Vec::new();
    for record in &records[first..=last] {
        let start = record.offset + KEY_SIZE;
        value.extend_from_slice(&bytes[start..start + record.value_bytes.min(HOST_VALUE_MAX)]);
    }
    let value = String::from_utf8_lossy(&value);
    let span: Vec<usize> = (first..=last).collect();
    if first != last {
        findings.push(Finding::error(
            id::kvp::PROVISIONING_REPORT_SPLIT,
            format!(
                "PROVISIONING_REPORT is written as {} records under one key ({}, 1022-byte chunks as azure-init main writes them, §7.3): the host keeps one record per key (azure-init PR #313), so it never shows the report whole, only one chunk; the chunks are rejoined here only to show what was meant",
                span.len(),
                host::list(&span)
            ),
        ));
    }
    let earlier: Vec<usize> = records[..first]
        .iter()
        .filter(|r| r.key == PROVISIONING_REPORT_KEY)
        .map(|r| r.index)
        .collect();
    if !earlier.is_empty() {
        // An identical earlier copy loses nothing, whichever record the host keeps.
        let differ = earlier.iter().any(|&i| records[i].value != value);
        findings.push(Finding::new(
            id::kvp::PROVISIONING_REPORT_MULTIPLE,
            if differ { Severity::Warning } else { Severity::Info },
            format!(
                "PROVISIONING_REPORT is also in {}, before record {first}{}: the host keeps one record per key (azure-init PR #313) and which one is not documented, so strictly it may show {} instead of the last report (§7.1); the last report is the one parsed",
                host::list(&earlier),
                if differ { "" } else { " with the same value" },
                if differ { "an earlier, different report" } else { "an identical copy" },
            ),
        ));
    }
    match encoded::parse(&value, Mode::Lenient) {
        Ok(report) => Some((first, report)),
        Err(e) => {
            findings.push(Finding::error(
                id::kvp::PROVISIONING_REPORT_INVALID,
                format!("record {first}: PROVISIONING_REPORT is not an encoded report (§6.5): {e}"),
            ));
            None
        }
    }
}

/// A cloud-init event whose JSON was over 1024 characters and was cut into `msg_i` slices
/// (§7.2), rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitEvent {
    /// The event key without the `|<i>` suffix.
    pub key: String,
    /// Record indexes in `msg_i` order.
    pub records: Vec<usize>,
    /// The rebuilt message (raw chunks concatenated, then JSON-unescaped); `None` when it does
    /// not rebuild (the findings say why).
    pub message: Option<String>,
    /// Why it does not rebuild, or what is odd about it.
    pub findings: Vec<Finding>,
}

/// Finds cloud-init split events (keys ending in `|<i>` whose value has `"msg_i"`) and rebuilds
/// each message. A slice boundary can fall inside an escape, so slices are never decoded alone.
pub fn cloud_init_split_events(view: &PoolView) -> Vec<SplitEvent> {
    let mut events: Vec<(SplitEvent, Vec<(u64, String)>)> = Vec::new();
    // Event key → its place in `events`: a pool of thousands of events is not searched per record.
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for record in &view.records {
        crate::bounds::step(1);
        let Some((base, suffix)) = record.key.rsplit_once('|') else {
            continue;
        };
        if !record.key.starts_with("CLOUD_INIT|")
            || suffix.is_empty()
            || !suffix.bytes().all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Some((msg_i, raw)) = split_slice(&record.value) else {
            continue;
        };
        let at = match index.get(base) {
            Some(&at) => at,
            None => {
                index.insert(base.to_string(), events.len());
                events.push((
                    SplitEvent {
                        key: base.to_string(),
                        records: Vec::new(),
                        message: None,
                        findings: Vec::new(),
                    },
                    Vec::new(),
                ));
                events.len() - 1
            }
        };
        let (event, slices) = &mut events[at];
        if suffix.parse::<u64>().ok() != Some(msg_i) {
            event.findings.push(Finding::warning(
                id::kvp::SPLIT_INDEX_MISMATCH,
                format!(
                    "record {}: key suffix |{suffix} but \"msg_i\":{msg_i}; rebuilt in msg_i order",
                    record.index
                ),
            ));
        }
        event.records.push(record.index);
        slices.push((msg_i, raw));
    }

    events
        .into_iter()
        .map(|(mut event, slices)| {
            let mut order: Vec<usize> = (0..slices.len()).collect();
            order.sort_by_key(|&i| slices[i].0);
            event.records = order.iter().map(|&i| event.records[i]).collect();
            let indexes: Vec<u64> = order.iter().map(|&i| slices[i].0).collect();
            if indexes.iter().enumerate().any(|(n, &i)| i != n as u64) {
                event.findings.push(Finding::error(
                    id::kvp::SPLIT_GAP,
                    format!(
                        "msg_i values {indexes:?}; expected 0..{} without gaps",
                        slices.len()
                    ),
                ));
            }
            let raw: String = order.iter().map(|&i| slices[i].1.as_str()).collect();
            match serde_json::from_str::<String>(&format!("\"{raw}\"")) {
                Ok(message) => event.message = Some(message),
                Err(e) => event.findings.push(Finding::error(
                    id::kvp::SPLIT_INVALID_JSON,
                    format!("the rebuilt msg is not a valid JSON string body: {e}"),
                )),
            }
            event
        })
        .collect()
}

/// `(msg_i, raw msg)` of one slice value `{…,"msg_i":N,"msg":"<raw>"}`.
fn split_slice(value: &str) -> Option<(u64, String)> {
    let after = &value[value.find("\"msg_i\":")? + "\"msg_i\":".len()..];
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    let msg_i = after[..digits].parse().ok()?;
    let raw = after[digits..]
        .strip_prefix(",\"msg\":\"")?
        .strip_suffix("\"}")?;
    Some((msg_i, raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.id.as_str()).collect()
    }

    /// A pool of thousands of split events (64 MiB pools are read back) looked each record's
    /// event up among all before it; four times the events now cost about four times the steps.
    #[test]
    fn split_events_of_a_large_pool_cost_linear_work() {
        let steps = |n: usize| {
            let records: Vec<(String, String)> = (0..n)
                .map(|i| {
                    (
                        format!("CLOUD_INIT|e{i}|0"),
                        r#"{"msg_i":0,"msg":"x"}"#.to_string(),
                    )
                })
                .collect();
            let pairs: Vec<(&str, &str)> = records
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let view = decode_pool(&encode_pool(pairs).unwrap());
            crate::bounds::take_steps();
            let events = cloud_init_split_events(&view);
            assert_eq!(events.len(), n);
            crate::bounds::take_steps()
        };
        let (small, large) = (steps(500), steps(2000));
        assert!(large <= 5 * small.max(1), "{large} steps against {small}");
    }

    #[test]
    fn round_trip_and_host_view() {
        let long_value = "v".repeat(1500);
        let pool = encode_pool([("k1", "value one"), ("k2", long_value.as_str())]).unwrap();
        let view = decode_pool(&pool);
        assert_eq!(view.size, 2 * RECORD_SIZE);
        assert!(view.findings.is_empty());
        assert_eq!(view.records[0].key, "k1");
        assert_eq!(view.records[0].value, "value one");
        assert!(view.records[0].findings.is_empty());
        assert_eq!(view.records[1].offset, RECORD_SIZE);
        assert_eq!(view.records[1].value_bytes, 1500);
        assert_eq!(view.records[1].value.len(), HOST_VALUE_MAX);
        assert_eq!(
            ids(&view.records[1].findings),
            ["kvp.value.over-host-limit"]
        );
    }

    #[test]
    fn size_padding_utf8_fill_and_empty_key() {
        let mut pool = encode_record("k", "v").unwrap().to_vec();
        pool[KEY_SIZE + 10] = b'x'; // junk after the value's NUL
        let mut second = [0u8; RECORD_SIZE];
        second[..KEY_SIZE].fill(b'K'); // key without NUL
        second[KEY_SIZE..].fill(b'V'); // value fills the field
        pool.extend_from_slice(&second);
        let mut third = encode_record("k3", "x").unwrap();
        third[KEY_SIZE] = 0xff; // invalid UTF-8
        pool.extend_from_slice(&third);
        pool.extend_from_slice(&[0u8; RECORD_SIZE]); // empty record
        pool.extend_from_slice(b"partial");

        let view = decode_pool(&pool);
        assert_eq!(ids(&view.findings), ["kvp.pool.size"]);
        assert!(
            view.findings[0]
                .message
                .contains("partial record of 7 bytes at offset 10240")
        );
        assert_eq!(ids(&view.records[0].findings), ["kvp.value.padding"]);
        assert_eq!(
            ids(&view.records[1].findings),
            [
                "kvp.key.fills-field",
                "kvp.key.over-host-limit",
                "kvp.value.fills-field",
                "kvp.value.over-host-limit"
            ]
        );
        assert_eq!(view.records[1].key.len(), HOST_KEY_MAX);
        assert_eq!(ids(&view.records[2].findings), ["kvp.value.invalid-utf8"]);
        assert_eq!(view.records[2].value, "\u{fffd}");
        assert_eq!(ids(&view.records[3].findings), ["kvp.key.empty"]);
    }

    #[test]
    fn encode_record_limits() {
        assert_eq!(encode_record("", "v"), Err(KvpError::KeyEmpty));
        assert!(encode_record(&"k".repeat(511), "v").is_ok());
        assert_eq!(
            encode_record(&"k".repeat(512), "v"),
            Err(KvpError::KeyTooLong { len: 512, max: 511 })
        );
        assert!(encode_record("k", &"v".repeat(2047)).is_ok());
        assert_eq!(
            encode_record("k", &"v".repeat(2048))
                .unwrap_err()
                .to_string(),
            "value is 2048 bytes; a KVP value holds at most 2047 bytes plus its NUL"
        );
        assert_eq!(
            encode_record("k", "a\0b"),
            Err(KvpError::Nul {
                field: "value",
                at: 1
            })
        );
    }

    #[test]
    fn provisioning_report_last_one_wins_and_chunks_rejoin() {
        let first =
            "result=success|agent=Cloud-Init/26.2|timestamp=2026-11-29T14:30:57+00:00|vm_id=old";
        let second =
            "result=success|agent=Cloud-Init/26.2|timestamp=2026-11-29T14:30:58+00:00|vm_id=new";
        let pool = encode_pool([
            (PROVISIONING_REPORT_KEY, first),
            ("other", "x"),
            (PROVISIONING_REPORT_KEY, second),
        ])
        .unwrap();
        let view = decode_pool(&pool);
        let (index, report) = view.provisioning_report.unwrap();
        assert_eq!(index, 2);
        assert_eq!(report.get("vm_id"), Some("new"));
        assert_eq!(ids(&view.findings), ["kvp.provisioning-report.multiple"]);
        assert_eq!(view.findings[0].severity, Severity::Warning);
        assert!(
            view.findings[0]
                .message
                .contains("also in record 0, before record 2")
        );

        // azure-init: one report longer than 1022 bytes, written as two chunks.
        let long = format!(
            "result=error|reason=r|agent=Azure-Init/0.1.1|error={}|pps_type=None|vm_id=v|timestamp=2026-06-17T00:00:00+00:00|documentation_url=https://aka.ms/linuxprovisioningerror",
            "e".repeat(1200)
        );
        let (a, b) = long.split_at(HOST_VALUE_MAX);
        let view = decode_pool(
            &encode_pool([(PROVISIONING_REPORT_KEY, a), (PROVISIONING_REPORT_KEY, b)]).unwrap(),
        );
        let (index, report) = view.provisioning_report.unwrap();
        assert_eq!(index, 0);
        assert_eq!(report.get("error").map(str::len), Some(1200));
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        assert_eq!(ids(&view.findings), ["kvp.provisioning-report.split"]);

        let view =
            decode_pool(&encode_pool([(PROVISIONING_REPORT_KEY, "result=x|'broken")]).unwrap());
        assert!(view.provisioning_report.is_some());
        let view = decode_pool(&encode_pool([(PROVISIONING_REPORT_KEY, "result=x|'a'b")]).unwrap());
        assert_eq!(view.provisioning_report, None);
        assert_eq!(ids(&view.findings), ["kvp.provisioning-report.invalid"]);
    }

    /// The host keeps one record per key: a key written twice loses one of them, and the
    /// finding names both (which one survives is not documented). Keys the host cuts to the
    /// same 254 bytes are one key to it.
    #[test]
    fn a_key_written_twice_names_the_records_the_host_may_lose() {
        let long_a = format!("{}a", "k".repeat(HOST_KEY_MAX));
        let long_b = format!("{}b", "k".repeat(HOST_KEY_MAX));
        let view = decode_pool(
            &encode_pool([
                ("event|1", "x"),
                ("other", "y"),
                ("event|1", "z"),
                (long_a.as_str(), "1"),
                (long_b.as_str(), "2"),
            ])
            .unwrap(),
        );
        assert_eq!(
            ids(&view.findings),
            ["kvp.key.duplicate", "kvp.key.duplicate"]
        );
        assert!(
            view.findings[0]
                .message
                .contains("\"event|1\" is in records 0 and 2")
        );
        assert!(view.findings[1].message.contains("records 3 and 4"));
        let dups = duplicate_keys(&view.records);
        assert_eq!(dups[0].records, [0, 2]);
    }

    /// azure-init main: a long report cut into 1022-byte chunks under the one key, the cut
    /// inside a character. The host shows one chunk; the split and the cut are findings.
    #[test]
    fn a_report_in_chunks_under_one_key_is_not_delivered_whole() {
        let report = format!(
            "result=error|reason=r|agent=Azure-Init/0.1.1|user=x{}|pps_type=None|vm_id=v|timestamp=2026-06-17T00:00:00+00:00",
            "\u{20ac}".repeat(400)
        );
        let bytes = report.as_bytes();
        let mut pool = Vec::new();
        for chunk in bytes.chunks(HOST_VALUE_MAX) {
            let mut record = [0u8; RECORD_SIZE];
            record[..PROVISIONING_REPORT_KEY.len()]
                .copy_from_slice(PROVISIONING_REPORT_KEY.as_bytes());
            record[KEY_SIZE..KEY_SIZE + chunk.len()].copy_from_slice(chunk);
            pool.extend_from_slice(&record);
        }
        let view = decode_pool(&pool);
        assert_eq!(
            ids(&view.findings),
            ["kvp.provisioning-report.split", "kvp.value.split-character"]
        );
        assert_eq!(view.findings[0].severity, Severity::Error);
        assert!(
            view.findings[0]
                .message
                .contains("2 records under one key (records 0 and 1")
        );
        assert!(view.findings[1].message.contains("records 0 and 1"));
        assert!(view.findings[1].message.contains("'\u{20ac}'"));
        let (span, joined) = provisioning_report_value(&pool, &view).unwrap();
        assert_eq!((span, joined.as_str()), (vec![0, 1], report.as_str()));
    }

    /// Two whole reports: the host keeps one and the sources do not say which, so a different
    /// earlier report is a warning; an identical copy loses nothing.
    #[test]
    fn two_reports_under_one_key_are_a_finding_unless_identical() {
        let old = "result=error|reason=r|agent=Cloud-Init/26.2|vm_id=v|timestamp=t";
        let new = "result=success|agent=Cloud-Init/26.2|vm_id=v|timestamp=t";
        let differ = decode_pool(
            &encode_pool([
                (PROVISIONING_REPORT_KEY, old),
                (PROVISIONING_REPORT_KEY, new),
            ])
            .unwrap(),
        );
        assert_eq!(ids(&differ.findings), ["kvp.provisioning-report.multiple"]);
        assert_eq!(differ.findings[0].severity, Severity::Warning);
        let same = decode_pool(
            &encode_pool([
                (PROVISIONING_REPORT_KEY, new),
                (PROVISIONING_REPORT_KEY, new),
            ])
            .unwrap(),
        );
        assert_eq!(same.findings[0].severity, Severity::Info);
    }

    /// PR #313's keys: `<base>|<index>`, each chunk a key of its own. Read as one event in
    /// index order whatever the file order; no duplicate; a missing index is a gap.
    #[test]
    fn unique_suffix_chunks_are_one_event() {
        let base = "DIAG|azure-init/0.1.1|vm|event|n|e1|2026-08-31T12:34:56.789Z|none||";
        let (k0, k1, k2) = (
            format!("{base}|0"),
            format!("{base}|1"),
            format!("{base}|2"),
        );
        let gap = "azure-init-0.1.1|vm|INFO|n|e2";
        let (g0, g2) = (format!("{gap}|0"), format!("{gap}|2"));
        let pool = encode_pool([
            (k1.as_str(), "b\u{e9}"),
            (k0.as_str(), "a"),
            (g0.as_str(), "x"),
            (k2.as_str(), "c"),
            (g2.as_str(), "z"),
        ])
        .unwrap();
        let view = decode_pool(&pool);
        let events = suffix_chunked_events(&pool, &view);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].key, base);
        assert_eq!(events[0].records, [1, 0, 3]);
        assert_eq!(events[0].value, "ab\u{e9}c");
        assert!(events[0].findings.is_empty());
        assert_eq!(ids(&events[1].findings), ["kvp.chunk.gap"]);
        assert_eq!(ids(&view.findings), ["kvp.chunk.gap"]);
    }

    /// Unique keys do not save a chunk cut inside a character: each record is read alone.
    #[test]
    fn suffix_chunks_cut_inside_a_character_are_a_finding() {
        let text = "\u{20ac}\u{20ac}".as_bytes();
        let base = "azure-init-0.1.1|vm|INFO|n|e3";
        let mut pool = Vec::new();
        for (i, chunk) in [&text[..4], &text[4..]].into_iter().enumerate() {
            let key = format!("{base}|{i}");
            let mut record = [0u8; RECORD_SIZE];
            record[..key.len()].copy_from_slice(key.as_bytes());
            record[KEY_SIZE..KEY_SIZE + chunk.len()].copy_from_slice(chunk);
            pool.extend_from_slice(&record);
        }
        let view = decode_pool(&pool);
        assert_eq!(ids(&view.findings), ["kvp.value.split-character"]);
        assert!(view.findings[0].message.contains("bytes e2 | 82 ac"));
        let events = suffix_chunked_events(&pool, &view);
        assert_eq!(events[0].value, "\u{20ac}\u{20ac}");
    }

    #[test]
    fn split_events_rebuild_across_escapes() {
        let message = "quote \" backslash \\ newline \n euro \u{20ac}";
        let escaped = serde_json::to_string(message).unwrap();
        let escaped = &escaped[1..escaped.len() - 1];
        // Cut inside the `\"` escape and inside `\u20ac`'s neighbourhood.
        let cut = escaped.find("\\\"").unwrap() + 1;
        let (a, b) = escaped.split_at(cut);
        let slice = |i: usize, raw: &str| {
            format!(
                "{{\"name\":\"n\",\"type\":\"diagnostic\",\"ts\":\"t\",\"msg_i\":{i},\"msg\":\"{raw}\"}}"
            )
        };
        let (s0, s1) = (slice(0, a), slice(1, b));
        let pool = encode_pool([
            ("CLOUD_INIT|1|diagnostic|n|u|1", s1.as_str()),
            ("CLOUD_INIT|1|diagnostic|n|u|0", s0.as_str()),
            ("CLOUD_INIT|1|start|n|u2", "{\"name\":\"n\",\"msg\":\"x\"}"),
        ])
        .unwrap();
        let events = cloud_init_split_events(&decode_pool(&pool));
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].key, "CLOUD_INIT|1|diagnostic|n|u");
        assert_eq!(events[0].records, [1, 0]);
        assert_eq!(events[0].message.as_deref(), Some(message));
        assert!(events[0].findings.is_empty());
    }
}
