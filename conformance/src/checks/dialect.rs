//! The agent's declared encoded-report dialect (profile `[encoded]`) as the checks use it:
//! parsing with the declared dialect, the timestamp style, and where the agent cuts a report
//! (docs/protocol.md §6.1, §6.2, §6.5 step 7, §7.2). Without a declaration the checks keep the
//! recommended policy: the dialect comes from the report, only the platform's 4096-byte
//! description limit and the host's 1022-byte KVP value limit cut.

use wirecheck_oracle::encoded::{self, EncodedError, EncodedReport, Mode};

use crate::agent::{EncodedDialect, TimestampStyle};
use crate::observe::Observation;
use crate::scenario::Run;

pub fn declared(obs: &Observation) -> Option<EncodedDialect> {
    obs.profile.encoded
}

/// Parses with the declared dialect, if any.
pub fn parse(obs: &Observation, text: &str, mode: Mode) -> Result<EncodedReport, EncodedError> {
    encoded::parse_declared(text, mode, declared(obs).map(|d| d.dialect))
}

/// The fewest characters the encoded error report for `run` can have: every field's `key=`
/// and value and the `|` between them, before any quoting, with the shortest agent, VM id and
/// timestamp a producer writes (§6.2). Quoting and the real values only make it longer.
pub fn min_error_chars(run: &Run) -> usize {
    let chars = |s: &str| s.chars().count();
    let reason = run.reason.as_deref().map_or(0, chars);
    let data: usize = run
        .data
        .iter()
        .map(|(k, v)| chars(k) + 1 + chars(v) + 1)
        .sum();
    "result=error|reason=".len()
        + reason
        + "|agent=Cloud-Init/1".len()
        + data
        + "|vm_id=|timestamp=2000-01-01T00:00:00|documentation_url=".len()
        + encoded::DOCUMENTATION_URL.len()
}

/// Where the description of a failure report must have been cut, by the declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The report fits: it is sent whole.
    None,
    /// The report cannot fit: exactly this many characters are kept.
    At(usize),
    /// It may or may not fit (quoting, the agent's version and VM id decide): whole, or cut to
    /// exactly this many characters.
    Either(usize),
}

impl Cut {
    /// The number of characters a cut keeps, when one may happen.
    pub fn limit(self) -> Option<usize> {
        match self {
            Cut::None => None,
            Cut::At(n) | Cut::Either(n) => Some(n),
        }
    }
}

/// The cut a declared limit of `limit` characters implies for the error report of `run`. The
/// longest the report can be is not known (quoting doubles quotes), so a report that might fit
/// is `Either`.
pub fn cut_for(run: &Run, limit: Option<usize>) -> Cut {
    let Some(limit) = limit else { return Cut::None };
    let min = min_error_chars(run);
    if min > limit {
        Cut::At(limit)
    } else {
        Cut::Either(limit)
    }
}

/// True when `text` was cut at the declared `limit`: exactly that many characters, where the
/// cut allows one.
pub fn was_cut(text: &str, cut: Cut) -> bool {
    cut.limit().is_some_and(|n| text.chars().count() == n)
}

/// What is wrong with the length of a text the declaration says is cut like `cut` (`what`
/// names the limit in the message), if anything.
pub fn cut_problem(text: &str, cut: Cut, what: &str) -> Option<String> {
    let n = text.chars().count();
    match cut {
        Cut::None => None,
        Cut::At(limit) if n != limit => Some(format!(
            "the report cannot fit in {limit} characters, so the declared {what} keeps exactly {limit}; it has {n}"
        )),
        Cut::Either(limit) if n > limit => Some(format!(
            "{n} characters, more than the declared {what} of {limit}"
        )),
        _ => None,
    }
}

/// A timestamp that is not in the declared style (§6.2), as a message; `None` when it is, or
/// when nothing is declared.
pub fn timestamp_problem(obs: &Observation, ts: &str) -> Option<String> {
    let style = declared(obs)?.timestamp;
    let utc = ts.ends_with("+00:00");
    let has_offset = utc || ts.ends_with('Z') || ts.rfind(['+', '-']).is_some_and(|i| i > 10);
    let ok = match style {
        TimestampStyle::Utc => utc,
        TimestampStyle::Naive => !has_offset,
    };
    (!ok).then(|| {
        format!(
            "timestamp {ts:?} is not in the declared style ({}, profile [encoded].timestamp)",
            match style {
                TimestampStyle::Utc => "ending in +00:00",
                TimestampStyle::Naive => "naive, no offset",
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Action;

    fn run(reason: &str, data: &[(&str, &str)]) -> Run {
        Run {
            action: Action::Failure,
            reason: Some(reason.into()),
            data: data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            description: None,
        }
    }

    #[test]
    fn the_lower_bound_never_exceeds_a_real_cloud_init_report() {
        // cloud-init 25.1.4's own report for reason "boom", data x=1 (captured).
        let real = "result=error|reason=boom|agent=Cloud-Init/25.1.4|x=1|vm_id=0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a|timestamp=2026-12-01T09:47:38.966203+00:00|documentation_url=https://aka.ms/linuxprovisioningerror";
        let min = min_error_chars(&run("boom", &[("x", "1")]));
        assert!(min <= real.chars().count(), "{min}");
        assert!(min + 60 > real.chars().count(), "{min} is not tight");
    }

    #[test]
    fn cuts_are_exact_when_the_report_cannot_fit() {
        let long = run(&"é".repeat(600), &[]);
        assert_eq!(cut_for(&long, Some(512)), Cut::At(512));
        assert_eq!(cut_for(&run("boom", &[]), Some(512)), Cut::Either(512));
        assert_eq!(cut_for(&long, None), Cut::None);

        let kept: String = "é".repeat(512);
        assert!(was_cut(&kept, Cut::At(512)));
        assert_eq!(cut_problem(&kept, Cut::At(512), "trim"), None);
        // Cut by bytes instead of characters: 512 bytes of `é` are 256 characters.
        let by_bytes: String = "é".repeat(256);
        assert!(
            cut_problem(&by_bytes, Cut::At(512), "trim")
                .unwrap()
                .contains("has 256")
        );
        assert!(cut_problem(&"x".repeat(513), Cut::Either(512), "trim").is_some());
        assert_eq!(cut_problem("short", Cut::Either(512), "trim"), None);
    }
}
