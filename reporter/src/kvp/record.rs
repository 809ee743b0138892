//! One KVP record (docs/protocol.md §7.1): a 512-byte key field and a 2048-byte value field, UTF-8,
//! NUL-padded, no length field.
//!
//! The host surfaces only 254 key bytes and 1022 value bytes, so keys are refused above 254
//! bytes and values are cut, on a UTF-8 boundary, to 1022 bytes.

use thiserror::Error;

use crate::format::cut_at_char_boundary;

pub const KEY_SIZE: usize = 512;
pub const VALUE_SIZE: usize = 2048;
pub const RECORD_SIZE: usize = KEY_SIZE + VALUE_SIZE;
/// Key bytes the host reads.
pub const HOST_KEY_MAX: usize = 254;
/// Value bytes the host reads.
pub const HOST_VALUE_MAX: usize = 1022;

/// A key or value KVP cannot carry.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("KVP key is empty")]
    EmptyKey,
    #[error("KVP key {key:?} is {len} bytes; the host reads at most {HOST_KEY_MAX}")]
    KeyTooLong { key: String, len: usize },
    #[error("KVP key {key:?} contains a NUL byte, which ends a KVP field")]
    NulInKey { key: String },
    #[error("KVP value contains a NUL byte at offset {offset}, which ends a KVP field")]
    NulInValue { offset: usize },
}

/// Checks a key against the host's limits.
pub fn validate_key(key: &str) -> Result<(), RecordError> {
    if key.is_empty() {
        return Err(RecordError::EmptyKey);
    }
    if key.len() > HOST_KEY_MAX {
        return Err(RecordError::KeyTooLong {
            key: key.to_owned(),
            len: key.len(),
        });
    }
    if key.contains('\0') {
        return Err(RecordError::NulInKey {
            key: key.to_owned(),
        });
    }
    Ok(())
}

/// The part of `value` the host reads: at most [`HOST_VALUE_MAX`] bytes, cut on a character
/// boundary.
pub fn host_value(value: &str) -> &str {
    cut_at_char_boundary(value, HOST_VALUE_MAX)
}

/// Encodes one record. The value is cut with [`host_value`]; the key must pass
/// [`validate_key`].
pub fn encode_record(key: &str, value: &str) -> Result<[u8; RECORD_SIZE], RecordError> {
    validate_key(key)?;
    let value = host_value(value);
    if let Some(offset) = value.bytes().position(|b| b == 0) {
        return Err(RecordError::NulInValue { offset });
    }
    let mut record = [0u8; RECORD_SIZE];
    record[..key.len()].copy_from_slice(key.as_bytes());
    record[KEY_SIZE..KEY_SIZE + value.len()].copy_from_slice(value.as_bytes());
    Ok(record)
}

/// A record read back: each field up to its first NUL, decoded lossily.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord {
    pub key: String,
    pub value: String,
}

/// Decodes one [`RECORD_SIZE`]-byte record.
pub fn decode_record(record: &[u8; RECORD_SIZE]) -> DecodedRecord {
    let (key, value) = record.split_at(KEY_SIZE);
    DecodedRecord {
        key: until_nul(key),
        value: until_nul(value),
    }
}

/// The key field of a record, as raw bytes up to the first NUL.
pub fn raw_key(record: &[u8]) -> &[u8] {
    let key = &record[..KEY_SIZE.min(record.len())];
    let end = key.iter().position(|&b| b == 0).unwrap_or(key.len());
    &key[..end]
}

fn until_nul(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_is_nul_padded_at_fixed_offsets() {
        let record = encode_record("PROVISIONING_REPORT", "result=success").unwrap();
        assert_eq!(&record[..19], b"PROVISIONING_REPORT");
        assert!(record[19..KEY_SIZE].iter().all(|&b| b == 0));
        assert_eq!(&record[KEY_SIZE..KEY_SIZE + 14], b"result=success");
        assert!(record[KEY_SIZE + 14..].iter().all(|&b| b == 0));
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let value = format!("{}€", "a".repeat(1020)); // the euro sign straddles byte 1022
        let record = encode_record("k", &value).unwrap();
        assert_eq!(decode_record(&record).value, "a".repeat(1020));
    }

    #[test]
    fn keys_over_the_host_limit_are_refused() {
        assert!(encode_record(&"k".repeat(254), "v").is_ok());
        assert_eq!(
            encode_record(&"k".repeat(255), "v"),
            Err(RecordError::KeyTooLong {
                key: "k".repeat(255),
                len: 255
            })
        );
        assert_eq!(encode_record("", "v"), Err(RecordError::EmptyKey));
        assert_eq!(
            encode_record("k", "a\0b"),
            Err(RecordError::NulInValue { offset: 1 })
        );
    }
}
