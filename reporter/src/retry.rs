//! The retry engine both clients share (docs/protocol.md §8, §8.2).
//!
//! * One wall-clock budget around the whole loop: every attempt runs under a deadline of
//!   `min(now + request timeout, budget deadline)`, enforced from outside the attempt, so a
//!   stalled server, a dribbled body or any header cannot extend it.
//! * A fixed interval between attempts; no sleep that would end past the deadline.
//! * A declared set of retryable statuses; `Retry-After` is ignored.
//! * A failed attempt is logged only when [sampled](crate::bounded_log::is_sampled), its reason
//!   clipped to [`REASON_MAX`]: a hostile server cannot flood the log however long the budget.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::bounded_log::{Excerpt, LOGGED_IN_FULL, REASON_MAX, is_sampled};
use crate::format::xml::is_throttling_body;
use crate::http::Answer;

/// Budget, interval and per-request timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Wall-clock budget for the whole loop.
    pub budget: Duration,
    /// Pause between attempts.
    pub interval: Duration,
    /// Longest single attempt (cut to what is left of the budget).
    pub request_timeout: Duration,
}

impl RetryPolicy {
    /// Wireserver defaults: 20 minutes (cloud-init's and azure-init's budget), 1 s, 30 s.
    pub const WIRESERVER: RetryPolicy = RetryPolicy {
        budget: Duration::from_secs(20 * 60),
        interval: Duration::from_secs(1),
        request_timeout: Duration::from_secs(30),
    };

    /// IMDS defaults: 90 s covers the platform's documented window of up to 70 s of 410s
    /// after boot; the report only needs the vm id from it, so it must not hold the report up
    /// for cloud-init's 300 s.
    pub const IMDS: RetryPolicy = RetryPolicy {
        budget: Duration::from_secs(90),
        interval: Duration::from_secs(1),
        request_timeout: Duration::from_secs(30),
    };
}

/// Which answers are worth another attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retryable {
    pub statuses: &'static [u16],
    /// Retry a 403 whose body is the platform's `RequestRateLimitExceeded` reply (§8.1).
    pub throttled_403: bool,
}

impl Retryable {
    pub const WIRESERVER: Retryable = Retryable {
        statuses: &[404, 410, 429, 500, 503],
        throttled_403: true,
    };
    pub const IMDS: Retryable = Retryable {
        statuses: &[404, 410, 429, 500],
        throttled_403: false,
    };

    /// How a non-2xx answer is treated.
    pub fn classify(&self, answer: &Answer) -> StatusClass {
        if self.statuses.contains(&answer.status) {
            StatusClass::Retry(format!("HTTP {}", answer.status))
        } else if self.throttled_403 && answer.status == 403 && is_throttling_body(&answer.body) {
            StatusClass::Retry("HTTP 403 RequestRateLimitExceeded (throttled)".to_owned())
        } else {
            StatusClass::Fatal
        }
    }
}

/// The verdict on an error status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusClass {
    Retry(String),
    Fatal,
}

/// What one attempt concluded.
#[derive(Debug)]
pub enum Attempt<T, E> {
    /// Finished: stop retrying.
    Done(T),
    /// Worth another attempt; the text says why this one failed.
    Retry(String),
    /// Not worth another attempt.
    Fail(E),
}

/// Why a retried operation ended without a result.
#[derive(Debug)]
pub enum RetryError<E> {
    /// An attempt failed for good.
    Failed(E),
    /// The budget ran out.
    Exhausted {
        attempts: u32,
        elapsed: Duration,
        last: String,
    },
}

/// A running budget, shared by the steps of one flow (versions, goal state, health POST).
#[derive(Debug)]
pub struct Budget {
    policy: RetryPolicy,
    started: Instant,
    deadline: Instant,
    attempts: u32,
    /// Attempts that failed and were worth another one (what the log samples).
    failures: u32,
    last_failure: String,
}

impl Budget {
    /// Starts the clock.
    pub fn start(policy: RetryPolicy) -> Budget {
        let started = Instant::now();
        Budget {
            policy,
            started,
            deadline: started + policy.budget,
            attempts: 0,
            failures: 0,
            last_failure: String::from("no attempt made"),
        }
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Attempts made so far, over all steps.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Runs `attempt` (given its number in this budget) until it is done or fails for good, or
    /// the budget runs out.
    pub async fn run<T, E, F, Fut>(
        &mut self,
        step: &str,
        mut attempt: F,
    ) -> Result<T, RetryError<E>>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Attempt<T, E>>,
    {
        loop {
            let now = Instant::now();
            if now >= self.deadline {
                return Err(self.exhausted());
            }
            let attempt_deadline = (now + self.policy.request_timeout).min(self.deadline);
            self.attempts += 1;
            let outcome = match tokio::time::timeout_at(
                attempt_deadline.into(),
                attempt(self.attempts),
            )
            .await
            {
                Ok(outcome) => outcome,
                Err(_) => Attempt::Retry(format!(
                    "no complete answer within {:.1} s",
                    (attempt_deadline - now).as_secs_f64()
                )),
            };
            match outcome {
                Attempt::Done(value) => return Ok(value),
                Attempt::Fail(error) => return Err(RetryError::Failed(error)),
                Attempt::Retry(why) => {
                    self.failed(step, &why);
                    if !self.pause().await {
                        return Err(self.exhausted());
                    }
                }
            }
        }
    }

    /// Records why the last attempt failed and logs it, with what happens next, when this
    /// failure is [sampled](is_sampled) (counted over the budget's failures, not its attempts:
    /// in the XML flow's 410 loop, only every other attempt fails). The reason is escaped and
    /// clipped to [`REASON_MAX`] (it may quote the server).
    pub fn failed(&mut self, step: &str, why: &str) {
        let why = Excerpt::new(why, REASON_MAX).to_string();
        self.failures += 1;
        if is_sampled(self.failures) {
            tracing::warn!(
                step,
                attempt = self.attempts,
                elapsed_s = format_args!("{:.1}", self.elapsed().as_secs_f64()),
                "{why}; {}",
                if self.next_attempt_fits() {
                    format!("retrying in {:.1} s", self.policy.interval.as_secs_f64())
                } else {
                    "no time left in the budget for another attempt".to_owned()
                }
            );
        } else if self.failures == LOGGED_IN_FULL + 1 {
            tracing::warn!(
                step,
                attempt = self.attempts,
                "still failing; from now on only the 16th, 32nd, 64th, … failure is logged (the \
                 final message gives the attempt count and the last failure)"
            );
        }
        self.last_failure = why;
    }

    /// Sleeps one interval before the next attempt. Returns `false`, without sleeping, when
    /// the next attempt could not start before the deadline.
    pub async fn pause(&self) -> bool {
        if !self.next_attempt_fits() {
            return false;
        }
        tokio::time::sleep_until((Instant::now() + self.policy.interval).into()).await;
        true
    }

    /// Whether an attempt started one interval from now would still be inside the budget.
    fn next_attempt_fits(&self) -> bool {
        Instant::now() + self.policy.interval < self.deadline
    }

    /// The error for an exhausted budget.
    pub fn exhausted<E>(&self) -> RetryError<E> {
        RetryError::Exhausted {
            attempts: self.attempts,
            elapsed: self.elapsed(),
            last: self.last_failure.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(budget_ms: u64, interval_ms: u64, request_ms: u64) -> RetryPolicy {
        RetryPolicy {
            budget: Duration::from_millis(budget_ms),
            interval: Duration::from_millis(interval_ms),
            request_timeout: Duration::from_millis(request_ms),
        }
    }

    #[tokio::test]
    async fn a_hanging_attempt_cannot_outlive_the_budget() {
        let mut budget = Budget::start(policy(300, 50, 10_000));
        let started = Instant::now();
        let result: Result<(), RetryError<()>> = budget
            .run("hang", |_| async {
                std::future::pending::<()>().await;
                Attempt::Done(())
            })
            .await;
        let elapsed = started.elapsed();
        assert!(matches!(
            result,
            Err(RetryError::Exhausted { attempts: 1, .. })
        ));
        assert!(elapsed >= Duration::from_millis(290), "{elapsed:?}");
        assert!(elapsed < Duration::from_millis(2_000), "{elapsed:?}");
    }

    #[tokio::test]
    async fn retries_at_the_interval_until_done() {
        let mut budget = Budget::start(policy(10_000, 100, 1_000));
        let mut calls = Vec::new();
        let value: Result<u32, RetryError<()>> = budget
            .run("flaky", |_| {
                calls.push(Instant::now());
                let n = calls.len() as u32;
                async move {
                    if n < 3 {
                        Attempt::Retry(format!("try {n}"))
                    } else {
                        Attempt::Done(n)
                    }
                }
            })
            .await;
        assert_eq!(value.unwrap(), 3);
        assert_eq!(budget.attempts(), 3);
        for pair in calls.windows(2) {
            assert!(pair[1] - pair[0] >= Duration::from_millis(90));
        }
    }

    #[tokio::test]
    async fn a_fatal_answer_stops_at_once() {
        let mut budget = Budget::start(policy(10_000, 100, 1_000));
        let result: Result<(), RetryError<&str>> = budget
            .run("fatal", |_| async { Attempt::Fail("401") })
            .await;
        assert!(matches!(result, Err(RetryError::Failed("401"))));
        assert_eq!(budget.attempts(), 1);
    }

    #[test]
    fn classification_follows_the_declared_sets() {
        let answer = |status: u16, body: &str| Answer {
            status,
            headers: Default::default(),
            body: body.as_bytes().to_vec(),
        };
        let throttled = "<Error><Code>RequestRateLimitExceeded</Code></Error>";
        for status in [404, 410, 429, 500, 503] {
            assert!(matches!(
                Retryable::WIRESERVER.classify(&answer(status, "")),
                StatusClass::Retry(_)
            ));
        }
        for status in [400, 401, 403, 405, 408, 502, 504] {
            assert_eq!(
                Retryable::WIRESERVER.classify(&answer(status, "")),
                StatusClass::Fatal,
                "{status}"
            );
        }
        assert!(matches!(
            Retryable::WIRESERVER.classify(&answer(403, throttled)),
            StatusClass::Retry(_)
        ));
        assert_eq!(
            Retryable::IMDS.classify(&answer(403, throttled)),
            StatusClass::Fatal
        );
        assert_eq!(
            Retryable::IMDS.classify(&answer(503, "")),
            StatusClass::Fatal
        );
    }
}
