#![no_main]
//! Any body: parse_json returns a report; a report without findings has a state.

use wirecheck_oracle::health;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let report = health::parse_json(body);
    assert!(!report.findings.is_empty() || report.state.is_some());
});
