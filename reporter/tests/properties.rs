//! Property tests: encoded reports read back through an independently configured CSV reader,
//! and KVP records keep their size and content.

use crate::support;

use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use reporter::Failure;
use reporter::format::encoded::{DOCUMENTATION_URL, ReportContext, encode_error, encode_fields};
use reporter::kvp::record::{KEY_SIZE, RECORD_SIZE, encode_record};

use support::parse_encoded;

fn key() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,30}"
}

/// Values rich in the characters that matter: the delimiter, both quotes, CR, LF, `=`,
/// non-ASCII, plus arbitrary strings.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[|'\"\r\n =a-zé€😀\\\\\t,]{0,40}",
        any::<String>().prop_map(|s| s.replace('\0', "")),
    ]
}

fn distinct_pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::vec((key(), value()), 0..8).prop_map(|pairs| {
        let mut seen = std::collections::HashSet::new();
        pairs
            .into_iter()
            .filter(|(k, _)| {
                !reporter::failure::RESERVED_KEYS.contains(&k.as_str()) && seen.insert(k.clone())
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_fields_read_back_unchanged(fields in proptest::collection::vec((key(), value()), 1..10)) {
        let encoded = encode_fields(&fields);
        prop_assert_eq!(parse_encoded(&encoded), fields);
    }

    #[test]
    fn error_reports_read_back_in_order(
        reason in "[^\0]{1,40}",
        data in distinct_pairs(),
        pps_type in proptest::option::of("[A-Za-z]{1,8}"),
        vm_id in "[0-9a-f-]{1,36}",
    ) {
        let failure = Failure::custom(reason.clone(), data.clone()).unwrap();
        let timestamp = Utc.with_ymd_and_hms(2026, 11, 29, 14, 30, 57).unwrap();
        let ctx = ReportContext {
            agent: "provision-report/9.9.9",
            vm_id: &vm_id,
            timestamp,
            pps_type: pps_type.as_deref(),
            vm_id_source: None,
        };
        let mut expected = vec![
            ("result".to_owned(), "error".to_owned()),
            ("reason".to_owned(), reason),
            ("agent".to_owned(), "provision-report/9.9.9".to_owned()),
        ];
        if let Some(pps) = &pps_type {
            expected.push(("pps_type".to_owned(), pps.clone()));
        }
        expected.extend(data);
        expected.push(("vm_id".to_owned(), vm_id.clone()));
        expected.push(("timestamp".to_owned(), "2026-11-29T14:30:57+00:00".to_owned()));
        expected.push(("documentation_url".to_owned(), DOCUMENTATION_URL.to_owned()));
        let encoded = encode_error(&ctx, &failure);
        prop_assert_eq!(parse_encoded(&encoded), expected);
    }

    #[test]
    fn kvp_records_are_2560_bytes_and_decode_to_the_input(
        key in "[^\0]{1,60}".prop_filter("host key limit", |k| k.len() <= 254),
        value in "[^\0]{0,1500}",
    ) {
        let record = encode_record(&key, &value).unwrap();
        prop_assert_eq!(record.len(), RECORD_SIZE);
        // Decode here, independently: each field up to its first NUL, NUL padding after.
        let field = |bytes: &[u8]| {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            assert!(bytes[end..].iter().all(|&b| b == 0));
            String::from_utf8(bytes[..end].to_vec()).expect("UTF-8 on a character boundary")
        };
        prop_assert_eq!(field(&record[..KEY_SIZE]), key);
        let stored = field(&record[KEY_SIZE..]);
        prop_assert!(stored.len() <= 1022);
        prop_assert!(value.starts_with(&stored));
        if value.len() <= 1022 {
            prop_assert_eq!(stored, value);
        } else {
            // Cut at the last character boundary at or before byte 1022: at most 3 bytes lost.
            prop_assert!(stored.len() > 1022 - 4);
        }
    }
}
