//! One generated input of a property run: what the agent is asked to report (a failure's
//! reason and supporting data, or an in-progress description), and its textual form
//! (ASCII-only JSON, for replay commands and regression files).

use serde::{Deserialize, Serialize};

use super::schedule::{self, Answer, Target};
use crate::agent::InputClass;

/// The largest `--input` or regression line accepted (bytes of JSON).
pub const MAX_INPUT_JSON: usize = 64 * 1024;

/// Keys the encoded report writes itself (docs/protocol.md §6.2): supporting data must not repeat
/// them, so the generator never does.
pub const RESERVED_KEYS: &[&str] = &[
    "result",
    "reason",
    "agent",
    "pps_type",
    "vm_id_source",
    "vm_id",
    "timestamp",
    "documentation_url",
];

/// What one generated case asks the agent to report, or the faults it meets on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// A failure report's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A failure report's supporting data, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<(String, String)>,
    /// An in-progress report's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A schedule property's answers to the health reports ([`Answer`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<Answer>,
    /// Its answers to the goal state requests (XML flow).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goalstate: Vec<Answer>,
    /// Its answers to the IMDS instance requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imds: Vec<Answer>,
}

impl Input {
    /// Every text the agent is handed (keys included).
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.reason
            .iter()
            .map(String::as_str)
            .chain(self.data.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
            .chain(self.description.iter().map(String::as_str))
    }

    /// Each target's schedule, empty where it has none.
    pub fn schedules(&self) -> [(Target, &[Answer]); 3] {
        Target::ALL.map(|t| (t, self.answers(t)))
    }

    /// The answers scheduled for `target`.
    pub fn answers(&self, target: Target) -> &[Answer] {
        match target {
            Target::Health => &self.schedule,
            Target::GoalState => &self.goalstate,
            Target::Imds => &self.imds,
        }
    }

    /// Whether any endpoint has a schedule (the input of a schedule property).
    pub fn has_schedule(&self) -> bool {
        self.schedules().iter().any(|(_, s)| !s.is_empty())
    }

    /// True when some text holds a character of `class`, or `at`'s schedule an answer of it
    /// (a limitation's class of answers is the evidence of one endpoint's).
    pub fn has(&self, class: InputClass, at: Target) -> bool {
        self.texts().any(|t| class.in_text(t)) || self.answers(at).iter().any(|a| a.is(class))
    }

    /// This input with every character of `class` replaced by `a`, and every answer of it in
    /// `at`'s schedule made plain: a `Retry-After` dropped from its status, any other answer of
    /// the class left out, so the answers after it are still met. What a failure a limitation
    /// of that class explains must not show (keys are names, left alone). The run stays the
    /// same otherwise: a schedule left empty meets the normal answer instead (a `delay` of
    /// 0 ms), so IMDS is still asked for the VM id and the health report still scripted.
    pub fn without(&self, class: InputClass, at: Target) -> Input {
        let plain = |t: &str| -> String {
            t.chars()
                .map(|c| {
                    if class.in_text(c.encode_utf8(&mut [0; 4])) {
                        'a'
                    } else {
                        c
                    }
                })
                .collect()
        };
        let answers = |target: Target| {
            let before = self.answers(target);
            if target != at {
                return before.to_vec();
            }
            let after = plain_schedule(before, class);
            if after.is_empty() && !before.is_empty() {
                vec![Answer::Delay { ms: 0 }]
            } else {
                after
            }
        };
        Input {
            reason: self.reason.as_deref().map(plain),
            data: self
                .data
                .iter()
                .map(|(k, v)| (k.clone(), plain(v)))
                .collect(),
            description: self.description.as_deref().map(plain),
            schedule: answers(Target::Health),
            goalstate: answers(Target::GoalState),
            imds: answers(Target::Imds),
        }
    }

    /// Compact JSON with every non-ASCII character and DEL as a `\u` escape: safe to print on
    /// a terminal and to paste into a shell between single quotes.
    pub fn to_json(&self) -> String {
        let json = serde_json::to_string(self).expect("strings always serialize");
        let mut out = String::with_capacity(json.len());
        for c in json.chars() {
            if c.is_ascii() && c != '\u{7f}' {
                out.push(c);
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out
    }

    /// Reads `--input` or a regression line, checking what every agent invocation needs.
    pub fn from_json(text: &str) -> Result<Input, String> {
        if text.len() > MAX_INPUT_JSON {
            return Err(format!(
                "the input is {} bytes of JSON, at most {MAX_INPUT_JSON} are accepted",
                text.len()
            ));
        }
        let input: Input = serde_json::from_str(text).map_err(|e| {
            format!(
                "not an input: {e} (expected {{\"reason\": \"...\", \"data\": [[\"key\", \"value\"]]}}, {{\"description\": \"...\"}} or {{\"schedule\": [{{\"status\": 503}}, \"reset\", ...], \"goalstate\": [...], \"imds\": [...]}})"
            )
        })?;
        input.validate()?;
        Ok(input)
    }

    /// Rules every input must keep to be passable as arguments: no NUL (argv strings end at
    /// one), keys that are names (`KEY=VALUE` splits at the first `=`), no key twice.
    pub fn validate(&self) -> Result<(), String> {
        for (target, answers) in self.schedules() {
            schedule::validate(target, answers).map_err(|e| format!("{}: {e}", target.key()))?;
        }
        if self.texts().any(|t| t.contains('\0')) {
            return Err("a NUL character cannot be passed in an argument".into());
        }
        for (i, (key, _)) in self.data.iter().enumerate() {
            if !is_key(key) {
                return Err(format!(
                    "data key {key:?}: expected a letter or `_` followed by letters, digits or `_`"
                ));
            }
            if RESERVED_KEYS.contains(&key.as_str()) {
                return Err(format!("data key {key:?} is written by the encoder itself"));
            }
            if self.data[..i].iter().any(|(k, _)| k == key) {
                return Err(format!("data key {key:?} is given twice"));
            }
        }
        Ok(())
    }

    /// A one-line description for terminals and evidence: the JSON, cut to `max` characters.
    pub fn summary(&self, max: usize) -> String {
        let json = self.to_json();
        if json.chars().count() <= max {
            json
        } else {
            let cut: String = json.chars().take(max).collect();
            format!("{cut}… ({} bytes of JSON)", json.len())
        }
    }
}

/// `schedule` without the answers of `class` ([`Input::without`]).
fn plain_schedule(schedule: &[Answer], class: InputClass) -> Vec<Answer> {
    schedule
        .iter()
        .filter_map(|a| match a {
            Answer::RetryAfter { status, .. } if class == InputClass::RetryAfter => {
                Some(Answer::Status(*status))
            }
            a if a.is(class) => None,
            a => Some(a.clone()),
        })
        .collect()
}

/// A supporting-data key: `[A-Za-z_][A-Za-z0-9_]*`, at most 254 bytes.
pub fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    key.len() <= 254
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `'text'` for a POSIX shell.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_ascii_and_reads_back_exactly() {
        let input = Input {
            reason: Some("a'b|c\r\n\u{7f}é€😀\u{1}".into()),
            data: vec![("k".into(), "v=1".into())],
            ..Input::default()
        };
        let json = input.to_json();
        assert!(json.is_ascii() && !json.contains('\u{7f}'), "{json}");
        assert!(json.contains("\\ud83d\\ude00"), "{json}");
        assert_eq!(Input::from_json(&json).unwrap(), input);
    }

    #[test]
    fn bad_inputs_are_refused_naming_the_problem() {
        let err = |s: &str| Input::from_json(s).unwrap_err();
        assert!(err(r#"{"reason":"a\u0000"}"#).contains("NUL"));
        assert!(err(r#"{"reason":"a","data":[["a=b","v"]]}"#).contains("\"a=b\""));
        assert!(err(r#"{"reason":"a","data":[["vm_id","v"]]}"#).contains("encoder"));
        assert!(err(r#"{"reason":"a","data":[["k","1"],["k","2"]]}"#).contains("twice"));
        assert!(err(r#"{"reason":"a","extra":1}"#).contains("unknown field"));
        assert!(err(&format!("\"{}\"", "a".repeat(MAX_INPUT_JSON))).contains("at most"));
    }

    /// A schedule has the classes of its answers; without one, those answers become the
    /// normal answer and the others stay.
    #[test]
    fn a_schedule_has_the_classes_of_its_answers_and_loses_them_one_by_one() {
        let input = Input {
            schedule: vec![Answer::Status(410), Answer::Status(503), Answer::Hang],
            ..Input::default()
        };
        let h = Target::Health;
        assert!(input.has(InputClass::Gone, h) && input.has(InputClass::Hang, h));
        assert!(!input.has(InputClass::RetryAfter, h) && !input.has(InputClass::NonAscii, h));
        // The answers after the one left out are still met.
        assert_eq!(
            input.without(InputClass::Gone, h).schedule,
            vec![Answer::Status(503), Answer::Hang]
        );
        let waits = Input {
            schedule: vec![
                Answer::RetryAfter {
                    status: 503,
                    seconds: 5,
                },
                Answer::Hang,
            ],
            ..Input::default()
        };
        assert_eq!(
            waits.without(InputClass::RetryAfter, h).schedule,
            vec![Answer::Status(503), Answer::Hang]
        );
        let only = Input {
            schedule: vec![Answer::Status(410)],
            ..Input::default()
        };
        assert_eq!(
            only.without(InputClass::Gone, h).schedule,
            vec![Answer::Delay { ms: 0 }]
        );
        // A class of answers is one endpoint's: the others keep theirs, and a schedule left
        // empty meets the normal answer (IMDS is still asked for the VM id).
        let spread = Input {
            schedule: vec![Answer::Status(503)],
            goalstate: vec![Answer::Status(410)],
            imds: vec![Answer::Hang, Answer::Status(410)],
            ..Input::default()
        };
        assert!(spread.has(InputClass::Gone, Target::GoalState));
        assert!(!spread.has(InputClass::Gone, h) && !spread.has(InputClass::Hang, h));
        let plain = spread.without(InputClass::Gone, Target::GoalState);
        assert_eq!(plain.goalstate, vec![Answer::Delay { ms: 0 }]);
        assert_eq!(plain.imds, spread.imds);
        assert_eq!(plain.schedule, spread.schedule);
        assert_eq!(
            spread.without(InputClass::Hang, Target::Imds).imds,
            vec![Answer::Status(410)]
        );
        let text = Input {
            reason: Some("é".into()),
            ..Input::default()
        };
        assert!(!text.has(InputClass::Gone, h));
        assert!(text.has(InputClass::NonAscii, Target::Imds));
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
