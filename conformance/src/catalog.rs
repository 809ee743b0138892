//! The check ids: every check a scenario may select, with its one-line meaning, and how a case
//! id (`<scenario id>.<check id>`) splits (the results contract's `split_case_id`, re-exported).
//! A leaf: scenario parsing, the checks, the runner and `wirecheck prop` all name checks
//! through it, and it imports none of them (only the bounded glob builder), so scenario files
//! are validated without the checks.

use std::fmt;

/// Declares the catalog from one row per check (variant, id, one-line meaning): the enum,
/// [`CheckId::ALL`] (the order cases are listed in), [`CheckId::as_str`] and
/// [`CheckId::title`] are all generated from the rows, so a check is added in one place.
macro_rules! catalog {
    ($($variant:ident => $id:literal, $title:literal;)+) => {
        /// One check of the catalog. The serialized form (case ids, `checks = [...]`, results)
        /// is [`CheckId::as_str`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum CheckId {
            $($variant,)+
        }

        impl CheckId {
            /// Every check, in the order cases are listed.
            pub const ALL: [CheckId; [$($id),+].len()] = [$(CheckId::$variant),+];

            /// Stable dotted id, the tail of case ids.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(CheckId::$variant => $id,)+
                }
            }

            /// What the check judges, in one line (case titles, `wirecheck list`).
            pub fn title(self) -> &'static str {
                match self {
                    $(CheckId::$variant => $title,)+
                }
            }
        }
    };
}

catalog! {
    ProtocolRequest => "protocol.request", "requests use the right method, path spelling and query";
    ProtocolHeaders => "protocol.headers", "required headers and content types per endpoint";
    ReportShape => "report.shape", "health report is well-formed and echoes the served goal state";
    ReportState => "report.state", "state and substatus match the requested report";
    ReportDescription => "report.description",
        "description carries the requested report (encoded fields, order, timestamp, documentation_url)";
    ReportLimit => "report.limit", "description within the platform's 4096-byte limit, trimmed not mangled";
    KvpPool => "kvp.pool", "pool file: 2560-byte records, NUL padding, UTF-8, key format, host limits";
    KvpReport => "kvp.report", "PROVISIONING_REPORT present and equal to what was reported";
    BehaviourRetry => "behaviour.retry", "retries exactly the answers its profile calls retryable";
    BehaviourInterval => "behaviour.interval", "waits at least the declared interval before retrying";
    BehaviourRate => "behaviour.rate", "request rate under throttling at most the declared maximum";
    BehaviourBudget => "behaviour.budget", "stops within the budget";
    BehaviourTerminal => "behaviour.terminal", "exactly one terminal report is delivered";
    BehaviourExit => "behaviour.exit", "exit status says whether the report was delivered";
    BehaviourTimeout => "behaviour.timeout", "abandons a request that hangs past the per-request timeout";
    BehaviourRefresh => "behaviour.refresh",
        "fetches the goal state again after a 410 on the health report (XML flow)";
    GuestUsers => "guest.users", "the guest has the users it was asked to create";
}

/// The case id tail of the snapshot case (`--snapshots`): not a catalog check (no scenario
/// selects it), but it has the catalog's two-part shape, so case ids split the same way.
pub const SNAPSHOT_CHECK: &str = "snapshot.transcript";

impl CheckId {
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
