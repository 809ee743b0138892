//! Bounds on the work and the output of one parse of agent input.
//!
//! Everything the oracle reads is the agent's (a health body of up to the fake's `--max-body`, a
//! description inside it, a KVP pool), and the fake parses it while other agents wait for
//! their answers. So the work per input is linear in its size, and a finding that can repeat
//! once per element, key or field is listed at most [`MAX_FINDINGS_OF_A_KIND`] times
//! (`Repeats`), the rest counted in one summary finding. The tests count the steps a parser
//! takes (`step`) instead of timing it.

use crate::finding::Finding;

/// At most this many findings of one kind (one id, or one family of ids such as
/// `report.duplicate.*`) are listed per parse; one `*.repeated` finding counts the rest. No
/// agent's report has more than a few of a kind; a body with thousands is listed, not copied.
pub const MAX_FINDINGS_OF_A_KIND: usize = 16;

/// Counts findings per kind and keeps the ones past the bound from being made at all.
#[derive(Debug, Default)]
pub(crate) struct Repeats {
    /// (kind, findings of that kind so far): a handful of kinds per parse.
    seen: Vec<(&'static str, usize)>,
}

impl Repeats {
    /// Pushes `make()` unless `kind` already has [`MAX_FINDINGS_OF_A_KIND`] findings; past
    /// that only counts it (`make` is not called: no message is formatted for nothing).
    pub(crate) fn push(
        &mut self,
        findings: &mut Vec<Finding>,
        kind: &'static str,
        make: impl FnOnce() -> Finding,
    ) {
        let at = match self.seen.iter().position(|(k, _)| *k == kind) {
            Some(at) => at,
            None => {
                self.seen.push((kind, 0));
                self.seen.len() - 1
            }
        };
        self.seen[at].1 += 1;
        if self.seen[at].1 <= MAX_FINDINGS_OF_A_KIND {
            findings.push(make());
        }
    }

    /// Appends one `summary_id` finding (info: the listed ones carry the severity) per kind
    /// that went past the bound, saying how many were not listed.
    pub(crate) fn finish(self, findings: &mut Vec<Finding>, summary_id: &'static str) {
        for (kind, count) in self.seen {
            if count > MAX_FINDINGS_OF_A_KIND {
                findings.push(Finding::info(
                    summary_id,
                    format!(
                        "{} more finding(s) of kind {kind} not listed ({count} in all; at most {MAX_FINDINGS_OF_A_KIND} of a kind are)",
                        count - MAX_FINDINGS_OF_A_KIND
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod counter {
    use std::cell::Cell;
    thread_local! {
        static STEPS: Cell<u64> = const { Cell::new(0) };
    }
    pub(crate) fn add(n: usize) {
        STEPS.with(|c| c.set(c.get() + n as u64));
    }
    /// The steps counted on this thread since the last call.
    pub(crate) fn take() -> u64 {
        STEPS.with(|c| c.replace(0))
    }
}

#[cfg(test)]
pub(crate) use counter::take as take_steps;

/// Counts `n` steps of work over agent input (tests only; nothing in a build).
#[inline]
pub(crate) fn step(n: usize) {
    #[cfg(test)]
    counter::add(n);
    #[cfg(not(test))]
    let _ = n;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_list_sixteen_of_a_kind_and_count_the_rest() {
        let mut findings = Vec::new();
        let mut repeats = Repeats::default();
        let mut made = 0;
        for _ in 0..100 {
            repeats.push(&mut findings, "x.a", || {
                made += 1;
                Finding::warning("x.a", "a")
            });
        }
        repeats.push(&mut findings, "x.b", || Finding::error("x.b", "b"));
        repeats.finish(&mut findings, "x.repeated");
        assert_eq!(made, MAX_FINDINGS_OF_A_KIND);
        assert_eq!(findings.len(), MAX_FINDINGS_OF_A_KIND + 2);
        let last = findings.last().unwrap();
        assert_eq!(last.id, "x.repeated");
        assert!(
            last.message.starts_with("84 more finding(s) of kind x.a"),
            "{}",
            last.message
        );
    }
}
