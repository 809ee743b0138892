//! The proptest strategies behind generated inputs, weighted towards the encoded format's hard
//! parts (docs/protocol.md §6, §7): the delimiter and both quote characters, `=`, CR/LF and TAB,
//! leading/trailing and lone spaces, empty values, characters beyond Latin-1 and beyond the BMP,
//! control characters XML cannot carry, texts across the 1022/1023/4096-byte limits, many
//! fields. Every alternative lists its plainest form first: proptest shrinks a union towards
//! its first alternative, so a shrunk input keeps only the characters the failure needs.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::input::{Input, RESERVED_KEYS};
use super::property::{Generates, Property};
use super::schedule::{Answer, Target};
use crate::scenario::Protocol;

/// Characters of a short text (shrinks towards `a`).
pub fn character() -> BoxedStrategy<char> {
    prop_oneof![
        8 => prop::char::range('a', 'z'),
        3 => prop::char::range(' ', '~'),
        2 => Just(' '),
        2 => Just('|'),
        2 => Just('\''),
        2 => Just('"'),
        1 => Just('='),
        1 => Just('\r'),
        1 => Just('\n'),
        1 => Just('\t'),
        1 => prop::char::range('\u{a0}', '\u{ff}'),
        2 => prop::char::range('\u{100}', '\u{d7ff}'),
        1 => prop::char::range('\u{10000}', '\u{10ffff}'),
        1 => xml_invalid(),
        1 => beyond_the_plain(),
    ]
    .boxed()
}

/// C1 controls (U+0085 NEL is a line break to Python's `splitlines`), the BMP's private use
/// and specials up to U+FFFD (U+FEFF, the replacement character), and the two noncharacters
/// XML cannot carry (U+FFFE, U+FFFF).
fn beyond_the_plain() -> BoxedStrategy<char> {
    prop_oneof![
        prop::char::range('\u{80}', '\u{9f}'),
        prop::char::range('\u{e000}', '\u{fffd}'),
        Just('\u{fffe}'),
        Just('\u{ffff}'),
    ]
    .boxed()
}

/// The same without white space (no filter: a filtered union cannot shrink past a rejected
/// alternative, so `¡` would never become `a`).
fn visible_character() -> BoxedStrategy<char> {
    prop_oneof![
        8 => prop::char::range('a', 'z'),
        3 => prop::char::range('!', '~'),
        2 => Just('|'),
        2 => Just('\''),
        2 => Just('"'),
        1 => Just('='),
        1 => prop::char::range('\u{a1}', '\u{ff}'),
        2 => prop::char::range('\u{100}', '\u{d7ff}'),
        1 => prop::char::range('\u{10000}', '\u{10ffff}'),
        1 => xml_invalid(),
        1 => beyond_the_plain(),
    ]
    .boxed()
}

/// C0 controls other than TAB, CR and LF, and DEL (NUL cannot be an argument).
fn xml_invalid() -> BoxedStrategy<char> {
    prop_oneof![
        prop::char::range('\u{1}', '\u{8}'),
        Just('\u{b}'),
        Just('\u{c}'),
        prop::char::range('\u{e}', '\u{1f}'),
        Just('\u{7f}'),
    ]
    .boxed()
}

fn short(max: usize) -> BoxedStrategy<String> {
    prop::collection::vec(character(), 0..=max)
        .prop_map(String::from_iter)
        .boxed()
}

/// Byte lengths just below, at and above the limits: a KVP value (1022 bytes), cloud-init's
/// 1023-character KVP cut, the 4096-byte description. The limits apply to the whole encoded
/// report, which adds the agent's own fields (result, agent, vm_id, timestamp,
/// documentation_url: about 150 to 300 bytes, depending on the agent) to the reason and the
/// data: lengths that far below each limit are generated too, so the encoded report itself
/// lands on both sides of it whatever the agent adds.
fn long_target() -> BoxedStrategy<usize> {
    prop_oneof![
        1015usize..=1030,
        700usize..=1030,
        4085usize..=4110,
        3750usize..=4110,
        4096usize..=4700,
    ]
    .boxed()
}

/// A prefix, then one character repeated until the text reaches the target length in bytes
/// (a multi-byte character then straddles the limit).
fn long() -> BoxedStrategy<String> {
    (short(6), character(), long_target())
        .prop_map(|(prefix, unit, target)| {
            let mut text = prefix;
            while text.len() < target {
                text.push(unit);
            }
            text
        })
        .boxed()
}

/// A value: mostly short (possibly empty), sometimes long.
pub fn value() -> BoxedStrategy<String> {
    prop_oneof![6 => short(24), 1 => long()].boxed()
}

/// A text with at least one character that is not white space (a reason or description of
/// only spaces is refused by agents as bad input, which is not what these runs test).
pub fn text() -> BoxedStrategy<String> {
    let short =
        (short(12), visible_character(), short(12)).prop_map(|(a, c, b)| format!("{a}{c}{b}"));
    let long = (visible_long_prefix(), long()).prop_map(|(c, l)| format!("{c}{l}"));
    prop_oneof![6 => short, 1 => long].boxed()
}

fn visible_long_prefix() -> BoxedStrategy<char> {
    prop::char::range('a', 'z').boxed()
}

/// Supporting-data keys: names, never one the encoder writes, never twice.
pub fn data() -> BoxedStrategy<Vec<(String, String)>> {
    let key = proptest::string::string_regex("[a-z_][a-z0-9_]{0,11}").expect("a valid regex");
    prop::collection::vec((key, value()), 0..=8)
        .prop_map(|pairs| {
            let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                if !RESERVED_KEYS.contains(&k.as_str()) && !out.iter().any(|(o, _)| *o == k) {
                    out.push((k, v));
                }
            }
            out
        })
        .boxed()
}

/// One answer of a fault schedule, weighted to the edges agents argue about: the plain
/// retryable statuses first (a shrunk schedule keeps the plainest answer that still fails),
/// then `Retry-After` from 1 s to far past any budget, the throttle reply, a plain 403 and a 410,
/// transport faults, a late answer, a hang that costs a whole request timeout. Answers are the
/// same for every agent: a schedule replays on any of them.
pub fn answer() -> BoxedStrategy<Answer> {
    prop_oneof![
        8 => Just(Answer::Status(503)),
        3 => Just(Answer::Status(500)),
        1 => prop::sample::select(vec![400_u16, 429, 502, 504]).prop_map(Answer::Status),
        3 => (
            prop::sample::select(vec![503_u16, 429]),
            prop::sample::select(vec![1_u32, 2, 5, 30, 600, 3600]),
        )
            .prop_map(|(status, seconds)| Answer::RetryAfter { status, seconds }),
        3 => Just(Answer::Throttled),
        1 => Just(Answer::Status(403)),
        2 => Just(Answer::Status(410)),
        2 => Just(Answer::Reset),
        2 => Just(Answer::Close),
        // Well inside the scenarios' 1 s request timeout: an answer that races the agent's
        // timeout is a hang to it or not by chance (a hang covers the far side).
        1 => (50_u32..=700).prop_map(|ms| Answer::Delay { ms }),
        1 => Just(Answer::Hang),
    ]
    .boxed()
}

/// One answer to a health report on `protocol`'s flow: on the XML flow also a 410 given as the
/// goal state moves on (the report must then echo the new one), drawn as a 410 that moves
/// or not, so that it shrinks to the plain 410 when the move does not matter.
fn report_answer(protocol: Protocol) -> BoxedStrategy<Answer> {
    match protocol {
        Protocol::Json => answer(),
        Protocol::Xml => prop_oneof![
            27 => answer(),
            4 => any::<bool>().prop_map(|moved| if moved {
                Answer::Moved
            } else {
                Answer::Status(410)
            }),
        ]
        .boxed(),
    }
}

/// A fault schedule: mostly a few answers, sometimes a dozen (past the tries of an agent that
/// counts them: the report goes through only after its last planned attempt).
pub fn schedule(protocol: Protocol) -> BoxedStrategy<Vec<Answer>> {
    prop_oneof![
        4 => prop::collection::vec(report_answer(protocol), 1..=5),
        1 => prop::collection::vec(report_answer(protocol), 6..=12),
    ]
    .boxed()
}

/// One answer to a goal state or IMDS request: what its endpoint can answer (a 200 the agent
/// cannot use, a reply cut short; IMDS throttles with 429, not the wireserver's 403 body).
fn fetch_answer(target: Target) -> BoxedStrategy<Answer> {
    let statuses = super::schedule::statuses(target).to_vec();
    let throttled = if target == Target::Imds {
        Just(Answer::Status(429)).boxed()
    } else {
        Just(Answer::Throttled).boxed()
    };
    prop_oneof![
        6 => prop::sample::select(statuses).prop_map(Answer::Status),
        2 => Just(Answer::Unusable),
        1 => throttled,
        1 => Just(Answer::Reset),
        1 => Just(Answer::Close),
        1 => Just(Answer::Partial),
        1 => (50_u32..=700).prop_map(|ms| Answer::Delay { ms }),
        1 => Just(Answer::Hang),
    ]
    .boxed()
}

/// The answers a goal state or IMDS request meets before it is answered normally: as often
/// none (the faults are the health report's) as a few.
fn fetch_schedule(target: Target) -> BoxedStrategy<Vec<Answer>> {
    prop_oneof![
        1 => Just(Vec::new()),
        1 => prop::collection::vec(fetch_answer(target), 1..=4),
    ]
    .boxed()
}

/// Inputs for `property`; `with_data`: the agent is handed supporting data (its failure
/// command uses `{data}`), else none is generated (a failure could otherwise be blamed on a
/// character the agent never saw).
pub fn input(property: Property, with_data: bool) -> BoxedStrategy<Input> {
    if property.generates() == Generates::Schedule {
        let goal_state = match property.protocol() {
            Protocol::Xml => fetch_schedule(Target::GoalState),
            Protocol::Json => Just(Vec::new()).boxed(),
        };
        return (
            schedule(property.protocol()),
            goal_state,
            fetch_schedule(Target::Imds),
        )
            .prop_map(|(schedule, goalstate, imds)| Input {
                schedule,
                goalstate,
                imds,
                ..Input::default()
            })
            .boxed();
    }
    let data = if with_data {
        data()
    } else {
        Just(Vec::new()).boxed()
    };
    if property.is_failure() {
        (text(), data)
            .prop_map(|(reason, data)| Input {
                reason: Some(reason),
                data,
                description: None,
                ..Input::default()
            })
            .boxed()
    } else {
        text()
            .prop_map(|description| Input {
                reason: None,
                data: Vec::new(),
                description: Some(description),
                ..Input::default()
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::InputClass;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    /// The generator reaches each hard part in a few hundred inputs (a weighting that lost
    /// one would silently stop testing it).
    #[test]
    fn every_hard_part_is_generated() {
        let mut runner = TestRunner::deterministic();
        let strategy = input(Property::FailureJson, true);
        let inputs: Vec<Input> = (0..300)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        let any = |f: &dyn Fn(&str) -> bool| inputs.iter().any(|i| i.texts().any(f));
        for class in [
            InputClass::NonLatin1,
            InputClass::NonBmp,
            InputClass::XmlInvalid,
            InputClass::LineBreak,
        ] {
            assert!(
                inputs.iter().any(|i| i.has(class, Target::Health)),
                "{class:?}"
            );
        }
        for c in ['|', '\'', '"', '=', '\t'] {
            assert!(any(&|t| t.contains(c)), "{c:?}");
        }
        assert!(any(&|t| t.starts_with(' ') || t.ends_with(' ')));
        assert!(
            inputs
                .iter()
                .any(|i| i.data.iter().any(|(_, v)| v.is_empty()))
        );
        assert!(inputs.iter().any(|i| i.data.len() >= 5));
        for (lo, hi) in [(1015, 1030), (4085, 4110)] {
            assert!(any(&|t| (lo..=hi + 4).contains(&t.len())), "{lo}..{hi}");
        }
        assert!(inputs.iter().all(|i| i.validate().is_ok()));
        // The encoded report (about 200 bytes of the agent's own fields, plus the reason and
        // `|key=value` per datum) lands near each limit, not only the raw texts.
        let many: Vec<Input> = (0..2000)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        let encoded = |i: &Input| {
            200 + i.reason.as_deref().map_or(0, str::len)
                + i.data
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + 2)
                    .sum::<usize>()
        };
        for limit in [1022usize, 4096] {
            let near = many
                .iter()
                .filter(|i| encoded(i).abs_diff(limit) <= 30)
                .count();
            assert!(
                near >= 3,
                "{near} encoded reports within 30 bytes of {limit}"
            );
        }
        let chars =
            |f: &dyn Fn(char) -> bool| many.iter().any(|i| i.texts().any(|t| t.chars().any(f)));
        assert!(
            chars(&|c| ('\u{80}'..='\u{9f}').contains(&c)),
            "C1 controls"
        );
        assert!(
            chars(&|c| ('\u{e000}'..='\u{fffd}').contains(&c)),
            "U+E000..U+FFFD"
        );
        assert!(
            chars(&|c| c == '\u{fffe}' || c == '\u{ffff}'),
            "noncharacters"
        );
        let no_data = input(Property::FailureXml, false);
        assert!((0..50).all(|_| {
            no_data
                .new_tree(&mut runner)
                .unwrap()
                .current()
                .data
                .is_empty()
        }));
        assert!(
            inputs
                .iter()
                .all(|i| i.reason.as_deref().is_some_and(|r| !r.trim().is_empty()))
        );
    }

    /// Schedules reach every kind of answer, every limitation class of answers, a dozen
    /// answers, and a Retry-After past any budget, in a few hundred draws; all are valid.
    #[test]
    fn every_kind_of_answer_is_generated() {
        let mut runner = TestRunner::deterministic();
        let strategy = input(Property::ScheduleXml, false);
        let inputs: Vec<Input> = (0..300)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        let answers: Vec<&Answer> = inputs.iter().flat_map(|i| &i.schedule).collect();
        for class in [
            InputClass::Gone,
            InputClass::RetryAfter,
            InputClass::BadRequest,
            InputClass::PlainForbidden,
            InputClass::Hang,
            InputClass::Unusable,
            InputClass::Partial,
        ] {
            assert!(
                inputs
                    .iter()
                    .any(|i| Target::ALL.into_iter().any(|t| i.has(class, t))),
                "{class:?}"
            );
        }
        for kind in [
            Answer::Throttled,
            Answer::Reset,
            Answer::Close,
            Answer::Status(503),
        ] {
            assert!(answers.contains(&&kind), "{kind:?}");
        }
        assert!(answers.iter().any(|a| matches!(a, Answer::Delay { .. })));
        assert!(
            answers
                .iter()
                .any(|a| matches!(a, Answer::RetryAfter { seconds, .. } if *seconds >= 3600))
        );
        assert!(inputs.iter().any(|i| i.schedule.len() >= 10));
        assert!(
            inputs
                .iter()
                .all(|i| i.validate().is_ok() && i.fits(Property::ScheduleXml).is_ok())
        );
        // The goal state and IMDS meet their own faults, sometimes none.
        for target in [Target::GoalState, Target::Imds] {
            let fetched: Vec<&Answer> = inputs.iter().flat_map(|i| i.answers(target)).collect();
            for kind in [Answer::Unusable, Answer::Partial, Answer::Hang] {
                assert!(fetched.contains(&&kind), "{target:?} {kind:?}");
            }
            assert!(inputs.iter().any(|i| i.answers(target).is_empty()));
        }
        assert!(
            inputs
                .iter()
                .any(|i| i.goalstate.contains(&Answer::Status(410)))
        );
        assert!(inputs.iter().any(|i| i.imds.contains(&Answer::Status(404))));
        assert!(answers.contains(&&Answer::Moved));
        // The JSON flow has no goal state to fault, nor to move on.
        let json = input(Property::ScheduleJson, false);
        assert!((0..300).all(|_| {
            let i = json.new_tree(&mut runner).unwrap().current();
            i.goalstate.is_empty() && !i.schedule.contains(&Answer::Moved)
        }));
    }
}
