//! Command templates: argv arrays with `{placeholder}`s, and optional groups.
//!
//! A template is a list of arguments. An argument is either a word (`"--wireserver"`,
//! `"{wireserver_url}"`, `"url={imds_url}/x"`) or a *group*: an array of words that is
//! dropped as a whole when one of its placeholders has no value in this case (`["--vm-id",
//! "{vm_id}"]` disappears when the agent must read the VM id from IMDS). `{data}` expands to
//! one argument per `KEY=VALUE` item: as a whole word it becomes N words; inside a group the
//! group is repeated once per item (`["--data", "{data}"]` → `--data a=1 --data b=2`;
//! `["--data={data}"]` → `--data=a=1 --data=b=2`).
//! `{{` and `}}` are literal braces. On a command line (`--agent-cmd`) a group is written in
//! unquoted square brackets: `[--data {data}]`.

use std::collections::BTreeMap;
use std::fmt;

/// Everything a template can refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placeholder {
    WireserverUrl,
    ImdsUrl,
    ProxyUrl,
    KvpPool,
    VmId,
    Reason,
    Description,
    Data,
    Protocol,
    Budget,
    RequestTimeout,
    RetryInterval,
    BinDir,
    CaseDir,
    Action,
}

impl Placeholder {
    pub const ALL: [Placeholder; 15] = [
        Placeholder::WireserverUrl,
        Placeholder::ImdsUrl,
        Placeholder::ProxyUrl,
        Placeholder::KvpPool,
        Placeholder::VmId,
        Placeholder::Reason,
        Placeholder::Description,
        Placeholder::Data,
        Placeholder::Protocol,
        Placeholder::Budget,
        Placeholder::RequestTimeout,
        Placeholder::RetryInterval,
        Placeholder::BinDir,
        Placeholder::CaseDir,
        Placeholder::Action,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Placeholder::WireserverUrl => "wireserver_url",
            Placeholder::ImdsUrl => "imds_url",
            Placeholder::ProxyUrl => "proxy_url",
            Placeholder::KvpPool => "kvp_pool",
            Placeholder::VmId => "vm_id",
            Placeholder::Reason => "reason",
            Placeholder::Description => "description",
            Placeholder::Data => "data",
            Placeholder::Protocol => "protocol",
            Placeholder::Budget => "budget",
            Placeholder::RequestTimeout => "request_timeout",
            Placeholder::RetryInterval => "retry_interval",
            Placeholder::BinDir => "bin_dir",
            Placeholder::CaseDir => "case_dir",
            Placeholder::Action => "action",
        }
    }

    pub fn from_name(name: &str) -> Option<Placeholder> {
        Placeholder::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Names for error messages: `{wireserver_url}, {imds_url}, ...`.
    pub fn all_names() -> String {
        Placeholder::ALL
            .iter()
            .map(|p| format!("{{{}}}", p.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Var(Placeholder),
}

/// One argv word with its placeholders located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    source: String,
    segments: Vec<Segment>,
}

/// A problem in one template word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unknown placeholder {{{name}}} in {word:?}; known: {known}", known = Placeholder::all_names())]
    UnknownPlaceholder { word: String, name: String },
    #[error("unclosed `{{` in {0:?} (write `{{{{` for a literal brace)")]
    Unclosed(String),
    #[error("stray `}}` in {0:?} (write `}}}}` for a literal brace)")]
    StrayClose(String),
    #[error(
        "outside a group {{data}} must be a whole argument (it expands to one argument per KEY=VALUE), not part of {0:?}; use a group like [\"--data={{data}}\"]"
    )]
    DataInsideWord(String),
    #[error("a group may hold {{data}} at most once: {0:?}")]
    DataTwiceInGroup(Vec<String>),
    #[error("an empty group [] expands to nothing; remove it")]
    EmptyGroup,
    #[error("the template is empty; the first argument must be the program")]
    Empty,
    #[error("the first argument (the program) must be a plain word, not a group")]
    ProgramIsGroup,
    #[error("unterminated quote in {0:?}")]
    UnterminatedQuote(String),
    #[error(
        "a `[` group is not closed in {0:?} (an optional group is written `[--flag {{placeholder}}]`; quote a literal bracket: '[')"
    )]
    UnclosedGroup(String),
    #[error("a `[` group inside another in {0:?}: groups do not nest")]
    NestedGroup(String),
}

impl Word {
    pub fn parse(source: &str) -> Result<Word, TemplateError> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut chars = source.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().is_some_and(|(_, n)| *n == '{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().is_some_and(|(_, n)| *n == '}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let rest = &source[i + 1..];
                    let end = rest
                        .find('}')
                        .ok_or_else(|| TemplateError::Unclosed(source.to_owned()))?;
                    let name = &rest[..end];
                    let var = Placeholder::from_name(name).ok_or_else(|| {
                        TemplateError::UnknownPlaceholder {
                            word: source.to_owned(),
                            name: name.to_owned(),
                        }
                    })?;
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    segments.push(Segment::Var(var));
                    // Skip the name and the closing brace.
                    for _ in 0..name.chars().count() + 1 {
                        chars.next();
                    }
                }
                '}' => return Err(TemplateError::StrayClose(source.to_owned())),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Ok(Word {
            source: source.to_owned(),
            segments,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn placeholders(&self) -> impl Iterator<Item = Placeholder> + '_ {
        self.segments.iter().filter_map(|s| match s {
            Segment::Var(p) => Some(*p),
            Segment::Literal(_) => None,
        })
    }

    pub fn uses(&self, p: Placeholder) -> bool {
        self.placeholders().any(|q| q == p)
    }

    fn is_data(&self) -> bool {
        self.segments == [Segment::Var(Placeholder::Data)]
    }

    /// The word with its values filled in; `None` if a placeholder has no value.
    fn render(&self, values: &Values, data_item: Option<&str>) -> Option<String> {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(s) => out.push_str(s),
                Segment::Var(Placeholder::Data) => out.push_str(data_item?),
                Segment::Var(p) => out.push_str(values.get(*p)?),
            }
        }
        Some(out)
    }
}

/// One template argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Word(Word),
    /// Dropped as a whole when a placeholder in it has no value; repeated per `{data}` item.
    Group(Vec<Word>),
}

/// A parsed command template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub args: Vec<Arg>,
}

/// The raw form in a profile: `"word"` or `["group", "{of}", "words"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawArg {
    Word(String),
    Group(Vec<String>),
}

impl<'de> serde::Deserialize<'de> for RawArg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawArg, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawArg;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string (one argument) or an array of strings (an optional group)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawArg, E> {
                Ok(RawArg::Word(v.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawArg, A::Error> {
                let mut words = Vec::new();
                while let Some(w) = seq.next_element::<String>()? {
                    words.push(w);
                }
                Ok(RawArg::Group(words))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Template {
    pub fn parse(raw: &[RawArg]) -> Result<Template, TemplateError> {
        let mut args = Vec::with_capacity(raw.len());
        for arg in raw {
            args.push(match arg {
                RawArg::Word(w) => {
                    let word = Word::parse(w)?;
                    // Outside a group, {data} stands for N arguments, so it must be alone.
                    if word.uses(Placeholder::Data) && !word.is_data() {
                        return Err(TemplateError::DataInsideWord(w.clone()));
                    }
                    Arg::Word(word)
                }
                RawArg::Group(ws) => {
                    if ws.is_empty() {
                        return Err(TemplateError::EmptyGroup);
                    }
                    let words = ws
                        .iter()
                        .map(|w| Word::parse(w))
                        .collect::<Result<Vec<_>, _>>()?;
                    if words.iter().filter(|w| w.uses(Placeholder::Data)).count() > 1 {
                        return Err(TemplateError::DataTwiceInGroup(ws.clone()));
                    }
                    Arg::Group(words)
                }
            });
        }
        match args.first() {
            None => return Err(TemplateError::Empty),
            Some(Arg::Group(_)) => return Err(TemplateError::ProgramIsGroup),
            Some(Arg::Word(_)) => {}
        }
        Ok(Template { args })
    }

    /// Splits a shell-like command line (`--agent-cmd`): words separated by whitespace,
    /// `'single'` and `"double"` quotes, backslash escapes outside single quotes; words in
    /// unquoted square brackets are an optional group, as a profile's arrays are
    /// (`[--data {data}]`: `--data` before each item, nothing when there is none).
    pub fn parse_command_line(line: &str) -> Result<Template, TemplateError> {
        Template::parse(&split_command_line(line)?)
    }

    /// The program word (first argument).
    pub fn program(&self) -> &Word {
        match &self.args[0] {
            Arg::Word(w) => w,
            Arg::Group(_) => unreachable!("checked by Template::parse"),
        }
    }

    /// Plain words (outside groups) that use `p`: such a word fails to expand when `p` has no
    /// value, so profiles put those in groups.
    pub fn plain_uses(&self, p: Placeholder) -> Vec<&str> {
        self.args
            .iter()
            .filter_map(|a| match a {
                Arg::Word(w) if w.uses(p) => Some(w.source()),
                _ => None,
            })
            .collect()
    }

    pub fn placeholders(&self) -> Vec<Placeholder> {
        let mut all: Vec<Placeholder> = self
            .args
            .iter()
            .flat_map(|a| match a {
                Arg::Word(w) => w.placeholders().collect::<Vec<_>>(),
                Arg::Group(ws) => ws.iter().flat_map(|w| w.placeholders()).collect(),
            })
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Fills in the values. `unset` decides what a plain word with a value-less placeholder
    /// becomes.
    pub fn expand(&self, values: &Values, unset: UnsetPolicy) -> Result<Vec<String>, ExpandError> {
        let mut argv = Vec::new();
        for arg in &self.args {
            match arg {
                Arg::Word(w) if w.is_data() => argv.extend(values.data.iter().cloned()),
                Arg::Word(w) => match w.render(values, None) {
                    Some(s) => argv.push(s),
                    None => match unset {
                        UnsetPolicy::Error => {
                            let missing = w
                                .placeholders()
                                .find(|p| values.get(*p).is_none())
                                .map_or("?", |p| p.name());
                            return Err(ExpandError {
                                word: w.source().to_owned(),
                                placeholder: missing.to_owned(),
                            });
                        }
                        UnsetPolicy::Empty => argv.push(w.render_lenient(values)),
                    },
                },
                Arg::Group(words) => {
                    let has_data = words.iter().any(|w| w.uses(Placeholder::Data));
                    let items: Vec<Option<&str>> = if has_data {
                        values.data.iter().map(|d| Some(d.as_str())).collect()
                    } else {
                        vec![None]
                    };
                    for item in items {
                        let rendered: Option<Vec<String>> =
                            words.iter().map(|w| w.render(values, item)).collect();
                        if let Some(group) = rendered {
                            argv.extend(group);
                        }
                    }
                }
            }
        }
        Ok(argv)
    }
}

impl Word {
    fn render_lenient(&self, values: &Values) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => l.clone(),
                Segment::Var(p) => values.get(*p).unwrap_or("").to_owned(),
            })
            .collect()
    }
}

/// What a plain word whose placeholder has no value becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsetPolicy {
    /// An error (profiles: such words belong in groups, checked when the profile loads).
    Error,
    /// The placeholder expands to "" (ad-hoc `--agent-cmd` templates).
    Empty,
}

/// A plain word referred to a placeholder that has no value in this case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "argument {word:?} needs {{{placeholder}}}, which has no value in this case; put it in an optional group like [\"--flag\", {word:?}]"
)]
pub struct ExpandError {
    pub word: String,
    pub placeholder: String,
}

/// Placeholder values for one agent invocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    scalars: BTreeMap<Placeholder, String>,
    /// `{data}` items, `KEY=VALUE` each.
    pub data: Vec<String>,
}

impl Values {
    pub fn set(&mut self, p: Placeholder, value: impl Into<String>) -> &mut Self {
        debug_assert!(p != Placeholder::Data, "use Values::data");
        self.scalars.insert(p, value.into());
        self
    }

    pub fn set_opt(&mut self, p: Placeholder, value: Option<impl Into<String>>) -> &mut Self {
        match value {
            Some(v) => self.set(p, v),
            None => {
                self.scalars.remove(&p);
                self
            }
        }
    }

    pub fn get(&self, p: Placeholder) -> Option<&str> {
        self.scalars.get(&p).map(String::as_str)
    }

    /// Renders a single string (an `[env]` value) with the same rules as a plain word; `None`
    /// when a placeholder in it has no value.
    pub fn render(&self, word: &Word) -> Option<String> {
        if word.is_data() {
            return Some(self.data.join("\n"));
        }
        word.render(self, None)
    }
}

/// A word of a command line, and whether an unquoted `[` opened a group before it or an
/// unquoted `]` closed one after it (the brackets are not part of the word).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    word: String,
    opens: bool,
    closes: bool,
}

/// Splits a command line into shell words (see [`Template::parse_command_line`]) and groups:
/// `[--data {data}]` is one group of two words, `[ --vm-id {vm_id} ]` too; quoted or escaped
/// brackets (`'['`, `\[`) are literal, as is a `]` that closes no group.
pub(crate) fn split_command_line(line: &str) -> Result<Vec<RawArg>, TemplateError> {
    let mut args = Vec::new();
    let mut group: Option<Vec<String>> = None;
    for token in tokens(line)? {
        if token.opens {
            if group.is_some() {
                return Err(TemplateError::NestedGroup(line.to_owned()));
            }
            group = Some(Vec::new());
        }
        let empty = token.word.is_empty() && (token.opens || token.closes);
        match &mut group {
            Some(words) if !empty => words.push(token.word),
            Some(_) => {}
            None if token.closes => args.push(RawArg::Word(format!("{}]", token.word))),
            None => args.push(RawArg::Word(token.word)),
        }
        if token.closes
            && let Some(words) = group.take()
        {
            args.push(RawArg::Group(words));
        }
    }
    if group.is_some() {
        return Err(TemplateError::UnclosedGroup(line.to_owned()));
    }
    Ok(args)
}

/// The words of a command line, with the brackets of groups marked.
fn tokens(line: &str) -> Result<Vec<Token>, TemplateError> {
    let mut tokens = Vec::new();
    let mut current = Token {
        word: String::new(),
        opens: false,
        closes: false,
    };
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let unterminated = || TemplateError::UnterminatedQuote(line.to_owned());
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    tokens.push(std::mem::replace(
                        &mut current,
                        Token {
                            word: String::new(),
                            opens: false,
                            closes: false,
                        },
                    ));
                    in_word = false;
                }
            }
            '[' if !in_word => {
                in_word = true;
                current.opens = true;
            }
            ']' if chars.peek().is_none_or(|n| n.is_whitespace()) => {
                in_word = true;
                current.closes = true;
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => current.word.push(c),
                        None => return Err(unterminated()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => current.word.push(c),
                            Some(c) => {
                                current.word.push('\\');
                                current.word.push(c);
                            }
                            None => return Err(unterminated()),
                        },
                        Some(c) => current.word.push(c),
                        None => return Err(unterminated()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    current.word.push(c);
                }
            }
            c => {
                in_word = true;
                current.word.push(c);
            }
        }
    }
    if in_word {
        tokens.push(current);
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(words: &[&str]) -> Vec<RawArg> {
        words
            .iter()
            .map(|w| RawArg::Word((*w).to_owned()))
            .collect()
    }

    fn values() -> Values {
        let mut v = Values::default();
        v.set(Placeholder::WireserverUrl, "http://127.0.0.1:1")
            .set(Placeholder::Reason, "disk full");
        v
    }

    #[test]
    fn words_expand_placeholders_and_literal_braces() {
        let t =
            Template::parse(&raw(&["agent", "--url={wireserver_url}/x", "{{literal}}"])).unwrap();
        let argv = t.expand(&values(), UnsetPolicy::Error).unwrap();
        assert_eq!(argv, ["agent", "--url=http://127.0.0.1:1/x", "{literal}"]);
    }

    #[test]
    fn groups_drop_when_a_value_is_missing_and_repeat_per_data_item() {
        let mut raw = raw(&["agent", "{data}"]);
        raw.push(RawArg::Group(vec!["--vm-id".into(), "{vm_id}".into()]));
        raw.push(RawArg::Group(vec!["--data".into(), "{data}".into()]));
        raw.push(RawArg::Group(vec!["--reason".into(), "{reason}".into()]));
        raw.push(RawArg::Group(vec!["-d={data}".into()]));
        let t = Template::parse(&raw).unwrap();
        let mut v = values();
        v.data = vec!["a=1".into(), "b=x y".into()];
        let argv = t.expand(&v, UnsetPolicy::Error).unwrap();
        assert_eq!(
            argv,
            [
                "agent",
                "a=1",
                "b=x y",
                "--data",
                "a=1",
                "--data",
                "b=x y",
                "--reason",
                "disk full",
                "-d=a=1",
                "-d=b=x y"
            ]
        );
        v.data.clear();
        assert_eq!(
            t.expand(&v, UnsetPolicy::Error).unwrap(),
            ["agent", "--reason", "disk full"]
        );
    }

    #[test]
    fn plain_word_without_value_is_an_error_or_empty() {
        let t = Template::parse(&raw(&["agent", "--vm-id", "{vm_id}"])).unwrap();
        let err = t.expand(&values(), UnsetPolicy::Error).unwrap_err();
        assert_eq!(err.placeholder, "vm_id");
        assert_eq!(
            t.expand(&values(), UnsetPolicy::Empty).unwrap(),
            ["agent", "--vm-id", ""]
        );
        assert_eq!(t.plain_uses(Placeholder::VmId), ["{vm_id}"]);
    }

    #[test]
    fn bad_templates_are_rejected_with_the_word() {
        let e = Template::parse(&raw(&["a", "{wireserver}"])).unwrap_err();
        assert!(
            e.to_string().contains("unknown placeholder {wireserver}"),
            "{e}"
        );
        assert!(matches!(
            Template::parse(&raw(&["a", "x{data}"])),
            Err(TemplateError::DataInsideWord(_))
        ));
        assert!(matches!(
            Template::parse(&raw(&["a", "{vm_id"])),
            Err(TemplateError::Unclosed(_))
        ));
        assert!(matches!(
            Template::parse(&raw(&["a", "b}"])),
            Err(TemplateError::StrayClose(_))
        ));
        assert!(matches!(Template::parse(&[]), Err(TemplateError::Empty)));
        assert!(matches!(
            Template::parse(&[RawArg::Group(vec!["a".into()])]),
            Err(TemplateError::ProgramIsGroup)
        ));
    }

    #[test]
    fn command_lines_split_like_a_shell() {
        let t = Template::parse_command_line(
            r#"python3 'my agent.py' {action} --reason="{reason}" a\ b "q\"x""#,
        )
        .unwrap();
        let mut v = values();
        v.set(Placeholder::Action, "failure");
        assert_eq!(
            t.expand(&v, UnsetPolicy::Empty).unwrap(),
            [
                "python3",
                "my agent.py",
                "failure",
                "--reason=disk full",
                "a b",
                "q\"x"
            ]
        );
        assert!(Template::parse_command_line("a 'b").is_err());
    }

    #[test]
    fn command_lines_write_optional_groups_in_brackets() {
        let t = Template::parse_command_line(
            "agent {action} [--data {data}] [ --vm-id {vm_id} ] [--reason={reason}] '[' \\[x] a[0] b]",
        )
        .unwrap();
        let mut v = values();
        v.set(Placeholder::Action, "failure");
        v.data = vec!["a=1".into(), "b=2".into()];
        assert_eq!(
            t.expand(&v, UnsetPolicy::Empty).unwrap(),
            [
                "agent",
                "failure",
                "--data",
                "a=1",
                "--data",
                "b=2",
                "--reason=disk full",
                "[",
                "[x]",
                "a[0]",
                "b]"
            ]
        );
        // No data, no VM id, no reason: the groups are gone, no flag is left dangling.
        let mut v = Values::default();
        v.set(Placeholder::Action, "ready");
        assert_eq!(
            t.expand(&v, UnsetPolicy::Empty).unwrap(),
            ["agent", "ready", "[", "[x]", "a[0]", "b]"]
        );
        for (bad, expected) in [
            ("a [--data {data}", "is not closed"),
            ("a [--x [y]]", "groups do not nest"),
            ("a []", "empty group"),
        ] {
            let e = Template::parse_command_line(bad).unwrap_err().to_string();
            assert!(e.contains(expected), "{bad}: {e}");
        }
    }
}
