//! The rules a scenario obeys, however it was made: the file parser ([`super::parse`]) applies
//! them with line numbers, [`Scenario::validate`] to a scenario built in code (struct literals
//! included) before a fake serves it. Each rule returns what is wrong and what is expected.

use super::*;

/// Panics, at the caller of a builder method, when `rule` fails (the builder's way to apply a
/// rule).
#[track_caller]
pub(super) fn or_panic(method: &str, field: &str, rule: Result<(), String>) {
    if let Err(message) = rule {
        panic!("{method}: {field} {message}");
    }
}

pub(super) fn pattern(id: &str) -> Result<(), String> {
    if !crate::endpoint::is_valid_pattern(id) {
        return Err(format!(
            "{:?} is not a valid endpoint id or glob (letters, digits, '.', '-', '_', '*', '?'; at most {} characters and {} wildcards)",
            crate::text::clip(id, 64),
            crate::endpoint::MAX_PATTERN_LEN,
            crate::endpoint::MAX_PATTERN_WILDCARDS
        ));
    }
    if !crate::endpoint::pattern_matches_any(id) {
        return Err(format!(
            "{:?} matches no endpoint id; expected one of {}",
            crate::text::clip(id, 64),
            ENDPOINT_IDS.join(", ")
        ));
    }
    Ok(())
}

pub(super) fn rate_limited_pattern(id: &str) -> Result<(), String> {
    if crate::endpoint::pattern_matches_any(id) {
        Ok(())
    } else {
        Err(format!(
            "{:?} matches no endpoint id",
            crate::text::clip(id, 64)
        ))
    }
}

pub(super) const EMPTY_PLAN: &str = "a plan needs at least one [[endpoint.step]]";

pub(super) fn total_steps(n: usize) -> Result<(), String> {
    if n > MAX_STEPS {
        Err(format!(
            "a scenario has at most {MAX_STEPS} steps over all plans (use `times`)"
        ))
    } else {
        Ok(())
    }
}

pub(super) fn times(times: u32) -> Result<(), String> {
    if (1..=MAX_TIMES).contains(&times) {
        Ok(())
    } else {
        Err(format!("must be 1-{MAX_TIMES}, got {times}"))
    }
}

pub(super) fn probability(p: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(format!("must be between 0.0 and 1.0, got {p}"))
    }
}

pub(super) fn rate_requests(requests: u32) -> Result<(), String> {
    if (1..=MAX_RATE_REQUESTS).contains(&requests) {
        Ok(())
    } else {
        Err(format!("must be 1-{MAX_RATE_REQUESTS}, got {requests}"))
    }
}

pub(super) fn rate_window(window: f64) -> Result<(), String> {
    if window.is_finite() && window > 0.0 && window <= MAX_SECONDS {
        Ok(())
    } else {
        Err(format!(
            "must be a positive number of seconds up to {MAX_SECONDS}, got {window}"
        ))
    }
}

pub(super) fn trigger_after(after: f64) -> Result<(), String> {
    if after.is_finite() && (0.0..=MAX_SECONDS).contains(&after) {
        Ok(())
    } else {
        Err(format!(
            "must be a number of seconds from 0 to {MAX_SECONDS}, got {after}"
        ))
    }
}

pub(super) fn bump_incarnation(incarnation: Option<&str>) -> Result<(), String> {
    match incarnation {
        Some(inc) if inc.parse::<u64>().is_err() => Err(format!(
            "bump-incarnation needs a numeric goalstate.incarnation, got {inc:?}"
        )),
        _ => Ok(()),
    }
}

/// `seconds` of `delay` (`allow_zero`) and `interval` of `slow` (must be > 0).
pub(super) fn seconds(x: f64, allow_zero: bool) -> Result<(), String> {
    if x.is_finite() && (x > 0.0 || (allow_zero && x == 0.0)) && x <= MAX_SECONDS {
        Ok(())
    } else {
        Err(format!(
            "must be a number of seconds {} 0 and at most {MAX_SECONDS}, got {x}",
            if allow_zero { ">=" } else { ">" }
        ))
    }
}

pub(super) fn chunk(chunk: usize) -> Result<(), String> {
    if chunk >= 1 {
        Ok(())
    } else {
        Err("must be at least 1 byte".into())
    }
}

pub(super) fn status(status: u16) -> Result<(), String> {
    if (100..=599).contains(&status) {
        Ok(())
    } else {
        Err(format!("must be an HTTP status 100..=599, got {status}"))
    }
}

pub(super) fn header(name: &str, value: &str) -> Result<(), String> {
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(format!("{name:?} is not a valid header name"));
    }
    if http::HeaderValue::from_str(value).is_err() {
        return Err(format!("the value of {name:?} is not a valid header value"));
    }
    if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding")
    {
        return Err(format!(
            "{name:?} is computed by the fake; use kind = \"malformed\" for raw bytes"
        ));
    }
    Ok(())
}

impl Scenario {
    /// Checks a scenario built in code by the rules a scenario file obeys (endpoint ids and
    /// globs that match some endpoint, non-empty plans, `times` 1-[`MAX_TIMES`], `probability`
    /// in 0.0-1.0, statuses, headers, seconds, `[rate_limit]` and `imds.rate_limit` bounds,
    /// triggers). The error names the field like the parser's (`endpoint[1].id`), without a
    /// line. [`Fake::start`], [`serve_on`] and [`Fake::load_scenario`] call it, so a scenario
    /// written as a struct literal cannot be silently inert; a parsed scenario always passes.
    ///
    /// [`Fake::start`]: crate::Fake::start
    /// [`serve_on`]: crate::serve_on
    /// [`Fake::load_scenario`]: crate::Fake::load_scenario
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let invalid = |field: String, message: String| ScenarioError::Invalid {
            origin: self.origin.clone(),
            line: 0,
            column: 0,
            field,
            message,
        };
        let mut total = 0usize;
        for (i, plan) in self.endpoints.iter().enumerate() {
            let field = format!("endpoint[{}]", i + 1);
            pattern(&plan.id).map_err(|m| invalid(format!("{field}.id"), m))?;
            if plan.steps.is_empty() {
                return Err(invalid(format!("{field}.step"), EMPTY_PLAN.into()));
            }
            total += plan.steps.len();
            total_steps(total).map_err(|m| invalid(format!("{field}.step"), m))?;
            for (j, step) in plan.steps.iter().enumerate() {
                let field = format!("{field}.step[{}]", j + 1);
                step.check()
                    .map_err(|(name, m)| invalid(format!("{field}.{name}"), m))?;
                if step.then == Some(TriggerAction::BumpIncarnation) {
                    bump_incarnation(self.goalstate.incarnation.as_deref())
                        .map_err(|m| invalid(format!("{field}.then"), m))?;
                }
            }
        }
        if let Some(limit) = self.imds.rate_limit {
            limit
                .check()
                .map_err(|m| invalid("imds.rate_limit".into(), m))?;
        }
        if let Some(rl) = &self.rate_limit {
            rate_requests(rl.requests).map_err(|m| invalid("rate_limit.requests".into(), m))?;
            rate_window(rl.window).map_err(|m| invalid("rate_limit.window".into(), m))?;
            for (i, p) in rl.endpoints.iter().enumerate() {
                rate_limited_pattern(p)
                    .map_err(|m| invalid(format!("rate_limit.endpoints[{}]", i + 1), m))?;
            }
        }
        for (i, t) in self.triggers.iter().enumerate() {
            trigger_after(t.after).map_err(|m| invalid(format!("trigger[{}].after", i + 1), m))?;
            if t.action == TriggerAction::BumpIncarnation {
                bump_incarnation(self.goalstate.incarnation.as_deref())
                    .map_err(|m| invalid(format!("trigger[{}].action", i + 1), m))?;
            }
        }
        Ok(())
    }
}

impl Step {
    /// This step by the file rules: the failing field's name and what is wrong.
    fn check(&self) -> Result<(), (&'static str, String)> {
        times(self.times).map_err(|m| ("times", m))?;
        probability(self.probability).map_err(|m| ("probability", m))?;
        // Unlike a file, a reply built in code may leave out the status: it is 200.
        let reply_of = |reply: &Reply| -> Result<(), (&'static str, String)> {
            if let Some(s) = reply.status {
                status(s).map_err(|m| ("status", m))?;
            }
            for (name, value) in &reply.headers {
                header(name, value).map_err(|m| ("headers", m))?;
            }
            Ok(())
        };
        self.action.check_fields()?;
        match self.action.reply() {
            Some(reply) => reply_of(reply),
            None => Ok(()),
        }
    }
}
