//! Encoded provisioning reports in the cloud-init dialect (docs/protocol.md §6), as cloud-init 24.4
//! and later write them.
//!
//! One CSV record of whole `key=value` fields, delimiter `|`, quote `'`, a field quoted only
//! when it contains `|`, `'`, CR or LF, quotes doubled inside. The `csv` crate does the quoting.
//!
//! * error:   `result=error|reason=R|agent=A|[pps_type=P|]<supporting data>|[vm_id_source=S|]vm_id=ID|timestamp=T|documentation_url=URL`
//! * success: `result=success|agent=A|timestamp=T|vm_id=ID`

use chrono::{DateTime, Timelike, Utc};

use crate::failure::Failure;

/// The remediation page every cloud-init error report links to.
pub const DOCUMENTATION_URL: &str = "https://aka.ms/linuxprovisioningerror";

/// The inputs of an encoded report that do not depend on what went wrong.
#[derive(Debug, Clone, Copy)]
pub struct ReportContext<'a> {
    /// `agent=` value, e.g. `provision-report/0.1.0`.
    pub agent: &'a str,
    pub vm_id: &'a str,
    pub timestamp: DateTime<Utc>,
    /// `extended.compute.ppsType` from IMDS, when IMDS gave one: the first supporting field of
    /// an error report.
    pub pps_type: Option<&'a str>,
    /// Where the vm id came from, when it is not authoritative (DMI, or the zero GUID): written
    /// as the last supporting field of an error report. The success format has no room for it.
    pub vm_id_source: Option<&'a str>,
}

/// A timestamp as Python's `datetime.isoformat()` writes an aware UTC time (cloud-init 24.4+):
/// microseconds, omitted when zero, and `+00:00`.
pub fn format_timestamp(timestamp: DateTime<Utc>) -> String {
    let micros = timestamp.nanosecond() % 1_000_000_000 / 1_000;
    let base = timestamp.format("%Y-%m-%dT%H:%M:%S");
    if micros == 0 {
        format!("{base}+00:00")
    } else {
        format!("{base}.{micros:06}+00:00")
    }
}

/// The fields of a success report, in order.
pub fn success_fields(ctx: &ReportContext<'_>) -> Vec<(String, String)> {
    vec![
        field("result", "success"),
        field("agent", ctx.agent),
        field("timestamp", &format_timestamp(ctx.timestamp)),
        field("vm_id", ctx.vm_id),
    ]
}

/// The fields of an error report, in order.
pub fn error_fields(ctx: &ReportContext<'_>, failure: &Failure) -> Vec<(String, String)> {
    let mut fields = vec![
        field("result", "error"),
        field("reason", failure.reason()),
        field("agent", ctx.agent),
    ];
    if let Some(pps_type) = ctx.pps_type {
        fields.push(field("pps_type", pps_type));
    }
    fields.extend(failure.supporting_data().iter().cloned());
    if let Some(source) = ctx.vm_id_source {
        fields.push(field("vm_id_source", source));
    }
    fields.push(field("vm_id", ctx.vm_id));
    fields.push(field("timestamp", &format_timestamp(ctx.timestamp)));
    fields.push(field("documentation_url", DOCUMENTATION_URL));
    fields
}

/// Joins `key=value` fields into one record of the cloud-init dialect.
pub fn encode_fields(fields: &[(String, String)]) -> String {
    let mut writer = csv::WriterBuilder::new()
        .delimiter(b'|')
        .quote(b'\'')
        .double_quote(true)
        .quote_style(csv::QuoteStyle::Necessary)
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    writer
        .write_record(fields.iter().map(|(key, value)| format!("{key}={value}")))
        .expect("writing CSV to a Vec cannot fail");
    let bytes = writer
        .into_inner()
        .expect("flushing CSV to a Vec cannot fail");
    let record = String::from_utf8(bytes).expect("the CSV writer keeps UTF-8 input UTF-8");
    // cloud-init rstrip()s the record; its last field (vm_id or the documentation URL) never
    // ends in whitespace, so that only removes the terminator.
    record
        .strip_suffix("\r\n")
        .map(str::to_owned)
        .unwrap_or(record)
}

/// `result=success|agent=…|timestamp=…|vm_id=…`
pub fn encode_success(ctx: &ReportContext<'_>) -> String {
    encode_fields(&success_fields(ctx))
}

/// `result=error|reason=…|agent=…|…|vm_id=…|timestamp=…|documentation_url=…`
pub fn encode_error(ctx: &ReportContext<'_>, failure: &Failure) -> String {
    encode_fields(&error_fields(ctx, failure))
}

fn field(key: &str, value: &str) -> (String, String) {
    (key.to_owned(), value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn timestamp_has_microseconds_only_when_nonzero() {
        let whole = Utc.with_ymd_and_hms(2026, 11, 29, 14, 30, 57).unwrap();
        assert_eq!(format_timestamp(whole), "2026-11-29T14:30:57+00:00");
        let fractional = whole + chrono::Duration::nanoseconds(662_999);
        assert_eq!(
            format_timestamp(fractional),
            "2026-11-29T14:30:57.000662+00:00"
        );
    }

    #[test]
    fn quoting_covers_whole_fields_and_doubles_quotes() {
        let fields = vec![
            field("a", "x|y"),
            field("b", "it's"),
            field("c", "say \"hi\""),
            field("d", "l1\nl2"),
        ];
        assert_eq!(
            encode_fields(&fields),
            "'a=x|y'|'b=it''s'|c=say \"hi\"|'d=l1\nl2'"
        );
    }
}
