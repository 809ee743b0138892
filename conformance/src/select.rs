//! Which cases run: `--cases` / `--exclude` globs over case ids, and `--partition K/N`, a
//! deterministic split of the scenarios for parallel CI jobs. Every glob wirecheck takes (these,
//! a scenario's `checks`, a profile's `deviation.cases`) is built by [`glob`], within
//! [`MAX_GLOB_LEN`] and [`MAX_GLOB_WILDCARDS`].

use std::fmt;
use std::str::FromStr;

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Longest glob accepted, in bytes (case ids are under 100).
pub const MAX_GLOB_LEN: usize = 1024;
/// Most wildcards and brackets (`*`, `?`, `[`, `{`) in one glob. A glob compiles to a regex
/// whose size grows with them: 200,000 `*` made globset panic. Matching a compiled glob is
/// linear in the id, so no glob within these bounds takes exponential time.
pub const MAX_GLOB_WILDCARDS: usize = 64;

/// A glob within the bounds; the error says which bound, without echoing a huge pattern.
pub fn glob(pattern: &str) -> Result<Glob, String> {
    let shown = || crate::tools::text::clip(pattern, 80);
    if pattern.len() > MAX_GLOB_LEN {
        return Err(format!(
            "{:?} is not a valid glob: longer than {MAX_GLOB_LEN} bytes",
            shown()
        ));
    }
    let wildcards = pattern
        .chars()
        .filter(|c| matches!(c, '*' | '?' | '[' | '{'))
        .count();
    if wildcards > MAX_GLOB_WILDCARDS {
        return Err(format!(
            "{:?} is not a valid glob: {wildcards} wildcards, at most {MAX_GLOB_WILDCARDS}",
            shown()
        ));
    }
    Glob::new(pattern).map_err(|e| format!("{:?} is not a valid glob: {e}", shown()))
}

/// One glob as a matcher. A set of one, because `GlobSetBuilder::build` reports a regex it
/// cannot build where `Glob::compile_matcher` panics.
pub fn matcher(pattern: &str) -> Result<GlobSet, String> {
    let glob = glob(pattern)?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map_err(|e| format!("{:?}: {e}", crate::tools::text::clip(pattern, 80)))
}

/// Case id globs to include (none given: all) and exclude.
#[derive(Debug, Clone, Default)]
pub struct CaseFilter {
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

impl CaseFilter {
    pub fn new(include: &[String], exclude: &[String]) -> Result<CaseFilter, String> {
        let build = |globs: &[String], flag: &str| -> Result<Option<GlobSet>, String> {
            if globs.is_empty() {
                return Ok(None);
            }
            let mut set = GlobSetBuilder::new();
            for g in globs {
                set.add(glob(g).map_err(|e| format!("{flag} {e}"))?);
            }
            set.build().map(Some).map_err(|e| format!("{flag}: {e}"))
        };
        Ok(CaseFilter {
            include: build(include, "--cases")?,
            exclude: build(exclude, "--exclude")?,
        })
    }

    pub fn matches(&self, case_id: &str) -> bool {
        self.include.as_ref().is_none_or(|s| s.is_match(case_id))
            && !self.exclude.as_ref().is_some_and(|s| s.is_match(case_id))
    }
}

/// Partition `k` of `n` (1-based): scenarios `i` (0-based, in id order) with `i % n == k - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub k: usize,
    pub n: usize,
}

impl Partition {
    pub fn contains(&self, index: usize) -> bool {
        index % self.n == self.k - 1
    }
}

impl FromStr for Partition {
    type Err = String;
    fn from_str(s: &str) -> Result<Partition, String> {
        let bad = || format!("{s:?} is not K/N with 1 <= K <= N (e.g. 2/4)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let k: usize = k.trim().parse().map_err(|_| bad())?;
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Partition { k, n })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_include_then_exclude() {
        let f = CaseFilter::new(&["retry.*".into()], &["*.behaviour.rate".into()]).unwrap();
        assert!(f.matches("retry.throttle.403.behaviour.retry"));
        assert!(!f.matches("retry.throttle.403.behaviour.rate"));
        assert!(!f.matches("wire.health.json.ready.report.state"));
        assert!(CaseFilter::default().matches("anything"));
        assert!(
            CaseFilter::new(&["[".into()], &[])
                .unwrap_err()
                .contains("--cases")
        );
    }

    #[test]
    fn globs_are_bounded() {
        let stars = "*".repeat(200_000);
        let e = CaseFilter::new(&[stars], &[]).unwrap_err();
        assert!(
            e.starts_with("--cases ") && e.contains("longer than 1024"),
            "{e}"
        );
        assert!(e.len() < 300, "{e}");
        let e = matcher(&"a*".repeat(65)).unwrap_err();
        assert!(e.contains("65 wildcards, at most 64"), "{e}");
        let ok = matcher(&"a*".repeat(64)).unwrap();
        assert!(ok.is_match("a".repeat(64)));
        assert!(matcher("{a,b}.*").unwrap().is_match("b.c"));
    }

    #[test]
    fn partitions_cover_everything_once() {
        let parts: Vec<Partition> = (1..=3).map(|k| format!("{k}/3").parse().unwrap()).collect();
        for i in 0..10 {
            assert_eq!(parts.iter().filter(|p| p.contains(i)).count(), 1);
        }
        assert!("0/3".parse::<Partition>().is_err());
        assert!("4/3".parse::<Partition>().is_err());
        assert!("x".parse::<Partition>().is_err());
        assert_eq!("2/5".parse::<Partition>().unwrap().to_string(), "2/5");
    }
}
