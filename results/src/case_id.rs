//! How a case id (`<scenario id>.<check id>`) splits: every check id (the runner's catalog's,
//! and the snapshot case's `snapshot.transcript`) is two dotted parts. `merge` and the problem
//! groups read case ids back with it; the runner's catalog re-exports it.

/// A case id split into its scenario id and its check id: every check id is two dotted parts,
/// so the check is the last two.
pub fn split_case_id(case_id: &str) -> (&str, &str) {
    match case_id.rmatch_indices('.').nth(1) {
        Some((i, _)) => (&case_id[..i], &case_id[i + 1..]),
        None => (case_id, case_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_ids_split_into_scenario_and_check() {
        assert_eq!(
            split_case_id("wire.health.xml.ready.report.state"),
            ("wire.health.xml.ready", "report.state")
        );
        assert_eq!(
            split_case_id("retry.x-2.snapshot.transcript"),
            ("retry.x-2", "snapshot.transcript")
        );
        assert_eq!(split_case_id("odd"), ("odd", "odd"));
    }
}
