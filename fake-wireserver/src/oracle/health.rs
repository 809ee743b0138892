//! Health reports as the wireserver receives them: XML (§4) and JSON (§5).

use serde::{Deserialize, Serialize};

use super::encoded::EncodedReport;
use super::finding::Finding;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportKind {
    Xml,
    Json,
}

/// The ids the fake served in its goal state; XML reports must echo them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServedIds {
    pub incarnation: String,
    pub container_id: String,
    pub instance_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    pub kind: ReportKind,
    pub state: Option<String>,
    pub substatus: Option<String>,
    /// Unescaped.
    pub description: Option<String>,
    /// XML only.
    pub goal_state_incarnation: Option<String>,
    pub container_id: Option<String>,
    pub instance_id: Option<String>,
    /// When the description looks encoded: its lenient parse.
    pub encoded: Option<EncodedReport>,
    pub findings: Vec<Finding>,
}

impl HealthReport {
    fn empty(kind: ReportKind) -> Self {
        HealthReport {
            kind,
            state: None,
            substatus: None,
            description: None,
            goal_state_incarnation: None,
            container_id: None,
            instance_id: None,
            encoded: None,
            findings: Vec::new(),
        }
    }
}

/// Parses a health XML body leniently. Never panics, never fails: problems are findings.
pub fn parse_xml(_body: &[u8], _served: Option<&ServedIds>) -> HealthReport {
    HealthReport::empty(ReportKind::Xml)
}

/// Parses a JSON health body. Never panics, never fails: problems are findings.
pub fn parse_json(_body: &[u8]) -> HealthReport {
    HealthReport::empty(ReportKind::Json)
}
