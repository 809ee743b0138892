#![no_main]
//! Any pool file: decode_pool returns one record per whole 2560 bytes, and the host view holds
//! at most 254 key / 1022 value characters (bytes before lossy UTF-8 decoding).

use wirecheck_oracle::kvp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|pool: &[u8]| {
    let view = kvp::decode_pool(pool);
    assert_eq!(view.records.len(), pool.len() / kvp::RECORD_SIZE);
    for record in &view.records {
        assert!(record.key_bytes <= kvp::KEY_SIZE && record.value_bytes <= kvp::VALUE_SIZE);
        assert!(record.key.chars().count() <= kvp::HOST_KEY_MAX);
        assert!(record.value.chars().count() <= kvp::HOST_VALUE_MAX);
    }
    let _ = kvp::cloud_init_split_events(&view);
});
