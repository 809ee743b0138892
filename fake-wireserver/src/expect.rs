//! Expectations on what a fake receives, verified when the [`Fake`](crate::Fake) is dropped
//! (or explicitly with [`Fake::verify`](crate::Fake::verify)), in the manner of wiremock.
//!
//! ```
//! use fake_wireserver::Expectation;
//! // Exactly one health report (XML or JSON), and it says NotReady.
//! let e = Expectation::health_reports(1).state("NotReady");
//! // The goal state fetched at least twice.
//! let g = Expectation::requests("wireserver.goalstate").at_least(2);
//! # let _ = (e, g);
//! ```

use std::fmt;

use crate::journal::Entry;

/// How many matching requests are expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    Exactly(usize),
    AtLeast(usize),
    AtMost(usize),
    Between(usize, usize),
}

impl Times {
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
    state: Option<String>,
    substatus: Option<String>,
    status: Option<u16>,
    times: Times,
}

impl Expectation {
    /// Requests to `endpoint` (an endpoint id or glob such as `"wireserver.*"`); by default at
    /// least one.
    pub fn requests(endpoint: &str) -> Self {
        Expectation {
            subject: Subject::Requests(endpoint.to_owned()),
            state: None,
            substatus: None,
            status: None,
            times: Times::AtLeast(1),
        }
    }

    /// Exactly `n` health reports (XML and JSON endpoints together).
    pub fn health_reports(n: usize) -> Self {
        Expectation {
            subject: Subject::HealthReports,
            state: None,
            substatus: None,
            status: None,
            times: Times::Exactly(n),
        }
    }

    /// Only reports whose state is `state` (`"Ready"`, `"NotReady"`).
    pub fn state(mut self, state: &str) -> Self {
        self.state = Some(state.to_owned());
        self
    }

    /// Only reports whose substatus is `substatus` (`"ProvisioningFailed"`, `"Provisioning"`).
    pub fn substatus(mut self, substatus: &str) -> Self {
        self.substatus = Some(substatus.to_owned());
        self
    }

    /// Only requests the fake answered with this status.
    pub fn answered(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn times(mut self, n: usize) -> Self {
        self.times = Times::Exactly(n);
        self
    }
    pub fn at_least(mut self, n: usize) -> Self {
        self.times = Times::AtLeast(n);
        self
    }
    pub fn at_most(mut self, n: usize) -> Self {
        self.times = Times::AtMost(n);
        self
    }
    pub fn between(mut self, min: usize, max: usize) -> Self {
        self.times = Times::Between(min, max);
        self
    }
    pub fn never(self) -> Self {
        self.times(0)
    }

    fn matches(&self, e: &Entry) -> bool {
        let subject = match &self.subject {
            Subject::Requests(pattern) => crate::endpoint::pattern_matches(pattern, &e.endpoint),
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
                            r.state.as_deref().unwrap_or("?"),
                            r.substatus
                                .as_deref()
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
                        .unwrap_or_else(|| e.answer.kind.clone())
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
