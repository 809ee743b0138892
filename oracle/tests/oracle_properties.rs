//! Properties of the oracle's parsers:
//! - the encoded-report parser reads back everything either dialect's encoder can produce,
//!   checked against a test-only reference encoder built on the `csv` crate;
//! - KVP pools round-trip through encode_record/decode_pool within the host limits;
//! - no parser panics on arbitrary bytes.

use proptest::prelude::*;
use wirecheck_oracle::{Dialect, Mode, encoded, health, kvp};

/// Reference encoder for §6.1, built on `csv`: delimiter `|`, the dialect's quote doubled inside
/// quotes, `QuoteStyle::Necessary`, line terminator removed; cloud-init then `rstrip`s the record.
///
/// Why `Necessary` matches §6.1 exactly: csv-core's writer quotes a field when it contains a
/// byte from a fixed table (delimiter, quote char, CR and LF when the terminator is `\n`; plus
/// the escape char only without double-quoting, and a comment char only when one is set). With
/// `|` and the dialect's quote, that table is §6.1's "pipe, quote, CR, LF" and nothing else: the
/// other quote, space, tab, `,`, `#`, `=` stay literal. `csv_quoting_is_exactly_section_6_1`
/// pins this, so a csv upgrade that widened the table would fail there, not silently here.
fn reference_encode(dialect: Dialect, fields: &[(String, String)]) -> String {
    let mut writer = csv::WriterBuilder::new()
        .delimiter(b'|')
        .quote(dialect.quote() as u8)
        .double_quote(true)
        .quote_style(csv::QuoteStyle::Necessary)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    writer
        .write_record(fields.iter().map(|(k, v)| format!("{k}={v}")))
        .expect("writing to a Vec");
    let bytes = writer.into_inner().expect("flushing a Vec");
    let record = String::from_utf8(bytes).expect("csv writes the UTF-8 it was given");
    let record = record
        .strip_suffix('\n')
        .expect("one terminator")
        .to_string();
    match dialect {
        // Python str.rstrip(); char::is_whitespace stands in for str.isspace.
        Dialect::CloudInit => record.trim_end().to_string(),
        Dialect::AzureInit => record,
    }
}

/// What a parser must read back from `reference_encode(dialect, fields)`: the fields, except
/// that cloud-init's rstrip eats trailing whitespace of an unquoted last field.
fn expected_after_encoding(dialect: Dialect, fields: &[(String, String)]) -> Vec<(String, String)> {
    let mut expected = fields.to_vec();
    if dialect == Dialect::CloudInit
        && let Some((key, value)) = expected.last_mut()
    {
        let field = format!("{key}={value}");
        if !field.contains(['|', '\'', '\r', '\n']) {
            *value = value.trim_end().to_string();
        }
    }
    expected
}

#[test]
fn csv_quoting_is_exactly_section_6_1() {
    let encode_one =
        |dialect, value: &str| reference_encode(dialect, &[("k".into(), value.into())]);
    // §6.1 "Literal (never trigger quoting)".
    // (Followed by `x` so that cloud-init's rstrip keeps them.)
    for literal in ["\"", "\t", ",", "\\", "&<>", "=", " ", "#"] {
        let value = format!("{literal}x");
        assert_eq!(encode_one(Dialect::CloudInit, &value), format!("k={value}"));
    }
    for literal in ["'", ",", " ", "#", "=", "\t", "\\"] {
        let value = format!("{literal}x");
        assert_eq!(encode_one(Dialect::AzureInit, &value), format!("k={value}"));
    }
    // §6.1 "Field quoted when it contains": the whole field, quote doubled.
    assert_eq!(encode_one(Dialect::CloudInit, "a|b"), "'k=a|b'");
    assert_eq!(encode_one(Dialect::CloudInit, "it's"), "'k=it''s'");
    assert_eq!(encode_one(Dialect::CloudInit, "a\rb"), "'k=a\rb'");
    assert_eq!(encode_one(Dialect::CloudInit, "a\nb"), "'k=a\nb'");
    assert_eq!(encode_one(Dialect::AzureInit, "a|b"), "\"k=a|b\"");
    assert_eq!(
        encode_one(Dialect::AzureInit, "he said \"hi\""),
        "\"k=he said \"\"hi\"\"\""
    );
    assert_eq!(encode_one(Dialect::AzureInit, "a\nb"), "\"k=a\nb\"");
    // The docs/protocol.md §6.4 examples.
    assert_eq!(
        reference_encode(
            Dialect::CloudInit,
            &[
                ("reason".into(), "foo'bar".into()),
                ("x".into(), "a|b".into())
            ]
        ),
        "'reason=foo''bar'|'x=a|b'"
    );
    // rstrip (cloud-init) vs kept (azure-init).
    assert_eq!(encode_one(Dialect::CloudInit, "x  "), "k=x");
    assert_eq!(encode_one(Dialect::AzureInit, "x  "), "k=x  ");
}

fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec!['|', '\'', '"', '\r', '\n', '=', ' ', '\t', '\\', ',', '#', 'é', '€', '😀', '\u{85}']),
        3 => prop::char::range('a', 'z'),
        1 => any::<char>(),
    ]
}

fn hostile_string(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(hostile_char(), 0..max).prop_map(|chars| chars.into_iter().collect())
}

fn identifier() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,12}"
}

/// Arbitrary `key=value` lists: identifier keys, hostile values.
fn field_lists() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((identifier(), hostile_string(24)), 1..8)
}

fn dialects() -> impl Strategy<Value = Dialect> {
    prop_oneof![Just(Dialect::CloudInit), Just(Dialect::AzureInit)]
}

const STRUCTURAL: [&str; 8] = [
    "result",
    "reason",
    "agent",
    "pps_type",
    "vm_id",
    "timestamp",
    "documentation_url",
    "_",
];

/// A report laid out as §6.2 says the dialect writes it, with hostile reason and supporting
/// data (distinct keys that are not structural).
fn well_formed_report() -> impl Strategy<Value = (Dialect, Vec<(String, String)>)> {
    let supporting = prop::collection::btree_map(
        identifier().prop_filter("not a structural key", |k| {
            !STRUCTURAL.contains(&k.as_str())
        }),
        hostile_string(24),
        0..5,
    );
    (dialects(), any::<bool>(), hostile_string(30), supporting).prop_map(
        |(dialect, error, reason, supporting)| {
            let mut reason = reason;
            if reason.is_empty() {
                reason.push('r');
            }
            let vm_id = "11111111-2222-3333-4444-555555555555".to_string();
            let url = encoded::DOCUMENTATION_URL.to_string();
            let f = |k: &str, v: String| (k.to_string(), v);
            let supporting: Vec<(String, String)> = supporting.into_iter().collect();
            let fields = match (dialect, error) {
                (Dialect::CloudInit, true) => [
                    vec![
                        f("result", "error".into()),
                        f("reason", reason),
                        f("agent", "Cloud-Init/26.2".into()),
                    ],
                    supporting,
                    vec![
                        f("vm_id", vm_id),
                        f("timestamp", "2026-11-29T14:30:57.000662+00:00".into()),
                        f("documentation_url", url),
                    ],
                ]
                .concat(),
                (Dialect::CloudInit, false) => vec![
                    f("result", "success".into()),
                    f("agent", "Cloud-Init/26.2".into()),
                    f("timestamp", "2026-11-29T14:30:57+00:00".into()),
                    f("vm_id", vm_id),
                ],
                (Dialect::AzureInit, true) => [
                    vec![
                        f("result", "error".into()),
                        f("reason", reason),
                        f("agent", "Azure-Init/0.1.1".into()),
                    ],
                    supporting,
                    vec![
                        f("pps_type", "None".into()),
                        f("vm_id", vm_id),
                        f("timestamp", "2026-11-29T14:41:10.902560076+00:00".into()),
                        f("documentation_url", url),
                    ],
                ]
                .concat(),
                (Dialect::AzureInit, false) => [
                    vec![
                        f("result", "success".into()),
                        f("agent", "Azure-Init/0.1.1".into()),
                        f("pps_type", "None".into()),
                        f("vm_id", vm_id),
                        f("timestamp", "2026-11-29T14:41:10.902+00:00".into()),
                    ],
                    supporting,
                ]
                .concat(),
            };
            (dialect, fields)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// What either dialect's encoder writes, the parser reads back, strictly and leniently.
    #[test]
    fn parser_reads_back_any_encoded_field_list(dialect in dialects(), fields in field_lists()) {
        let encoded_report = reference_encode(dialect, &fields);
        let expected = expected_after_encoding(dialect, &fields);
        for mode in [Mode::Strict, Mode::Lenient] {
            let report = encoded::parse(&encoded_report, mode)
                .map_err(|e| TestCaseError::fail(format!("{mode:?} {encoded_report:?}: {e}")))?;
            prop_assert_eq!(&report.fields, &expected, "{:?} {:?}", mode, encoded_report);
            prop_assert!(!report.truncated);
            prop_assert!(
                !report.findings.iter().any(|f| f.id.starts_with("report.quoting.")),
                "{:?}", report.findings
            );
            // Without an agent field the dialect comes from the first quoted field, if any.
            let quoted = fields.iter().any(|(k, v)| {
                format!("{k}={v}").contains(['|', dialect.quote(), '\r', '\n'])
            });
            prop_assert_eq!(report.dialect, quoted.then_some(dialect));
        }
    }

    /// A report laid out as §6.2 says, with hostile reason and supporting data: read back
    /// exactly, in the right dialect, with no finding at all.
    #[test]
    fn well_formed_reports_parse_strictly_without_findings((dialect, fields) in well_formed_report()) {
        let encoded_report = reference_encode(dialect, &fields);
        let report = encoded::parse(&encoded_report, Mode::Strict)
            .map_err(|e| TestCaseError::fail(format!("{encoded_report:?}: {e}")))?;
        prop_assert_eq!(&report.fields, &expected_after_encoding(dialect, &fields));
        prop_assert_eq!(report.dialect, Some(dialect));
        prop_assert!(report.findings.is_empty(), "{:?}: {:#?}", encoded_report, report.findings);
    }

    /// Any prefix of a valid report parses leniently (a cut at a length limit), keeping every
    /// whole field before the cut.
    #[test]
    fn lenient_mode_reads_any_cut((dialect, fields) in well_formed_report(), cut in any::<prop::sample::Index>()) {
        let full = reference_encode(dialect, &fields);
        let boundaries: Vec<usize> = full.char_indices().map(|(i, _)| i).skip(1).collect();
        prop_assume!(!boundaries.is_empty());
        let cut_at = boundaries[cut.index(boundaries.len())];
        let prefix = &full[..cut_at];
        let report = encoded::parse(prefix, Mode::Lenient)
            .map_err(|e| TestCaseError::fail(format!("{prefix:?}: {e}")))?;
        let whole = report.fields.len().saturating_sub(1);
        prop_assert_eq!(&report.fields[..whole], &fields[..whole]);
        // A detected cut downgrades what went missing to warnings.
        prop_assert!(!report.truncated || !report.has_errors(), "{:?}: {:#?}", prefix, report.findings);
    }

    /// Pools of records within the host limits, one record per key, decode to exactly what
    /// was encoded. (The `#<i>` ending keeps keys distinct, and not `…|<index>` chunk keys.)
    #[test]
    fn kvp_pool_round_trips_within_host_limits(
        records in prop::collection::vec((hostile_string(80), hostile_string(400)), 0..6)
    ) {
        let records: Vec<(String, String)> = records
            .into_iter()
            .enumerate()
            .map(|(i, (k, v))| {
                let k = fit(&format!("k{}", k.replace('\0', "")), kvp::HOST_KEY_MAX - 4);
                (format!("{k}#{i}"), fit(&v.replace('\0', ""), kvp::HOST_VALUE_MAX))
            })
            .collect();
        let pool = kvp::encode_pool(records.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
        prop_assert_eq!(pool.len(), records.len() * kvp::RECORD_SIZE);
        let view = kvp::decode_pool(&pool);
        prop_assert!(view.findings.is_empty(), "{:?}", view.findings);
        prop_assert_eq!(view.records.len(), records.len());
        for (got, (key, value)) in view.records.iter().zip(&records) {
            prop_assert_eq!(&got.key, key);
            prop_assert_eq!(&got.value, value);
            prop_assert_eq!(got.key_bytes, key.len());
            prop_assert_eq!(got.value_bytes, value.len());
            prop_assert!(got.findings.is_empty(), "{:?}", got.findings);
        }
    }

    #[test]
    fn encoded_parser_never_panics(input in any::<String>(), structured in hostile_string(64)) {
        for input in [&input, &structured, &format!("result=error|{structured}")] {
            let strict = encoded::parse(input, Mode::Strict);
            let lenient = encoded::parse(input, Mode::Lenient);
            // Whatever strict accepts, lenient reads the same way.
            if let Ok(strict) = strict {
                prop_assert_eq!(strict.fields, lenient.unwrap().fields);
            }
        }
    }

    #[test]
    fn health_and_kvp_parsers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..6000)) {
        let _ = health::parse_xml(&bytes, None);
        let _ = health::parse_json(&bytes);
        let view = kvp::decode_pool(&bytes);
        prop_assert_eq!(view.records.len(), bytes.len() / kvp::RECORD_SIZE);
        let _ = kvp::cloud_init_split_events(&view);
    }

    /// XML-shaped noise reaches deeper into the XML reader than random bytes do.
    #[test]
    fn xml_parser_never_panics_on_xml_like_text(
        parts in prop::collection::vec(prop::sample::select(vec![
            "<Health>", "</Health>", "<Container>", "</Container>", "<RoleInstanceList>",
            "</RoleInstanceList>", "<Role>", "</Role>", "<State>", "</State>", "<Details>",
            "</Details>", "<Description>", "</Description>", "<SubStatus/>", "&amp;", "&#0;",
            "&bogus;", "&", "<![CDATA[x]]>", "<?xml version=\"1.0\"?>", "Ready", "NotReady",
            "result=error|'x", " ", "\n", "<a:b xmlns:a=\"u\">", "</a:b>", "<!-- c -->",
        ]), 0..40)
    ) {
        let body = parts.concat();
        let report = health::parse_xml(body.as_bytes(), None);
        // A document with no findings has at least a state.
        prop_assert!(!report.findings.is_empty() || report.state.is_some());
    }

    #[test]
    fn json_parser_never_panics_on_json_like_values(
        state in prop::option::of(hostile_string(12)),
        substatus in prop::option::of(hostile_string(12)),
        description in prop::option::of(hostile_string(60)),
        extra in any::<bool>(),
    ) {
        let mut body = serde_json::Map::new();
        if let Some(state) = &state {
            body.insert("state".into(), state.clone().into());
        }
        if substatus.is_some() || description.is_some() {
            let mut details = serde_json::Map::new();
            if let Some(s) = &substatus { details.insert("subStatus".into(), s.clone().into()); }
            if let Some(d) = &description { details.insert("description".into(), d.clone().into()); }
            body.insert("details".into(), details.into());
        }
        if extra {
            body.insert("Extra".into(), 1.into());
        }
        let report = health::parse_json(serde_json::Value::Object(body).to_string().as_bytes());
        // Whatever was sent is kept verbatim (typed when it is a known spelling).
        prop_assert_eq!(report.state.as_ref().map(|s| s.as_str()), state.as_deref());
        prop_assert_eq!(report.substatus.as_ref().map(|s| s.as_str()), substatus.as_deref());
        prop_assert_eq!(report.description, description);
    }
}

/// `s` cut to at most `max` bytes on a char boundary.
fn fit(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
