//! The check ids: every check a scenario may select, with its one-line meaning, and how a case
//! id (`<scenario id>.<check id>`) splits (the results contract's `split_case_id`, re-exported).
//! A leaf: scenario parsing, the checks, the runner and `wirecheck prop` all name checks
//! through it, and it imports none of them (only the bounded glob builder), so scenario files
//! are validated without the checks.

use std::fmt;

/// One check of the catalog. The serialized form (case ids, `checks = [...]`, results) is
/// [`CheckId::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckId {
    ProtocolRequest,
    ProtocolHeaders,
    ReportShape,
    ReportState,
    ReportDescription,
    ReportLimit,
    KvpPool,
    KvpReport,
    BehaviourRetry,
    BehaviourInterval,
    BehaviourRate,
    BehaviourBudget,
    BehaviourTerminal,
    BehaviourExit,
    BehaviourTimeout,
    BehaviourRefresh,
}

/// The case id tail of the snapshot case (`--snapshots`): not a catalog check (no scenario
/// selects it), but it has the catalog's two-part shape, so case ids split the same way.
pub const SNAPSHOT_CHECK: &str = "snapshot.transcript";

impl CheckId {
    /// Every check, in the order cases are listed.
    pub const ALL: [CheckId; 16] = [
        CheckId::ProtocolRequest,
        CheckId::ProtocolHeaders,
        CheckId::ReportShape,
        CheckId::ReportState,
        CheckId::ReportDescription,
        CheckId::ReportLimit,
        CheckId::KvpPool,
        CheckId::KvpReport,
        CheckId::BehaviourRetry,
        CheckId::BehaviourInterval,
        CheckId::BehaviourRate,
        CheckId::BehaviourBudget,
        CheckId::BehaviourTerminal,
        CheckId::BehaviourExit,
        CheckId::BehaviourTimeout,
        CheckId::BehaviourRefresh,
    ];

    /// Stable dotted id, the tail of case ids.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckId::ProtocolRequest => "protocol.request",
            CheckId::ProtocolHeaders => "protocol.headers",
            CheckId::ReportShape => "report.shape",
            CheckId::ReportState => "report.state",
            CheckId::ReportDescription => "report.description",
            CheckId::ReportLimit => "report.limit",
            CheckId::KvpPool => "kvp.pool",
            CheckId::KvpReport => "kvp.report",
            CheckId::BehaviourRetry => "behaviour.retry",
            CheckId::BehaviourInterval => "behaviour.interval",
            CheckId::BehaviourRate => "behaviour.rate",
            CheckId::BehaviourBudget => "behaviour.budget",
            CheckId::BehaviourTerminal => "behaviour.terminal",
            CheckId::BehaviourExit => "behaviour.exit",
            CheckId::BehaviourTimeout => "behaviour.timeout",
            CheckId::BehaviourRefresh => "behaviour.refresh",
        }
    }

    /// What the check judges, in one line (case titles, `wirecheck list`).
    pub fn title(self) -> &'static str {
        match self {
            CheckId::ProtocolRequest => "requests use the right method, path spelling and query",
            CheckId::ProtocolHeaders => "required headers and content types per endpoint",
            CheckId::ReportShape => "health report is well-formed and echoes the served goal state",
            CheckId::ReportState => "state and substatus match the requested report",
            CheckId::ReportDescription => {
                "description carries the requested report (encoded fields, order, timestamp, documentation_url)"
            }
            CheckId::ReportLimit => {
                "description within the platform's 4096-byte limit, trimmed not mangled"
            }
            CheckId::KvpPool => {
                "pool file: 2560-byte records, NUL padding, UTF-8, key format, host limits"
            }
            CheckId::KvpReport => "PROVISIONING_REPORT present and equal to what was reported",
            CheckId::BehaviourRetry => "retries exactly the answers its profile calls retryable",
            CheckId::BehaviourInterval => "waits at least the declared interval before retrying",
            CheckId::BehaviourRate => "request rate under throttling at most the declared maximum",
            CheckId::BehaviourBudget => "stops within the budget",
            CheckId::BehaviourTerminal => "exactly one terminal report is delivered",
            CheckId::BehaviourExit => "exit status says whether the report was delivered",
            CheckId::BehaviourTimeout => {
                "abandons a request that hangs past the per-request timeout"
            }
            CheckId::BehaviourRefresh => {
                "fetches the goal state again after a 410 on the health report (XML flow)"
            }
        }
    }

    /// The check with this exact id.
    pub fn from_id(id: &str) -> Option<CheckId> {
        CheckId::ALL.into_iter().find(|c| c.as_str() == id)
    }

    /// Every id, comma-separated (for "known: ..." in errors).
    pub fn known() -> String {
        CheckId::ALL.map(CheckId::as_str).join(", ")
    }
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The checks a pattern (an id or a glob) matches, in catalog order; `Err` for a bad glob.
pub fn matching(pattern: &str) -> Result<Vec<CheckId>, String> {
    let glob = crate::select::matcher(pattern)?;
    Ok(CheckId::ALL
        .into_iter()
        .filter(|c| c.as_str() == pattern || glob.is_match(c.as_str()))
        .collect())
}

/// How a case id splits (scenario id, check id): the results contract's, since `merge` reads
/// case ids back with it.
pub use wirecheck_results::case_id::split_case_id;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_two_part_and_round_trip() {
        let mut ids: Vec<&str> = CheckId::ALL.iter().map(|c| c.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), CheckId::ALL.len());
        for c in CheckId::ALL {
            assert_eq!(c.as_str().matches('.').count(), 1, "{c}");
            assert_eq!(CheckId::from_id(c.as_str()), Some(c));
            assert!(!c.title().is_empty());
        }
        assert_eq!(SNAPSHOT_CHECK.matches('.').count(), 1);
        assert_eq!(CheckId::from_id("report.nope"), None);
    }

    #[test]
    fn patterns_select_checks() {
        assert_eq!(
            matching("kvp.*").unwrap(),
            [CheckId::KvpPool, CheckId::KvpReport]
        );
        assert_eq!(
            matching("behaviour.exit").unwrap(),
            [CheckId::BehaviourExit]
        );
        assert!(matching("nope").unwrap().is_empty());
        assert!(matching("[").is_err());
    }
}
