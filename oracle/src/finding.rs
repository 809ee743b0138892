//! Findings: what the oracle noticed about a request, report or pool file.

use serde::{Deserialize, Serialize};

/// How much a finding matters. Conformance checks decide verdicts from these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The platform (or a spec-following peer) would misread or reject this.
    Error,
    /// Deviates from what the reference agents do; the platform probably copes.
    Warning,
    /// Worth knowing, not a deviation (e.g. a known truncation limit was hit).
    Info,
}

/// One observation with a stable dotted id (e.g. `health.incarnation-mismatch`,
/// `report.order.vm_id`, `kvp.value.over-host-limit`; the oracle's are all in [`crate::id`]). The message names the field and what
/// was expected.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Finding {
    /// The stable dotted id checks match on.
    pub id: String,
    /// How bad it is.
    pub severity: Severity,
    /// For people: the field, what was found and what was expected.
    pub message: String,
}

impl Finding {
    /// A finding with this id, severity and message.
    pub fn new(id: impl Into<String>, severity: Severity, message: impl Into<String>) -> Self {
        Finding {
            id: id.into(),
            severity,
            message: message.into(),
        }
    }

    /// A [`Severity::Error`] finding.
    pub fn error(id: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, Severity::Error, message)
    }

    /// A [`Severity::Warning`] finding.
    pub fn warning(id: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, Severity::Warning, message)
    }

    /// A [`Severity::Info`] finding.
    pub fn info(id: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, Severity::Info, message)
    }

    /// True for [`Severity::Error`].
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        write!(f, "{severity} [{}]: {}", self.id, self.message)
    }
}

/// True when any finding is an error.
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(Finding::is_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_serializes_lowercase() {
        let f = Finding::warning("health.incarnation-mismatch", "expected 7, got 1");
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(
            json,
            r#"{"id":"health.incarnation-mismatch","severity":"warning","message":"expected 7, got 1"}"#
        );
        let back: Finding = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn in_description_keeps_severity_and_message() {
        let f = Finding::error("report.missing.reason", "no reason").in_description();
        assert_eq!(f.id, "health.description.report.missing.reason");
        assert!(f.is_error());
        assert_eq!(
            f.to_string(),
            "error [health.description.report.missing.reason]: no reason"
        );
    }
}
