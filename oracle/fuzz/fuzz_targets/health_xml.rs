#![no_main]
//! Any body: parse_xml returns a report; a report without findings has a state.

use wirecheck_oracle::{ServedIds, health};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let served = ServedIds {
        incarnation: "1".into(),
        container_id: "c".into(),
        instance_id: "i".into(),
    };
    let report = health::parse_xml(body, Some(&served));
    assert!(!report.findings.is_empty() || report.state.is_some());
});
