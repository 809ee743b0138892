//! Hyper-V KVP pool files as the host sees them (PROTOCOL.md §7).

use serde::{Deserialize, Serialize};

use super::encoded::EncodedReport;
use super::finding::Finding;

/// One record: key field + value field.
pub const RECORD_SIZE: usize = 2560;
pub const KEY_SIZE: usize = 512;
pub const VALUE_SIZE: usize = 2048;
/// What the host surfaces of a key (bytes).
pub const HOST_KEY_MAX: usize = 254;
/// What the host surfaces of a value (bytes).
pub const HOST_VALUE_MAX: usize = 1022;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    pub index: usize,
    pub offset: usize,
    /// As the host sees it: cut to 254 bytes, lossy UTF-8.
    pub key: String,
    /// As the host sees it: cut to 1022 bytes, lossy UTF-8.
    pub value: String,
    /// On-disk length before the first NUL.
    pub key_bytes: usize,
    /// On-disk length before the first NUL.
    pub value_bytes: usize,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolView {
    pub size: usize,
    pub records: Vec<HostRecord>,
    /// The last `PROVISIONING_REPORT` record (index) and its lenient parse.
    pub provisioning_report: Option<(usize, EncodedReport)>,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvpError {
    #[error("key is {len} bytes; a KVP key holds at most {max} bytes plus its NUL")]
    KeyTooLong { len: usize, max: usize },
    #[error("value is {len} bytes; a KVP value holds at most {max} bytes plus its NUL")]
    ValueTooLong { len: usize, max: usize },
}

/// Decodes a pool file. Never panics.
pub fn decode_pool(bytes: &[u8]) -> PoolView {
    PoolView {
        size: bytes.len(),
        records: Vec::new(),
        provisioning_report: None,
        findings: Vec::new(),
    }
}

/// Encodes one NUL-padded record.
pub fn encode_record(key: &str, value: &str) -> Result<[u8; RECORD_SIZE], KvpError> {
    if key.len() >= KEY_SIZE {
        return Err(KvpError::KeyTooLong { len: key.len(), max: KEY_SIZE - 1 });
    }
    if value.len() >= VALUE_SIZE {
        return Err(KvpError::ValueTooLong { len: value.len(), max: VALUE_SIZE - 1 });
    }
    let mut record = [0u8; RECORD_SIZE];
    record[..key.len()].copy_from_slice(key.as_bytes());
    record[KEY_SIZE..KEY_SIZE + value.len()].copy_from_slice(value.as_bytes());
    Ok(record)
}
