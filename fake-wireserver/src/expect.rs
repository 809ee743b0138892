//! Expectations on what a fake receives, verified when the [`Fake`](crate::Fake) is dropped
//! (or explicitly with [`Fake::verify`](crate::Fake::verify)), in the manner of wiremock.
//!
//! ```
//! use fake_wireserver::{EndpointId, Expectation};
//! // Exactly one health report (XML or JSON), and it says NotReady.
//! let e = Expectation::health_reports(1).state("NotReady");
//! // The goal state fetched at least twice.
//! let g = Expectation::requests(EndpointId::WireserverGoalstate).at_least(2);
//! // One to three requests to any IMDS endpoint.
//! let i = Expectation::requests("imds.*").times(1..=3);
//! # let _ = (e, g, i);
//! ```
//!
//! Each expectation [`Fake::expect`](crate::Fake::expect) records names the line that set it
//! when it fails.
//!
//! ```
//! # use fake_wireserver::{EndpointId, Expectation};
//! // A typo'd id is refused at once (a panic at this line listing the valid ids), so an
//! // expectation cannot pass because it counts an endpoint that does not exist.
//! assert!(Expectation::try_requests("wireserver.goalstat").is_err());
//! ```

use std::fmt;
use std::ops::{RangeFrom, RangeInclusive, RangeToInclusive};

#[cfg(doc)]
use crate::EndpointId;
use crate::endpoint::{IntoEndpointPattern, UnknownEndpoint};
use crate::journal::Entry;
use crate::oracle::health::{HealthState, KNOWN_STATES, KNOWN_SUBSTATUSES, SubStatus};

/// Panics, at the caller of `method`, when `value` is not one of `known`.
#[track_caller]
fn known(method: &str, what: &str, value: &str, known: &[&str]) {
    if !known.contains(&value) {
        panic!(
            "{method}: unknown {what} {value:?}; expected one of {} (case-sensitive)",
            known.join(", ")
        );
    }
}

/// How many matching requests are expected. From a count (`2`), or a range: `1..=3`, `2..`
/// (at least), `..=4` (at most).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// Exactly this many.
    Exactly(usize),
    /// This many or more.
    AtLeast(usize),
    /// This many or fewer.
    AtMost(usize),
    /// Between the two, both included.
    Between(usize, usize),
}

impl From<usize> for Times {
    fn from(n: usize) -> Self {
        Times::Exactly(n)
    }
}

impl From<RangeInclusive<usize>> for Times {
    fn from(range: RangeInclusive<usize>) -> Self {
        Times::Between(*range.start(), *range.end())
    }
}

impl From<RangeFrom<usize>> for Times {
    fn from(range: RangeFrom<usize>) -> Self {
        Times::AtLeast(range.start)
    }
}

impl From<RangeToInclusive<usize>> for Times {
    fn from(range: RangeToInclusive<usize>) -> Self {
        Times::AtMost(range.end)
    }
}

impl Times {
    /// `times`, or a panic at the caller of `method` when it is an empty range.
    #[track_caller]
    fn checked(method: &str, times: Times) -> Times {
        if let Times::Between(a, b) = times
            && a > b
        {
            panic!("{method}: empty range {a}..={b}: no count is at least {a} and at most {b}");
        }
        times
    }

    fn contains(self, n: usize) -> bool {
        match self {
            Times::Exactly(x) => n == x,
            Times::AtLeast(x) => n >= x,
            Times::AtMost(x) => n <= x,
            Times::Between(a, b) => a <= n && n <= b,
        }
    }
}

impl fmt::Display for Times {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Times::Exactly(x) => write!(f, "exactly {x}"),
            Times::AtLeast(x) => write!(f, "at least {x}"),
            Times::AtMost(x) => write!(f, "at most {x}"),
            Times::Between(a, b) => write!(f, "between {a} and {b}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Subject {
    /// Requests classified into an endpoint id (or glob).
    Requests(String),
    /// Health reports (XML or JSON POSTs), parsed by the oracle.
    HealthReports,
}

/// One expectation: a subject, optional filters, and a count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    subject: Subject,
    state: Option<HealthState>,
    substatus: Option<SubStatus>,
    status: Option<u16>,
    times: Times,
}

impl Expectation {
    /// Requests to `endpoint`: an [`EndpointId`], or a string id or glob such as
    /// `"wireserver.*"`; by default at least one. Panics, at the caller's line, on a string that
    /// matches no endpoint id, listing the valid ids ([`Expectation::try_requests`] returns the
    /// error).
    #[track_caller]
    pub fn requests(endpoint: impl IntoEndpointPattern) -> Self {
        match Expectation::try_requests(endpoint) {
            Ok(e) => e,
            Err(e) => panic!("Expectation::requests: {e}"),
        }
    }

    /// [`Expectation::requests`], returning a typo'd id as an error instead of panicking.
    pub fn try_requests(endpoint: impl IntoEndpointPattern) -> Result<Self, UnknownEndpoint> {
        Ok(Expectation {
            subject: Subject::Requests(endpoint.into_endpoint_pattern()?),
            state: None,
            substatus: None,
            status: None,
            times: Times::AtLeast(1),
        })
    }

    /// Health reports (XML and JSON endpoints together), `times` of them: a count (`1`) or a
    /// range (`1..=2`). Panics, at the caller's line, on an empty range (`3..=1`).
    #[track_caller]
    pub fn health_reports(times: impl Into<Times>) -> Self {
        Expectation {
            subject: Subject::HealthReports,
            state: None,
            substatus: None,
            status: None,
            times: Times::checked("Expectation::health_reports", times.into()),
        }
    }

    /// Only reports whose state is `state`: `"Ready"` or `"NotReady"` (what the oracle knows;
    /// case-sensitive). Panics, at the caller's line, on anything else, listing the values: a
    /// typo would match no report, and a negative expectation would pass vacuously.
    #[track_caller]
    pub fn state(mut self, state: &str) -> Self {
        known("Expectation::state", "state", state, &KNOWN_STATES);
        self.state = Some(HealthState::from(state));
        self
    }

    /// Only reports whose substatus is `substatus`: `"ProvisioningFailed"` or `"Provisioning"`
    /// (what the oracle knows). Panics, at the caller's line, on anything else, like
    /// [`Expectation::state`].
    #[track_caller]
    pub fn substatus(mut self, substatus: &str) -> Self {
        known(
            "Expectation::substatus",
            "substatus",
            substatus,
            &KNOWN_SUBSTATUSES,
        );
        self.substatus = Some(SubStatus::from(substatus));
        self
    }

    /// Only requests the fake answered with this status.
    pub fn answered(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// How many: a count (`2`) or a range (`1..=3`, `2..`, `..=4`). Panics, at the caller's
    /// line, on an empty range (`3..=1`), which no count could meet.
    #[track_caller]
    pub fn times(mut self, times: impl Into<Times>) -> Self {
        self.times = Times::checked("Expectation::times", times.into());
        self
    }
    /// `n` or more.
    pub fn at_least(mut self, n: usize) -> Self {
        self.times = Times::AtLeast(n);
        self
    }
    /// `n` or fewer.
    pub fn at_most(mut self, n: usize) -> Self {
        self.times = Times::AtMost(n);
        self
    }
    /// Between `min` and `max`, both included (= `times(min..=max)`). Panics, at the caller's
    /// line, when `min > max`.
    #[track_caller]
    pub fn between(mut self, min: usize, max: usize) -> Self {
        self.times = Times::checked("Expectation::between", Times::Between(min, max));
        self
    }
    /// None at all.
    pub fn never(self) -> Self {
        self.times(0)
    }

    fn matches(&self, e: &Entry) -> bool {
        let subject = match &self.subject {
            Subject::Requests(pattern) => {
                crate::endpoint::pattern_matches(pattern, e.endpoint.as_str())
            }
            Subject::HealthReports => e.report.is_some(),
        };
        let report = e.report.as_ref();
        subject
            && self
                .state
                .as_ref()
                .is_none_or(|s| report.and_then(|r| r.state.as_ref()) == Some(s))
            && self
                .substatus
                .as_ref()
                .is_none_or(|s| report.and_then(|r| r.substatus.as_ref()) == Some(s))
            && self.status.is_none_or(|s| e.answer.status == Some(s))
    }

    /// Checks the expectation against a journal; the error says what was expected and what
    /// arrived.
    pub fn check(&self, journal: &[Entry]) -> Result<(), String> {
        let matching: Vec<&Entry> = journal.iter().filter(|e| self.matches(e)).collect();
        if self.times.contains(matching.len()) {
            return Ok(());
        }
        let seen: Vec<String> = journal
            .iter()
            .map(|e| {
                let state = e
                    .report
                    .as_ref()
                    .map(|r| {
                        format!(
                            " [{}{}]",
                            r.state.as_ref().map_or("?", HealthState::as_str),
                            r.substatus
                                .as_ref()
                                .map(|s| format!("/{s}"))
                                .unwrap_or_default()
                        )
                    })
                    .unwrap_or_default();
                format!(
                    "  #{} {} {} -> {} {}{state}",
                    e.seq,
                    e.method,
                    e.target,
                    e.endpoint,
                    e.answer
                        .status
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| e.answer.kind.to_string())
                )
            })
            .collect();
        Err(format!(
            "expected {} {self}, got {}; the fake received:\n{}",
            self.times,
            matching.len(),
            if seen.is_empty() {
                "  (nothing)".to_owned()
            } else {
                seen.join("\n")
            }
        ))
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Subject::Requests(p) => write!(f, "request(s) to {p}")?,
            Subject::HealthReports => write!(f, "health report(s)")?,
        }
        if let Some(s) = &self.state {
            write!(f, " with state {s}")?;
        }
        if let Some(s) = &self.substatus {
            write!(f, " with substatus {s}")?;
        }
        if let Some(s) = self.status {
            write!(f, " answered {s}")?;
        }
        Ok(())
    }
}
