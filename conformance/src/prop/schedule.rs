//! A generated fault schedule: the answers the fake gives an agent's health reports, in order,
//! before it lets one through (`schedule.json`, `schedule.xml`). Its JSON form (in `--input`
//! and the regression file) and the scenario file it is run as, which `wirecheck run
//! --scenarios` replays as it stands.
//!
//! Each answer is one of the fault kinds the fixed scenarios script (docs/scenarios.md): an
//! error status, a status with `Retry-After`, the platform's throttle reply, a delay, a hang, a
//! reset, a close. The checks judge the agent by its profile's reactions to each, the same way
//! as for a fixed scenario (`obligations`).

use serde::{Deserialize, Serialize};

/// The longest schedule accepted (answers).
pub const MAX_ANSWERS: usize = 16;

/// The statuses a schedule may answer with: the retryable and fatal errors of docs/protocol.md
/// §8.2 (a 403 is the throttle reply, [`Answer::Throttled`], or this plain one).
pub const STATUSES: &[u16] = &[400, 403, 410, 429, 500, 502, 503, 504];

/// The largest `Retry-After` (seconds) and delay (milliseconds) accepted.
pub const MAX_RETRY_AFTER: u32 = 86_400;
pub const MAX_DELAY_MS: u32 = 600_000;

/// One answer of the fake to one health report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Answer {
    /// This status, no body.
    Status(u16),
    /// This status with `Retry-After: seconds`.
    RetryAfter { status: u16, seconds: u32 },
    /// 403 with the platform's `RequestRateLimitExceeded` body (docs/protocol.md §8.1).
    Throttled,
    /// The normal answer, `ms` late.
    Delay { ms: u32 },
    /// The request is read and never answered.
    Hang,
    /// A TCP reset.
    Reset,
    /// The connection closed without an answer.
    Close,
}

impl Answer {
    pub fn validate(&self) -> Result<(), String> {
        let status_ok = |s: &u16| {
            if STATUSES.contains(s) {
                Ok(())
            } else {
                Err(format!(
                    "status {s}: a schedule answers with one of {STATUSES:?}"
                ))
            }
        };
        match self {
            Answer::Status(s) => status_ok(s),
            Answer::RetryAfter { status, seconds } => {
                status_ok(status)?;
                if *seconds > MAX_RETRY_AFTER {
                    return Err(format!(
                        "Retry-After {seconds}: at most {MAX_RETRY_AFTER} seconds"
                    ));
                }
                Ok(())
            }
            Answer::Delay { ms } if *ms > MAX_DELAY_MS => {
                Err(format!("delay {ms} ms: at most {MAX_DELAY_MS} ms"))
            }
            _ => Ok(()),
        }
    }

    /// Whether this answer belongs to `class` (a class of characters holds no answer).
    pub fn is(&self, class: crate::agent::InputClass) -> bool {
        use crate::agent::InputClass;
        match class {
            InputClass::Gone => self.status() == Some(410),
            InputClass::RetryAfter => matches!(self, Answer::RetryAfter { .. }),
            InputClass::BadRequest => self.status() == Some(400),
            InputClass::PlainForbidden => self.status() == Some(403),
            InputClass::Hang => *self == Answer::Hang,
            InputClass::NonAscii
            | InputClass::NonLatin1
            | InputClass::NonBmp
            | InputClass::Control
            | InputClass::XmlInvalid
            | InputClass::LineBreak => false,
        }
    }

    /// The status it answers with (the throttle reply's 403 is not a plain one: `None`).
    fn status(&self) -> Option<u16> {
        match self {
            Answer::Status(s) | Answer::RetryAfter { status: s, .. } => Some(*s),
            Answer::Throttled
            | Answer::Delay { .. }
            | Answer::Hang
            | Answer::Reset
            | Answer::Close => None,
        }
    }

    /// Whether this answer is a fault (a delay still lets the report through).
    pub fn is_fault(&self) -> bool {
        !matches!(self, Answer::Delay { .. })
    }

    /// The scenario step that gives this answer (without `times`).
    fn step(&self) -> String {
        match self {
            Answer::Status(s) => format!("kind = \"respond\"\nstatus = {s}\n"),
            Answer::RetryAfter { status, seconds } => format!(
                "kind = \"respond\"\nstatus = {status}\nheaders = [[\"Retry-After\", \"{seconds}\"]]\n"
            ),
            Answer::Throttled => "kind = \"respond\"\npreset = \"throttled\"\n".into(),
            Answer::Delay { ms } => format!("kind = \"delay\"\nseconds = {}\n", seconds(*ms)),
            Answer::Hang => "kind = \"hang\"\n".into(),
            Answer::Reset => "kind = \"reset\"\n".into(),
            Answer::Close => "kind = \"close\"\n".into(),
        }
    }
}

/// Milliseconds as TOML seconds (always with a decimal point: a float).
fn seconds(ms: u32) -> String {
    format!("{:.3}", f64::from(ms) / 1000.0)
}

/// Checks a whole schedule: not empty, not too long, each answer valid.
pub fn validate(schedule: &[Answer]) -> Result<(), String> {
    if schedule.is_empty() {
        return Err("a schedule holds at least one answer".into());
    }
    if schedule.len() > MAX_ANSWERS {
        return Err(format!(
            "a schedule of {} answers: at most {MAX_ANSWERS}",
            schedule.len()
        ));
    }
    for (i, a) in schedule.iter().enumerate() {
        a.validate().map_err(|e| format!("answer {}: {e}", i + 1))?;
    }
    Ok(())
}

/// The `[[fake.endpoint]]` table that gives `schedule` to the health endpoint, then lets every
/// later report through; runs of one answer become one step with `times`.
pub fn endpoint_toml(schedule: &[Answer]) -> String {
    let mut out = String::from("[[fake.endpoint]]\nid = \"wireserver.health.*\"\n");
    let mut i = 0;
    while i < schedule.len() {
        let same = schedule[i..]
            .iter()
            .take_while(|a| **a == schedule[i])
            .count();
        out.push_str("\n[[fake.endpoint.step]]\n");
        out.push_str(&schedule[i].step());
        if same > 1 {
            out.push_str(&format!("times = {same}\n"));
        }
        i += same;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_reads_back_and_bad_answers_are_named() {
        let schedule = vec![
            Answer::Status(503),
            Answer::RetryAfter {
                status: 429,
                seconds: 5,
            },
            Answer::Throttled,
            Answer::Delay { ms: 250 },
            Answer::Hang,
            Answer::Reset,
            Answer::Close,
        ];
        let json = serde_json::to_string(&schedule).unwrap();
        assert_eq!(
            json,
            r#"[{"status":503},{"retry-after":{"status":429,"seconds":5}},"throttled",{"delay":{"ms":250}},"hang","reset","close"]"#
        );
        assert_eq!(
            serde_json::from_str::<Vec<Answer>>(&json).unwrap(),
            schedule
        );
        assert!(validate(&schedule).is_ok());
        assert!(validate(&[]).unwrap_err().contains("at least one"));
        assert!(
            validate(&[Answer::Reset, Answer::Status(201)])
                .unwrap_err()
                .starts_with("answer 2: status 201")
        );
        let long = vec![Answer::Close; MAX_ANSWERS + 1];
        assert!(validate(&long).unwrap_err().contains("at most"));
    }

    #[test]
    fn repeated_answers_become_one_step() {
        let toml = endpoint_toml(&[
            Answer::Status(503),
            Answer::Status(503),
            Answer::Status(503),
            Answer::Throttled,
        ]);
        assert_eq!(
            toml,
            "[[fake.endpoint]]\nid = \"wireserver.health.*\"\n\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 503\ntimes = 3\n\n[[fake.endpoint.step]]\nkind = \"respond\"\npreset = \"throttled\"\n"
        );
    }
}
