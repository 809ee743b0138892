//! The proptest strategies behind generated inputs, weighted towards the encoded format's hard
//! parts (docs/protocol.md §6, §7): the delimiter and both quote characters, `=`, CR/LF and TAB,
//! leading/trailing and lone spaces, empty values, characters beyond Latin-1 and beyond the BMP,
//! control characters XML cannot carry, texts across the 1022/1023/4096-byte limits, many
//! fields. Every alternative lists its plainest form first: proptest shrinks a union towards
//! its first alternative, so a shrunk input keeps only the characters the failure needs.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::input::{Input, RESERVED_KEYS};
use super::property::Property;

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

/// Inputs for `property`; `with_data`: the agent is handed supporting data (its failure
/// command uses `{data}`), else none is generated (a failure could otherwise be blamed on a
/// character the agent never saw).
pub fn input(property: Property, with_data: bool) -> BoxedStrategy<Input> {
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
            })
            .boxed()
    } else {
        text()
            .prop_map(|description| Input {
                reason: None,
                data: Vec::new(),
                description: Some(description),
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
            assert!(inputs.iter().any(|i| i.has(class)), "{class:?}");
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
}
