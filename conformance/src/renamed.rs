//! Case-id prefixes of the built-in suite that were renamed, old to new, so a `--cases`
//! pattern, a snapshot or a dashboard keyed by an old id is told where its cases went
//! (docs/case-ids.md lists the same rows; a test holds the page to this table).

use crate::catalog::CheckId;
use crate::select::CaseFilter;

/// One renamed scenario instance: its cases were `<old>.<check>`, now `<new>.<check>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renamed {
    pub old: &'static str,
    pub new: &'static str,
    /// Why, in a few words.
    pub why: &'static str,
}

/// Every rename, oldest first.
pub const RENAMED: &[Renamed] = &[Renamed {
    old: "retry.throttle.403.xml",
    new: "retry.throttle.403.burst.xml",
    why: "the XML twin folded into retry-throttle-403-burst.toml, which runs on both flows",
}];

/// The rename a scenario id was part of, if it is an old id.
pub fn of_scenario(id: &str) -> Option<&'static Renamed> {
    RENAMED.iter().find(|r| r.old == id)
}

/// Notes for `--cases` / `--exclude` patterns that select cases of an old id and none of its
/// new one (a pattern written before the rename).
pub fn notes(patterns: &[String]) -> Vec<String> {
    let mut notes = Vec::new();
    for pattern in patterns {
        let Ok(filter) = CaseFilter::new(std::slice::from_ref(pattern), &[]) else {
            continue;
        };
        let selects = |prefix: &str| {
            CheckId::ALL
                .iter()
                .any(|c| filter.matches(&format!("{prefix}.{}", c.as_str())))
        };
        for r in RENAMED.iter().filter(|r| selects(r.old) && !selects(r.new)) {
            notes.push(format!(
                "note: {pattern:?} selects cases of {}, renamed {} ({}; docs/case-ids.md)",
                r.old, r.new, r.why
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_pattern_written_for_an_old_id_is_told_the_new_one() {
        let notes = notes(&["retry.throttle.403.xml.*".into()]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("renamed retry.throttle.403.burst.xml"),
            "{notes:?}"
        );
        // One that also selects the new id, or nothing old, gets no note.
        assert!(super::notes(&["retry.throttle.403.*".into()]).is_empty());
        assert!(super::notes(&["transport.*".into()]).is_empty());
    }

    #[test]
    fn no_old_id_is_a_scenario_of_the_suite_and_every_new_one_is() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let suite = crate::scenario::load_dir(&dir).unwrap();
        for r in RENAMED {
            assert!(
                !suite.iter().any(|s| s.id == r.old),
                "{} still exists",
                r.old
            );
            assert!(
                suite.iter().any(|s| s.id == r.new),
                "{} does not exist",
                r.new
            );
        }
    }

    #[test]
    fn docs_case_ids_lists_every_rename() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/case-ids.md");
        let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        for r in RENAMED {
            let row = format!("| `{}` | `{}` |", r.old, r.new);
            assert!(page.contains(&row), "docs/case-ids.md lacks the row {row}");
        }
    }
}
