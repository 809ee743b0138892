//! A generated fault schedule: the answers the fake gives an agent's requests to one endpoint, in
//! order, before it lets one through (`schedule.json`, `schedule.xml`): the health report, the
//! goal state (XML flow) and the IMDS instance document each have their own ([`Target`]). Its
//! JSON form (in `--input` and the regression file) and the scenario file it is run as, which
//! `wirecheck run --scenarios` replays as it stands.
//!
//! Each answer is one of the fault kinds the fixed scenarios script (docs/scenarios.md): an
//! error status, a status with `Retry-After`, the platform's throttle reply, a 200 the agent
//! cannot use, a delay, a hang, a reset, a close, a reply cut short; on the XML flow's health
//! report also a 410 given as the goal state moves on (`moved`). The checks judge the agent
//! by its profile's reactions to each, the same way as for a fixed scenario (`obligations`).

use serde::{Deserialize, Serialize};

/// The longest schedule accepted (answers).
pub const MAX_ANSWERS: usize = 16;

/// The statuses a wireserver schedule may answer with: the retryable and fatal errors of
/// docs/protocol.md §8.2 (a 403 is the throttle reply, [`Answer::Throttled`], or this plain
/// one). Plainest first: a shrunk schedule keeps the first that still fails.
pub const STATUSES: &[u16] = &[503, 500, 410, 429, 502, 504, 403, 400];

/// The statuses an IMDS schedule may answer with (docs/protocol.md §1.2, §8: 404 and 410
/// while the VM starts, 429 when throttled, 500 and 503 when unavailable, 403 through a
/// proxy, 400 for an api-version it does not serve). Plainest first.
pub const IMDS_STATUSES: &[u16] = &[404, 410, 429, 500, 503, 403, 400];

pub use crate::agent::Target;

/// The statuses `target`'s schedule may answer with.
pub fn statuses(target: Target) -> &'static [u16] {
    match target {
        Target::Health | Target::GoalState => STATUSES,
        Target::Imds => IMDS_STATUSES,
    }
}

/// The scenario's endpoint id for `target` (docs/scenarios.md).
fn endpoint(target: Target) -> &'static str {
    match target {
        Target::Health => "wireserver.health.*",
        Target::GoalState => "wireserver.goalstate",
        Target::Imds => "imds.instance",
    }
}

/// The body of a 200 the agent cannot use: a goal state cut off inside `<Incarnation>` (as
/// `goalstate.malformed`), an IMDS page that is not the instance document (as
/// `imds.unusable.200`).
const CUT_GOAL_STATE: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><GoalState><Version>2010-12-15</Version><Incarnation>1</Incarn";
const NOT_AN_INSTANCE: &str = "<html><body>Service starting</body></html>";

/// The largest `Retry-After` (seconds) and delay (milliseconds) accepted.
pub const MAX_RETRY_AFTER: u32 = 86_400;
pub const MAX_DELAY_MS: u32 = 600_000;

/// One answer of the fake to one request of its target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Answer {
    /// This status, no body.
    Status(u16),
    /// This status with `Retry-After: seconds`.
    RetryAfter { status: u16, seconds: u32 },
    /// 403 with the platform's `RequestRateLimitExceeded` body (docs/protocol.md §8.1).
    Throttled,
    /// A 200 whose body is not the document asked for (goal state and IMDS only).
    Unusable,
    /// The normal answer, `ms` late.
    Delay { ms: u32 },
    /// The request is read and never answered.
    Hang,
    /// A TCP reset.
    Reset,
    /// The connection closed without an answer.
    Close,
    /// The connection closed 60 bytes into the normal answer.
    Partial,
    /// 410 Gone on an XML health report as the goal state's incarnation goes up by one (a
    /// step's `then = "bump-incarnation"`): the goal state moved on between the agent's fetch
    /// and its report, so the report that follows must echo the new one (docs/protocol.md §4).
    Moved,
}

impl Answer {
    /// Whether the fake can give this answer for `target`.
    pub fn validate(&self, target: Target) -> Result<(), String> {
        let statuses = statuses(target);
        let status_ok = |s: &u16| {
            if statuses.contains(s) {
                Ok(())
            } else {
                Err(format!(
                    "status {s}: {} is answered with one of {statuses:?}",
                    target.name()
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
            Answer::Throttled if target == Target::Imds => {
                Err("\"throttled\" is the wireserver's reply: IMDS throttles with 429".into())
            }
            Answer::Unusable if target == Target::Health => Err(
                "\"unusable\" is a goal state or IMDS answer: a health report takes no document"
                    .into(),
            ),
            Answer::Moved if target != Target::Health => Err(
                "\"moved\" is the health report's answer: the report echoes the goal state that moved"
                    .into(),
            ),
            Answer::Moved
            | Answer::Throttled
            | Answer::Unusable
            | Answer::Delay { .. }
            | Answer::Hang
            | Answer::Reset
            | Answer::Close
            | Answer::Partial => Ok(()),
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
            InputClass::Unusable => *self == Answer::Unusable,
            InputClass::Partial => *self == Answer::Partial,
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
            Answer::Moved => Some(410),
            Answer::Throttled
            | Answer::Unusable
            | Answer::Delay { .. }
            | Answer::Hang
            | Answer::Reset
            | Answer::Close
            | Answer::Partial => None,
        }
    }

    /// Whether this answer is a fault (a delay still lets the report through).
    pub fn is_fault(&self) -> bool {
        !matches!(self, Answer::Delay { .. })
    }

    /// The scenario step that gives this answer for `target` (without `times`).
    fn step(&self, target: Target) -> String {
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
            Answer::Partial => "kind = \"partial\"\nbytes_sent = 60\n".into(),
            Answer::Moved => {
                "kind = \"respond\"\npreset = \"gone\"\nthen = \"bump-incarnation\"\n".into()
            }
            Answer::Unusable => {
                let (body, content_type) = match target {
                    Target::Imds => (NOT_AN_INSTANCE, "text/html"),
                    Target::Health | Target::GoalState => {
                        (CUT_GOAL_STATE, "text/xml; charset=utf-8")
                    }
                };
                format!(
                    "kind = \"respond\"\nstatus = 200\nbody = {body:?}\nheaders = [[\"Content-Type\", {content_type:?}]]\n"
                )
            }
        }
    }
}

/// Milliseconds as TOML seconds (always with a decimal point: a float).
fn seconds(ms: u32) -> String {
    format!("{:.3}", f64::from(ms) / 1000.0)
}

/// Checks one target's schedule: not too long, each answer one the fake can give there.
pub fn validate(target: Target, schedule: &[Answer]) -> Result<(), String> {
    if schedule.len() > MAX_ANSWERS {
        return Err(format!(
            "a schedule of {} answers: at most {MAX_ANSWERS}",
            schedule.len()
        ));
    }
    for (i, a) in schedule.iter().enumerate() {
        a.validate(target)
            .map_err(|e| format!("answer {}: {e}", i + 1))?;
    }
    Ok(())
}

/// The `[[fake.endpoint]]` table that gives `schedule` to `target`'s endpoint, then answers
/// every later request normally; runs of one answer become one step with `times`.
pub fn endpoint_toml(target: Target, schedule: &[Answer]) -> String {
    let mut out = format!("[[fake.endpoint]]\nid = {:?}\n", endpoint(target));
    let mut i = 0;
    while i < schedule.len() {
        let same = schedule[i..]
            .iter()
            .take_while(|a| **a == schedule[i])
            .count();
        out.push_str("\n[[fake.endpoint.step]]\n");
        out.push_str(&schedule[i].step(target));
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
            Answer::Partial,
        ];
        let json = serde_json::to_string(&schedule).unwrap();
        assert_eq!(
            json,
            r#"[{"status":503},{"retry-after":{"status":429,"seconds":5}},"throttled",{"delay":{"ms":250}},"hang","reset","close","partial"]"#
        );
        assert_eq!(
            serde_json::from_str::<Vec<Answer>>(&json).unwrap(),
            schedule
        );
        assert!(validate(Target::Health, &schedule).is_ok());
        assert!(validate(Target::GoalState, &schedule).is_ok());
        assert!(
            validate(Target::Health, &[Answer::Reset, Answer::Status(201)])
                .unwrap_err()
                .starts_with("answer 2: status 201")
        );
        let long = vec![Answer::Close; MAX_ANSWERS + 1];
        assert!(
            validate(Target::Health, &long)
                .unwrap_err()
                .contains("at most")
        );
        // Each endpoint takes only the answers it can give.
        assert!(
            validate(Target::Imds, &schedule)
                .unwrap_err()
                .starts_with("answer 3: \"throttled\" is the wireserver's")
        );
        assert!(validate(Target::Imds, &[Answer::Status(404), Answer::Unusable]).is_ok());
        assert!(
            validate(Target::Health, &[Answer::Status(404)])
                .unwrap_err()
                .contains("the health report is answered with one of")
        );
        assert!(
            validate(Target::Health, &[Answer::Unusable])
                .unwrap_err()
                .contains("takes no document")
        );
        // A goal state moves on as a health report is answered, nowhere else.
        assert_eq!(
            serde_json::to_string(&[Answer::Moved]).unwrap(),
            r#"["moved"]"#
        );
        assert!(validate(Target::Health, &[Answer::Moved]).is_ok());
        for target in [Target::GoalState, Target::Imds] {
            assert!(
                validate(target, &[Answer::Moved])
                    .unwrap_err()
                    .contains("the health report's answer")
            );
        }
        assert!(Answer::Moved.is(crate::agent::InputClass::Gone));
    }

    #[test]
    fn repeated_answers_become_one_step() {
        let toml = endpoint_toml(
            Target::Health,
            &[
                Answer::Status(503),
                Answer::Status(503),
                Answer::Status(503),
                Answer::Throttled,
            ],
        );
        assert_eq!(
            toml,
            "[[fake.endpoint]]\nid = \"wireserver.health.*\"\n\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 503\ntimes = 3\n\n[[fake.endpoint.step]]\nkind = \"respond\"\npreset = \"throttled\"\n"
        );
        let toml = endpoint_toml(Target::Imds, &[Answer::Unusable, Answer::Partial]);
        assert!(
            toml.starts_with("[[fake.endpoint]]\nid = \"imds.instance\"\n"),
            "{toml}"
        );
        assert!(toml.contains("body = \"<html>"), "{toml}");
        assert!(
            toml.contains("kind = \"partial\"\nbytes_sent = 60\n"),
            "{toml}"
        );
        let goal = endpoint_toml(Target::GoalState, &[Answer::Unusable]);
        assert!(goal.contains("<Incarnation>1</Incarn\""), "{goal}");
        let moved = endpoint_toml(Target::Health, &[Answer::Moved, Answer::Moved]);
        assert!(
            moved.ends_with(
                "kind = \"respond\"\npreset = \"gone\"\nthen = \"bump-incarnation\"\ntimes = 2\n"
            ),
            "{moved}"
        );
    }
}
