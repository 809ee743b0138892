//! `wirecheck kvp dump FILE [--json]`: a pool file as the host sees it.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use wirecheck_oracle::kvp::{self, ChunkedEvent, PoolView, SplitEvent};
use wirecheck_oracle::{Finding, Severity};

use super::text::visible;
use super::{EXIT_OK, EXIT_PROBLEMS, ToolError, ToolOutput, read_input_file};

#[derive(Serialize)]
struct Dump<'a> {
    file: String,
    #[serde(flatten)]
    pool: &'a PoolView,
    split_events: &'a [SplitEvent],
    /// `<key>|<index>` chunks read as one event (absent when there are none, so older dumps
    /// keep their shape).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    chunked_events: &'a [ChunkedEvent],
}

/// Decodes the pool file at `path` (oracle::kvp::decode_pool) and renders
/// its records, the provisioning report, rebuilt split events and every
/// finding. Exit 1 when any finding is an error, 0 otherwise; unreadable
/// input is a [`ToolError`] (exit 2).
pub fn kvp_dump(path: impl AsRef<Path>, json: bool) -> Result<ToolOutput, ToolError> {
    let path = path.as_ref();
    let bytes = read_input_file(path, "a KVP pool file")?;
    let pool = kvp::decode_pool(&bytes);
    let split_events = kvp::cloud_init_split_events(&pool);
    let chunked_events = kvp::suffix_chunked_events(&bytes, &pool);
    let any_error = pool
        .all_findings()
        .chain(
            pool.provisioning_report
                .iter()
                .flat_map(|(_, r)| r.findings.iter()),
        )
        .chain(split_events.iter().flat_map(|e| e.findings.iter()))
        .any(Finding::is_error);
    let stdout = if json {
        let dump = Dump {
            file: path.display().to_string(),
            pool: &pool,
            split_events: &split_events,
            chunked_events: &chunked_events,
        };
        let mut text = serde_json::to_string_pretty(&dump).expect("pool view serialises");
        text.push('\n');
        text
    } else {
        human(path, &pool, &split_events, &chunked_events)
    };
    Ok(ToolOutput {
        stdout,
        exit_code: if any_error { EXIT_PROBLEMS } else { EXIT_OK },
    })
}

fn human(
    path: &Path,
    pool: &PoolView,
    split_events: &[SplitEvent],
    chunked_events: &[ChunkedEvent],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} bytes, {} record{} of {} bytes",
        path.display(),
        pool.size,
        pool.records.len(),
        if pool.records.len() == 1 { "" } else { "s" },
        kvp::RECORD_SIZE
    );
    if !pool.records.is_empty() {
        out.push('\n');
        let _ = writeln!(
            out,
            "{:>4}  {:>7}  {:>9}  {:>11}  key / value (as the host sees them)",
            "#", "offset", "key bytes", "value bytes"
        );
        for record in &pool.records {
            let _ = writeln!(
                out,
                "{:>4}  {:>7}  {:>9}  {:>11}  {}",
                record.index,
                record.offset,
                record.key_bytes,
                record.value_bytes,
                visible(&record.key)
            );
            let _ = writeln!(out, "{:39}{}", "", visible(&record.value));
            for finding in &record.findings {
                let _ = writeln!(out, "{:39}{}", "", finding_line(finding));
            }
        }
    }
    if let Some((index, report)) = &pool.provisioning_report {
        out.push('\n');
        let dialect = report
            .dialect
            .map_or("unknown dialect".to_string(), |d| format!("{d} dialect"));
        let _ = writeln!(
            out,
            "PROVISIONING_REPORT (record {index}, {dialect}{})",
            if report.truncated { ", truncated" } else { "" }
        );
        for (key, value) in &report.fields {
            let _ = writeln!(out, "  {} = {}", visible(key), visible(value));
        }
        for finding in &report.findings {
            let _ = writeln!(out, "  {}", finding_line(finding));
        }
    }
    for event in split_events {
        out.push('\n');
        let records: Vec<String> = event.records.iter().map(usize::to_string).collect();
        let _ = writeln!(
            out,
            "split event {} (records {})",
            visible(&event.key),
            records.join(", ")
        );
        match &event.message {
            Some(message) => {
                for line in message.split('\n') {
                    let _ = writeln!(out, "  | {}", visible(line));
                }
            }
            None => out.push_str("  (does not rebuild)\n"),
        }
        for finding in &event.findings {
            let _ = writeln!(out, "  {}", finding_line(finding));
        }
    }
    for event in chunked_events {
        out.push('\n');
        let records: Vec<String> = event.records.iter().map(usize::to_string).collect();
        let _ = writeln!(
            out,
            "chunked event {} (records {}, joined in index order)",
            visible(&event.key),
            records.join(", ")
        );
        for line in event.value.split('\n') {
            let _ = writeln!(out, "  | {}", visible(line));
        }
    }
    out.push('\n');
    if pool.findings.is_empty() {
        out.push_str("pool findings: none\n");
    } else {
        out.push_str("pool findings:\n");
        for finding in &pool.findings {
            let _ = writeln!(out, "  {}", finding_line(finding));
        }
    }
    out
}

pub(crate) fn finding_line(finding: &Finding) -> String {
    let severity = match finding.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    format!("{severity} [{}]: {}", finding.id, visible(&finding.message))
}
