//! Encoded provisioning reports ("cloud-init format", PROTOCOL.md §6).

use serde::{Deserialize, Serialize};

use super::finding::Finding;

/// Which producer's CSV rules a report follows (§6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// cloud-init 23.2+: quote `'`, trailing whitespace stripped.
    CloudInit,
    /// azure-init: quote `"`, trailing whitespace kept.
    AzureInit,
}

/// How forgiving the parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Quoting must be exactly what §6.1 produces; input must not end inside quotes.
    Strict,
    /// Recover what can be recovered (truncated input, lost azure-init KVP quotes);
    /// deviations become findings.
    Lenient,
}

/// A parsed report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodedReport {
    pub dialect: Option<Dialect>,
    /// In order, keys as written.
    pub fields: Vec<(String, String)>,
    /// The input ended inside a quoted field or a key (lenient mode only).
    pub truncated: bool,
    pub findings: Vec<Finding>,
}

/// Why a report could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodedError {
    #[error("empty input; expected an encoded report starting with `result=`")]
    Empty,
}

/// Parses one encoded report (§6.5).
pub fn parse(input: &str, _mode: Mode) -> Result<EncodedReport, EncodedError> {
    if input.is_empty() {
        return Err(EncodedError::Empty);
    }
    Ok(EncodedReport {
        dialect: None,
        fields: Vec::new(),
        truncated: false,
        findings: Vec::new(),
    })
}

/// True when `s` looks like an encoded report (starts with `result=`).
pub fn looks_encoded(s: &str) -> bool {
    s.starts_with("result=")
}
