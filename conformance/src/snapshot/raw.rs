//! Raw views for snapshots of exact bytes: what an agent sent, kept as received except for the
//! values that differ from run to run. The project's own end-to-end snapshots use these, and an
//! agent's Rust tests can too (with [`fake_wireserver`]'s journal and the pool file it wrote);
//! the [`transcript`](super::transcript) is the semantic view `wirecheck run --snapshots` keeps.
//!
//! | value | placeholder |
//! |---|---|
//! | ephemeral port in `127.0.0.1:PORT` (Host header, targets, messages) | `127.0.0.1:<port>` |
//! | journal `at_ms`, `received_by_kernel`, `done_ms`, `client` | removed |
//! | KVP key incarnation (boot time, epoch seconds) | `<boot-epoch>` |
//! | KVP key uuid4 | `<uuid>` |
//! | KVP event `ts` | `<ts>` |
//! | gz+b64 `data` of compressed events (dmesg: machine-specific) | `<gz+b64>` |
//!
//! Everything else (headers in order, bodies, parsed reports, findings, event names, results,
//! messages) is kept as received.
//!
//! In an agent's own test, against the in-process fake:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use conformance::snapshot::raw;
//! use fake_wireserver::{Fake, FakeConfig};
//! use std::io::{Read, Write};
//!
//! let fake = Fake::start(FakeConfig::default()).await?;
//! let addr = fake.wireserver_addr().expect("a wireserver listener");
//! // The agent under test would run here; a plain request stands in for it.
//! tokio::task::spawn_blocking(move || -> std::io::Result<()> {
//!     let mut agent = std::net::TcpStream::connect(addr)?;
//!     write!(agent, "GET /?comp=versions HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
//!     agent.read_to_end(&mut Vec::new())?;
//!     Ok(())
//! })
//! .await??;
//! let mut journal = fake.journal();
//! for _ in 0..100 {
//!     if !journal.is_empty() { break }
//!     tokio::time::sleep(std::time::Duration::from_millis(20)).await;
//!     journal = fake.journal();
//! }
//! assert_eq!(
//!     raw::exchange(&journal),
//!     ["GET /?comp=versions [wireserver.versions via wireserver] -> 200"]
//! );
//! // Host header and all: the port is the only value replaced.
//! assert_eq!(raw::entry(&journal[0])["headers"][0][1], "127.0.0.1:<port>");
//! # Ok(())
//! # }
//! ```

use serde_json::{Value, json};

use fake_wireserver::journal::Entry;

use super::redact::ports;

fn ports_in_value(value: &mut Value) {
    match value {
        Value::String(s) => *s = ports(s),
        Value::Array(items) => items.iter_mut().for_each(ports_in_value),
        Value::Object(map) => map.values_mut().for_each(ports_in_value),
        _ => {}
    }
}

/// A journal entry without its timing and client address, ports normalised.
pub fn entry(entry: &Entry) -> Value {
    let mut value = serde_json::to_value(entry).expect("entries serialise");
    let map = value.as_object_mut().expect("entry is an object");
    for volatile in ["at_ms", "received_by_kernel", "done_ms", "client"] {
        map.shift_remove(volatile);
    }
    ports_in_value(&mut value);
    value
}

/// `method target -> answer` for every entry: the exchange at a glance.
pub fn exchange(journal: &[Entry]) -> Vec<String> {
    journal
        .iter()
        .map(|e| {
            let status = e
                .answer
                .status
                .map_or_else(|| e.answer.kind.to_string(), |s| s.to_string());
            ports(&format!(
                "{} {} [{} via {}] -> {}",
                e.method, e.target, e.endpoint, e.listener, status
            ))
        })
        .collect()
}

/// One raw KVP record: key and value up to their first NUL (what the agent wrote).
fn raw_records(pool: &[u8]) -> Vec<(String, String)> {
    use wirecheck_oracle::kvp::{KEY_SIZE, RECORD_SIZE};
    let field = |bytes: &[u8]| {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    };
    pool.chunks_exact(RECORD_SIZE)
        .map(|r| (field(&r[..KEY_SIZE]), field(&r[KEY_SIZE..])))
        .collect()
}

/// `CLOUD_INIT|<incarnation>|<type>|<name>|<uuid>[|<slice>]` (cloud-init up to 25.x) or, since
/// 26.1, `CLOUD_INIT|<incarnation>|<type>|<name>|<vm_id>|<uuid>[|<slice>]` with the volatile
/// parts replaced; returns the normalised event key and the slice index. A slice index is all
/// digits, an event's uuid never is. The VM id is volatile too: until cloud-init has read it,
/// its handler's background thread writes the zero GUID or the raw DMI system-uuid
/// (byte-swapped on a Gen1 machine), depending on when it encodes the event.
fn cloud_init_key(key: &str) -> (String, Option<usize>) {
    let mut parts: Vec<&str> = key.split('|').collect();
    let sliced = matches!(parts.len(), 6 | 7)
        && parts
            .last()
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    let slice = if sliced {
        parts.pop().and_then(|i| i.parse().ok())
    } else {
        None
    };
    if matches!(parts.len(), 5 | 6) && parts[0] == "CLOUD_INIT" {
        parts[1] = "<boot-epoch>";
        if parts.len() == 6 {
            parts[4] = "<vm-id>";
        }
        let last = parts.len() - 1;
        parts[last] = "<uuid>";
    }
    (parts.join("|"), slice)
}

/// Splits a slice value into its metadata (with an empty `msg`, valid JSON) and the
/// still-escaped `msg` text between `"msg":"` and the closing `"}`. Slices can end inside an
/// escape, so they are not parsed as JSON one by one.
fn split_slice(value: &str) -> Option<(String, &str)> {
    let start = value.rfind("\"msg\":\"")? + "\"msg\":\"".len();
    let end = value.len().checked_sub(2).filter(|&end| end >= start)?;
    let chunk = value.get(start..end)?;
    Some((format!("{}{}", &value[..start], &value[end..]), chunk))
}

fn normalise_event(mut event: Value) -> Value {
    if let Some(map) = event.as_object_mut() {
        if map.contains_key("ts") {
            map.insert("ts".into(), json!("<ts>"));
        }
        if map.get("type").and_then(Value::as_str) == Some("compressed")
            && let Some(msg) = map.get("msg").and_then(Value::as_str)
            && let Ok(mut inner) = serde_json::from_str::<Value>(msg)
        {
            inner["data"] = json!("<gz+b64>");
            map.insert("msg".into(), inner);
        }
    }
    ports_in_value(&mut event);
    event
}

/// A split event being put back together.
struct Split {
    key: String,
    /// Metadata of slice 0 (its `msg` blanked).
    meta: Value,
    /// The raw, still-escaped chunks so far.
    chunks: String,
    slices: usize,
}

impl Split {
    fn finish(self) -> Value {
        let Split {
            key,
            mut meta,
            chunks,
            slices,
        } = self;
        let message: Value = serde_json::from_str(&format!("\"{chunks}\""))
            .unwrap_or_else(|e| json!(format!("<slices do not rebuild: {e}>")));
        if let Some(map) = meta.as_object_mut() {
            map.remove("msg_i");
            map.insert("msg".into(), message);
        }
        let compressed = meta["type"] == "compressed";
        let mut logical = json!({ "key": key, "event": normalise_event(meta) });
        if !compressed {
            logical["slices"] = json!(slices);
        }
        logical
    }
}

/// cloud-init's KVP events as logical events: split events are put back together (in
/// `msg_i` order) and reported with their slice count; compressed events keep their
/// encoding but not their machine-specific data (nor their slice count, which depends on it).
pub fn cloud_init_events(pool: &[u8]) -> Vec<Value> {
    let mut events: Vec<Value> = Vec::new();
    let mut pending: Option<Split> = None;
    for (key, value) in raw_records(pool) {
        let (normal_key, slice) = cloud_init_key(&key);
        let Some(index) = slice else {
            events.extend(pending.take().map(Split::finish));
            let event = serde_json::from_str(&value).unwrap_or_else(|_| json!(value));
            events.push(json!({ "key": normal_key, "event": normalise_event(event) }));
            continue;
        };
        let (meta_text, chunk) = split_slice(&value).unwrap_or_default();
        match &mut pending {
            Some(split) if split.key == normal_key && split.slices == index => {
                split.chunks.push_str(chunk);
                split.slices += 1;
            }
            _ => {
                events.extend(pending.take().map(Split::finish));
                pending = Some(Split {
                    key: normal_key,
                    meta: serde_json::from_str(&meta_text).unwrap_or(Value::Null),
                    chunks: chunk.to_owned(),
                    slices: 1,
                });
            }
        }
    }
    events.extend(pending.take().map(Split::finish));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_replaced_only_after_the_loopback_address() {
        assert_eq!(
            ports("http://127.0.0.1:41234/machine 127.0.0.1: 10.0.0.1:80"),
            "http://127.0.0.1:<port>/machine 127.0.0.1: 10.0.0.1:80"
        );
    }

    #[test]
    fn event_keys_with_and_without_the_vm_id_are_normalised() {
        let vm = "0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a";
        let uuid = "9a8b7c6d-0000-4000-8000-000000000001";
        assert_eq!(
            cloud_init_key(&format!("CLOUD_INIT|1733|start|azure-ds|{uuid}")),
            ("CLOUD_INIT|<boot-epoch>|start|azure-ds|<uuid>".into(), None)
        );
        assert_eq!(
            cloud_init_key(&format!("CLOUD_INIT|1733|diagnostic|n|{uuid}|2")),
            (
                "CLOUD_INIT|<boot-epoch>|diagnostic|n|<uuid>".into(),
                Some(2)
            )
        );
        // 26.1+: the VM id before the uuid.
        assert_eq!(
            cloud_init_key(&format!("CLOUD_INIT|1733|start|azure-ds|{vm}|{uuid}")),
            (
                "CLOUD_INIT|<boot-epoch>|start|azure-ds|<vm-id>|<uuid>".into(),
                None
            )
        );
        assert_eq!(
            cloud_init_key(&format!("CLOUD_INIT|1733|diagnostic|n|{vm}|{uuid}|0")),
            (
                "CLOUD_INIT|<boot-epoch>|diagnostic|n|<vm-id>|<uuid>".into(),
                Some(0)
            )
        );
        assert_eq!(
            cloud_init_key("PROVISIONING_REPORT").0,
            "PROVISIONING_REPORT"
        );
    }

    #[test]
    fn split_cloud_init_events_are_rebuilt_from_the_vector() {
        let vectors =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors/kvp");
        let pool = std::fs::read(vectors.join("cloud-init-22.4.2-split.bin")).unwrap();
        let sidecar: Value = serde_json::from_str(
            &std::fs::read_to_string(vectors.join("cloud-init-22.4.2-split.json")).unwrap(),
        )
        .unwrap();
        let events = cloud_init_events(&pool);
        let split = events
            .iter()
            .find(|e| e.get("slices").and_then(Value::as_u64) > Some(1))
            .expect("a split event");
        assert_eq!(
            split["slices"],
            sidecar["split_events"][0]["records"]
                .as_array()
                .unwrap()
                .len()
        );
        assert_eq!(split["event"]["msg"], sidecar["split_events"][0]["message"]);
        assert!(split["key"].as_str().unwrap().contains("|<boot-epoch>|"));
        assert_eq!(split["event"]["ts"], "<ts>");
    }
}
