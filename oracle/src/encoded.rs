//! Encoded provisioning reports ("cloud-init format", docs/protocol.md §6).
//!
//! The tokenizer is written out here rather than delegated to the `csv` crate on purpose: §6.5
//! decides each field's quote character from its first byte (two dialects in one grammar),
//! requires a closing quote to be followed by `|` or the end, and distinguishes input that ends
//! inside quotes (truncation). `csv` accepts one quote character, silently accepts text after a
//! closing quote and ends an unterminated field without telling. The tests check this parser
//! against a `csv`-based reference encoder for both dialects.
//!
//! A report can be a whole health body long: tokenizing and every check are linear in it
//! (duplicate keys are found through a set), and a per-field finding is listed at most 16
//! times ([`crate::bounds`]).

use serde::{Deserialize, Serialize};

use super::bounds::Repeats;
use super::finding::{Finding, Severity};
use super::id;

/// The only `documentation_url` either producer writes (§6.2).
pub const DOCUMENTATION_URL: &str = "https://aka.ms/linuxprovisioningerror";

/// Lengths at which producers cut reports (§6.5 step 7): cloud-init health description (chars),
/// cloud-init KVP value (chars); azure-init KVP chunk (bytes).
const KNOWN_CHAR_LIMITS: [usize; 2] = [512, 1023];
const KNOWN_BYTE_LIMIT: usize = 1022;

/// Which producer's CSV rules a report follows (§6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// cloud-init 23.2+: quote `'`, trailing whitespace stripped.
    CloudInit,
    /// azure-init: quote `"`, trailing whitespace kept.
    AzureInit,
}

impl Dialect {
    /// The quote character of this dialect.
    pub fn quote(self) -> char {
        match self {
            Dialect::CloudInit => '\'',
            Dialect::AzureInit => '"',
        }
    }

    /// The dialect named by an `agent=` value (`Cloud-Init/…`, `Azure-Init/…`).
    pub fn from_agent(agent: &str) -> Option<Dialect> {
        if agent.starts_with("Cloud-Init/") {
            Some(Dialect::CloudInit)
        } else if agent.starts_with("Azure-Init/") {
            Some(Dialect::AzureInit)
        } else {
            None
        }
    }

    fn from_quote(quote: char) -> Dialect {
        if quote == '\'' {
            Dialect::CloudInit
        } else {
            Dialect::AzureInit
        }
    }

    /// `cloud-init` / `azure-init`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::CloudInit => "cloud-init",
            Dialect::AzureInit => "azure-init",
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How forgiving the parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Quoting must be exactly what §6.1 produces and the input must be complete.
    Strict,
    /// Recover what can be recovered (truncated input, lost azure-init KVP quotes, quoting
    /// deviations); every deviation becomes a finding.
    Lenient,
}

/// A parsed report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodedReport {
    /// The writer's dialect, from its `agent=` field or its quoting (`None` when neither tells).
    pub dialect: Option<Dialect>,
    /// In order, keys as written.
    pub fields: Vec<(String, String)>,
    /// The input ended inside a quoted field or inside a key (lenient mode only).
    pub truncated: bool,
    /// Order, quoting, timestamp format, missing reason, … (ids start with `report.`).
    pub findings: Vec<Finding>,
}

impl EncodedReport {
    /// The value of the first field named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// True when any finding is an error.
    pub fn has_errors(&self) -> bool {
        super::finding::has_errors(&self.findings)
    }
}

/// Why a report could not be parsed. Offsets are byte offsets into the input; field indexes are
/// 0-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodedError {
    /// Nothing to parse.
    #[error("empty input; expected an encoded report starting with `result=`")]
    Empty,
    #[error(
        "byte {offset} (field index {field}): a field quoted with {quote} must end at `|` or the end of input after its closing quote, found {found:?}"
    )]
    /// Text between a closing quote and the next `|`.
    TextAfterClosingQuote {
        /// Byte offset into the input.
        offset: usize,
        /// 0-based index of the field.
        field: usize,
        /// The quote character.
        quote: char,
        /// The character after the closing quote.
        found: char,
    },
    #[error(
        "byte {offset} (field index {field}): input ends inside the field quoted with {quote} that opens at byte {opened}; expected a closing {quote}"
    )]
    /// A quoted field without its closing quote.
    Unterminated {
        /// Byte offset into the input.
        offset: usize,
        /// 0-based index of the field.
        field: usize,
        /// The quote character.
        quote: char,
        /// Byte offset of the opening quote.
        opened: usize,
    },
    #[error("byte {offset} (field index {field}): field {text:?} has no `=`; expected key=value")]
    /// A field that is not `key=value`.
    MissingEquals {
        /// Byte offset into the input.
        offset: usize,
        /// 0-based index of the field.
        field: usize,
        /// The field as written.
        text: String,
    },
    #[error(
        "byte {offset} (field index {field}): field quoted with {found}, but the {dialect} dialect quotes with {expected} (§6.1)"
    )]
    /// A quote character the dialect does not use.
    WrongQuote {
        /// Byte offset into the input.
        offset: usize,
        /// 0-based index of the field.
        field: usize,
        /// The quote found.
        found: char,
        /// The dialect's quote.
        expected: char,
        /// The dialect the report was judged by.
        dialect: Dialect,
    },
    #[error(
        "byte {offset} (field index {field}): field quoted with {quote} but contains none of `|`, {quote}, CR, LF; {dialect} quotes a field only when it has to (§6.1)"
    )]
    /// A field quoted although nothing in it needs quoting (strict mode).
    NeedlessQuotes {
        /// Byte offset into the input.
        offset: usize,
        /// 0-based index of the field.
        field: usize,
        /// The quote character.
        quote: char,
        /// The dialect the report was judged by.
        dialect: Dialect,
    },
    #[error(
        "byte {offset} (field index {field}): unquoted field contains {what}; {dialect} quotes such a field (§6.1)"
    )]
    /// A field that needs quoting but has none.
    MissingQuotes {
        /// Byte offset into the input.
        offset: usize,
        /// 0-based index of the field.
        field: usize,
        /// What needed the quotes (e.g. `"a CR or LF"`).
        what: &'static str,
        /// The dialect the report was judged by, by name.
        dialect: String,
    },
}

impl EncodedError {
    /// The finding id used when lenient mode downgrades this error.
    fn finding_id(&self) -> &'static str {
        match self {
            EncodedError::Empty => id::report::EMPTY,
            EncodedError::TextAfterClosingQuote { .. } => id::report::SYNTAX_AFTER_CLOSING_QUOTE,
            EncodedError::Unterminated { .. } => id::report::TRUNCATED,
            EncodedError::MissingEquals { .. } => id::report::SYNTAX_MISSING_EQUALS,
            EncodedError::WrongQuote { .. } => id::report::QUOTING_WRONG_QUOTE,
            EncodedError::NeedlessQuotes { .. } => id::report::QUOTING_UNNEEDED,
            EncodedError::MissingQuotes { .. } => id::report::QUOTING_MISSING,
        }
    }
}

/// True when `s` looks like an encoded report (starts with `result=`).
pub fn looks_encoded(s: &str) -> bool {
    s.starts_with("result=")
}

/// Parses one encoded report (§6.5).
///
/// Strict mode fails on anything §6.1 would not produce. Lenient mode fails only when fields
/// cannot be told apart (text after a closing quote, a field without `=` that is not the last);
/// truncation sets `truncated`, and an azure-init KVP value whose first field lost its opening
/// `"` (§7.3) is repaired with a finding.
pub fn parse(input: &str, mode: Mode) -> Result<EncodedReport, EncodedError> {
    parse_declared(input, mode, None)
}

/// [`parse`] for a producer whose dialect is known beforehand (an agent profile declares it).
///
/// A report cut before its `agent=` field and without a quoted field cannot tell its dialect
/// (§6.5 step 5); the declared one is used then, so quoting, order and timestamp are still
/// judged. A report whose own fields name another dialect gets a `report.dialect.declared`
/// error: the producer does not write what was declared for it.
pub fn parse_declared(
    input: &str,
    mode: Mode,
    declared: Option<Dialect>,
) -> Result<EncodedReport, EncodedError> {
    if input.is_empty() {
        return Err(EncodedError::Empty);
    }
    match parse_as_written(input, mode, declared) {
        Ok(report) => Ok(report),
        Err(err) if mode == Mode::Lenient && !input.starts_with(['\'', '"']) => {
            // azure-init trims leading/trailing `"` off its KVP PROVISIONING_REPORT value, so a
            // quoted first field loses its opening quote. Put it back and see if that parses.
            let repaired = format!("\"{input}");
            let first_field_closes = tokenize(&repaired)
                .is_ok_and(|fields| !fields[0].unterminated && fields[0].text.contains('='));
            if !first_field_closes {
                return Err(err);
            }
            match parse_as_written(&repaired, mode, declared) {
                Ok(mut report) if report.dialect == Some(Dialect::AzureInit) => {
                    report.findings.insert(
                        0,
                        Finding::warning(
                            id::report::QUOTE_LOST_OPENING,
                            format!(
                                "the first field lost its opening `\"` (azure-init trims quotes off its KVP value, §7.3); parsed with it restored (offsets below are one byte later than in the input). As written: {err}"
                            ),
                        ),
                    );
                    Ok(report)
                }
                _ => Err(err),
            }
        }
        Err(err) => Err(err),
    }
}

/// One field as tokenized, before splitting at `=`.
struct RawField {
    /// Byte offset of the field's first byte (its opening quote when quoted).
    start: usize,
    quote: Option<char>,
    /// The field's text with quoting removed.
    text: String,
    /// The input ended inside this field's quotes.
    unterminated: bool,
}

/// §6.5 steps 1–3: split into fields; each field's quoting is decided by its first byte.
fn tokenize(input: &str) -> Result<Vec<RawField>, EncodedError> {
    let bytes = input.as_bytes();
    let mut fields = Vec::new();
    let mut pos = 0;
    loop {
        let start = pos;
        let index = fields.len();
        match bytes.get(pos) {
            Some(&q @ (b'\'' | b'"')) => {
                pos += 1;
                let mut text = String::new();
                let mut segment = pos;
                let mut closed = false;
                while pos < bytes.len() {
                    if bytes[pos] == q {
                        // Quote and pipe are ASCII, so every slice boundary is a char boundary.
                        text.push_str(&input[segment..pos]);
                        if bytes.get(pos + 1) == Some(&q) {
                            text.push(q as char);
                            pos += 2;
                            segment = pos;
                        } else {
                            pos += 1;
                            closed = true;
                            break;
                        }
                    } else {
                        pos += 1;
                    }
                }
                if !closed {
                    text.push_str(&input[segment..]);
                }
                fields.push(RawField {
                    start,
                    quote: Some(q as char),
                    text,
                    unterminated: !closed,
                });
                if !closed || pos == bytes.len() {
                    return Ok(fields);
                }
                if bytes[pos] != b'|' {
                    let found = input[pos..].chars().next().unwrap_or('\u{fffd}');
                    return Err(EncodedError::TextAfterClosingQuote {
                        offset: pos,
                        field: index,
                        quote: q as char,
                        found,
                    });
                }
                pos += 1;
            }
            _ => {
                let end = bytes[pos..]
                    .iter()
                    .position(|&b| b == b'|')
                    .map_or(bytes.len(), |p| pos + p);
                fields.push(RawField {
                    start,
                    quote: None,
                    text: input[pos..end].to_string(),
                    unterminated: false,
                });
                if end == bytes.len() {
                    return Ok(fields);
                }
                pos = end + 1;
            }
        }
    }
}

fn parse_as_written(
    input: &str,
    mode: Mode,
    declared: Option<Dialect>,
) -> Result<EncodedReport, EncodedError> {
    let raw = tokenize(input)?;
    let mut findings = Vec::new();
    let mut truncated = false;

    // §6.5 step 4: split at the first `=`.
    let mut fields = Vec::with_capacity(raw.len());
    let mut kept = Vec::with_capacity(raw.len());
    let last = raw.len() - 1;
    for (index, field) in raw.iter().enumerate() {
        if field.unterminated {
            let err = EncodedError::Unterminated {
                offset: input.len(),
                field: index,
                quote: field.quote.unwrap_or('"'),
                opened: field.start,
            };
            match mode {
                Mode::Strict => return Err(err),
                Mode::Lenient => {
                    truncated = true;
                    findings.push(Finding::warning(
                        id::report::TRUNCATED,
                        format!(
                            "{err}: the report was cut at a length limit, or it is an azure-init KVP value whose closing `\"` was trimmed (§7.3); the field is kept as far as it goes"
                        ),
                    ));
                }
            }
        }
        match field.text.split_once('=') {
            Some((key, value)) => {
                fields.push((key.to_string(), value.to_string()));
                kept.push(field);
            }
            None => {
                let err = EncodedError::MissingEquals {
                    offset: field.start,
                    field: index,
                    text: field.text.clone(),
                };
                if mode == Mode::Lenient && index == last {
                    // A cut inside a key (or right after a `|`) leaves a last field without `=`.
                    if !truncated {
                        truncated = true;
                        findings.push(Finding::warning(
                            id::report::TRUNCATED,
                            format!(
                                "{err}: the input ends inside a key, so the report was cut; the fragment is dropped"
                            ),
                        ));
                    }
                } else {
                    return Err(err);
                }
            }
        }
    }

    // §6.5 step 5: dialect from `agent=`, else from the first quoted field.
    let agent = fields.iter().find(|(k, _)| k == "agent").map(|(_, v)| v);
    let own = agent
        .and_then(|a| Dialect::from_agent(a))
        .or_else(|| raw.iter().find_map(|f| f.quote).map(Dialect::from_quote));
    if let (Some(own), Some(declared)) = (own, declared)
        && own != declared
    {
        findings.push(Finding::error(
            id::report::DIALECT_DECLARED,
            format!(
                "the report is in the {own} dialect (quote {:?}), but its producer is declared to write the {declared} dialect (quote {:?}, §6.1)",
                own.quote(),
                declared.quote()
            ),
        ));
    }
    let dialect = own.or(declared);

    let mut repeats = Repeats::default();
    check_quoting(&kept, dialect, mode, &mut findings, &mut repeats)?;
    check_trailing(input, &kept, dialect, &mut findings);
    check_known_limits(input, &mut findings);
    check_structure(&fields, dialect, truncated, &mut findings, &mut repeats);
    repeats.finish(&mut findings, id::report::REPEATED);

    Ok(EncodedReport {
        dialect,
        fields,
        truncated,
        findings,
    })
}

/// §6.5 step 5, strict part: a field is quoted iff §6.1 requires it, with the dialect's quote.
fn check_quoting(
    fields: &[&RawField],
    dialect: Option<Dialect>,
    mode: Mode,
    findings: &mut Vec<Finding>,
    repeats: &mut Repeats,
) -> Result<(), EncodedError> {
    let last_start = fields.last().map(|f| f.start);
    for (index, field) in fields.iter().enumerate() {
        let problem = match (field.quote, dialect) {
            (Some(found), Some(dialect)) if found != dialect.quote() => {
                Some(EncodedError::WrongQuote {
                    offset: field.start,
                    field: index,
                    found,
                    expected: dialect.quote(),
                    dialect,
                })
            }
            (Some(quote), Some(dialect)) => {
                let needs = field.text.contains(['|', '\r', '\n', quote]);
                // A cut field may have lost what made it need quotes.
                (!needs && !field.unterminated).then_some(EncodedError::NeedlessQuotes {
                    offset: field.start,
                    field: index,
                    quote,
                    dialect,
                })
            }
            (Some(_), None) => None, // unreachable: a quoted field decides the dialect
            (None, _) => {
                let mut text = field.text.as_str();
                if Some(field.start) == last_start {
                    // A trailing line terminator is reported by check_trailing.
                    text = text.trim_end_matches(['\r', '\n']);
                }
                let what = if text.contains(['\r', '\n']) {
                    Some("a CR or LF")
                } else {
                    match dialect {
                        Some(Dialect::CloudInit) if text.contains('\'') => Some("a `'`"),
                        Some(Dialect::AzureInit) if text.contains('"') => Some("a `\"`"),
                        _ => None,
                    }
                };
                what.map(|what| EncodedError::MissingQuotes {
                    offset: field.start,
                    field: index,
                    what,
                    dialect: dialect.map_or("either dialect".to_string(), |d| d.to_string()),
                })
            }
        };
        if let Some(err) = problem {
            match mode {
                Mode::Strict => return Err(err),
                Mode::Lenient => repeats.push(findings, err.finding_id(), || {
                    Finding::warning(err.finding_id(), err.to_string())
                }),
            }
        }
    }
    Ok(())
}

/// §6.1 last row: the line terminator is removed; cloud-init also strips trailing whitespace.
fn check_trailing(
    input: &str,
    fields: &[&RawField],
    dialect: Option<Dialect>,
    findings: &mut Vec<Finding>,
) {
    let last_quoted = fields.last().is_some_and(|f| f.quote.is_some());
    if last_quoted {
        return; // the record ends with a quote (or inside one)
    }
    if input.ends_with(['\r', '\n']) {
        findings.push(Finding::warning(
            id::report::TRAILING_NEWLINE,
            format!(
                "the record ends with a line terminator at byte {}; both producers remove it (§6.1)",
                input.trim_end_matches(['\r', '\n']).len()
            ),
        ));
    } else if dialect == Some(Dialect::CloudInit) && input.ends_with(char::is_whitespace) {
        findings.push(Finding::warning(
            id::report::TRAILING_WHITESPACE,
            format!(
                "the record ends with whitespace from byte {}; cloud-init strips trailing whitespace (rstrip, §6.1), so it did not write this",
                input.trim_end().len()
            ),
        ));
    }
}

fn check_known_limits(input: &str, findings: &mut Vec<Finding>) {
    let chars = input.chars().count();
    let limit = if KNOWN_CHAR_LIMITS.contains(&chars) {
        Some(format!("{chars} characters"))
    } else if input.len() == KNOWN_BYTE_LIMIT {
        Some(format!("{KNOWN_BYTE_LIMIT} bytes"))
    } else {
        None
    };
    if let Some(limit) = limit {
        findings.push(Finding::info(
            id::report::LENGTH_AT_KNOWN_LIMIT,
            format!(
                "the report is exactly {limit} long, a known truncation limit (§6.5 step 7: 512 chars health description, 1023 chars cloud-init KVP, 1022-byte azure-init KVP chunks); the last field may be cut"
            ),
        ));
    }
}

/// Where each kind of report puts its fields (§6.2).
struct Layout {
    name: &'static str,
    head: &'static [&'static str],
    tail: &'static [&'static str],
    /// Whether fields other than head and tail may appear (supporting data).
    supporting: bool,
}

const CLOUD_INIT_ERROR: Layout = Layout {
    name: "cloud-init error: result|reason|agent|<supporting>|vm_id|timestamp|documentation_url",
    head: &["result", "reason", "agent"],
    tail: &["vm_id", "timestamp", "documentation_url"],
    supporting: true,
};
const CLOUD_INIT_SUCCESS: Layout = Layout {
    name: "cloud-init success: result|agent|timestamp|vm_id",
    head: &["result", "agent", "timestamp", "vm_id"],
    tail: &[],
    supporting: false,
};
const AZURE_INIT_ERROR: Layout = Layout {
    name: "azure-init error: result|reason|agent|<supporting>|pps_type|vm_id|timestamp|documentation_url",
    head: &["result", "reason", "agent"],
    tail: &["pps_type", "vm_id", "timestamp", "documentation_url"],
    supporting: true,
};
const AZURE_INIT_SUCCESS: Layout = Layout {
    name: "azure-init success: result|agent|pps_type|vm_id|timestamp[|k=v]",
    head: &["result", "agent", "pps_type", "vm_id", "timestamp"],
    tail: &[],
    supporting: true,
};
const UNKNOWN_ERROR: Layout = Layout {
    name: "error (dialect unknown): result|reason|agent|…",
    head: &["result", "reason", "agent"],
    tail: &[],
    supporting: true,
};
const UNKNOWN_SUCCESS: Layout = Layout {
    name: "success (dialect unknown): result|agent|…",
    head: &["result", "agent"],
    tail: &[],
    supporting: true,
};

/// §6.2/§6.5 step 6: order, required fields and their values.
fn check_structure(
    fields: &[(String, String)],
    dialect: Option<Dialect>,
    truncated: bool,
    findings: &mut Vec<Finding>,
    repeats: &mut Repeats,
) {
    let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    // What is missing from a cut report was probably cut off, not left out.
    let missing_severity = if truncated {
        Severity::Warning
    } else {
        Severity::Error
    };
    check_keys(&keys, findings, repeats);

    if dialect.is_none() {
        findings.push(Finding::warning(
            id::report::DIALECT_UNKNOWN,
            "no `agent=Cloud-Init/…` or `agent=Azure-Init/…` field and no quoted field: the dialect cannot be told",
        ));
    }

    let result = field_value(fields, "result");
    let Some(layout) = layout_of(result, dialect, &keys, missing_severity, findings) else {
        return;
    };
    check_layout(
        &keys,
        layout,
        truncated,
        missing_severity,
        findings,
        repeats,
    );

    if result == Some("error") {
        check_error_values(fields, &keys, truncated, findings);
    }
    check_values(fields, &keys, dialect, truncated, findings);
}

/// The value of the first field named `key`.
fn field_value<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Each key an identifier, and given once.
fn check_keys(keys: &[&str], findings: &mut Vec<Finding>, repeats: &mut Repeats) {
    // Each key once into a set: a report of thousands of fields is not compared pairwise.
    let mut seen = std::collections::HashSet::with_capacity(keys.len());
    for (index, key) in keys.iter().enumerate() {
        crate::bounds::step(1);
        if !is_identifier(key) {
            repeats.push(findings, id::report::KEY_INVALID, || {
                Finding::warning(
                    id::report::KEY_INVALID,
                    format!(
                        "field index {index}: key {key:?} is not an identifier ([A-Za-z_][A-Za-z0-9_]*, §6.5)"
                    ),
                )
            });
        }
        if !seen.insert(*key) {
            repeats.push(findings, id::report::DUPLICATE.stem(), || {
                Finding::warning(
                    id::report::DUPLICATE.id(key),
                    format!("field index {index}: key `{key}` appears more than once"),
                )
            });
        }
    }
}

/// The layout `result` and the dialect call for; `None`, with the finding, when `result` is
/// missing or neither `error` nor `success`, and no layout applies.
fn layout_of(
    result: Option<&str>,
    dialect: Option<Dialect>,
    keys: &[&str],
    missing_severity: Severity,
    findings: &mut Vec<Finding>,
) -> Option<&'static Layout> {
    match (result, dialect) {
        (Some("error"), Some(Dialect::CloudInit)) => Some(&CLOUD_INIT_ERROR),
        (Some("error"), Some(Dialect::AzureInit)) => Some(&AZURE_INIT_ERROR),
        (Some("error"), None) => Some(&UNKNOWN_ERROR),
        (Some("success"), Some(Dialect::CloudInit)) => Some(&CLOUD_INIT_SUCCESS),
        (Some("success"), Some(Dialect::AzureInit)) => Some(&AZURE_INIT_SUCCESS),
        (Some("success"), None) => Some(&UNKNOWN_SUCCESS),
        (Some(other), _) => {
            findings.push(Finding::error(
                id::report::RESULT_UNKNOWN,
                format!("`result` is {other:?}; expected `error` or `success` (§6.2)"),
            ));
            if keys.first() != Some(&"result") {
                findings.push(order_finding(
                    "result",
                    keys,
                    0,
                    "every report starts with `result`",
                ));
            }
            None
        }
        (None, _) => {
            findings.push(Finding::new(
                id::report::MISSING.id("result"),
                missing_severity,
                "no `result` field; every report starts with `result=error` or `result=success` (§6.2)",
            ));
            None
        }
    }
}

/// §6.3: the values only an error report has, `reason` and `documentation_url`.
fn check_error_values(
    fields: &[(String, String)],
    keys: &[&str],
    truncated: bool,
    findings: &mut Vec<Finding>,
) {
    match field_value(fields, "reason") {
        Some("") => findings.push(Finding::warning(
            id::report::REASON_EMPTY,
            "`reason` is empty; an error report names its reason (§6.3)",
        )),
        Some(_) => {}
        None => {} // reported as missing by check_layout
    }
    if let Some(url) = field_value(fields, "documentation_url")
        && url != DOCUMENTATION_URL
    {
        let cut = truncated && keys.last() == Some(&"documentation_url");
        if cut && DOCUMENTATION_URL.starts_with(url) {
            // Cut at a limit: a prefix of the right value is all one can ask for.
        } else {
            findings.push(Finding::warning(
                id::report::DOCUMENTATION_URL_VALUE,
                format!("`documentation_url` is {url:?}; expected {DOCUMENTATION_URL:?} (§6.2)"),
            ));
        }
    }
}

/// §6.2: the values of `agent`, `pps_type`, `vm_id` and `timestamp`.
fn check_values(
    fields: &[(String, String)],
    keys: &[&str],
    dialect: Option<Dialect>,
    truncated: bool,
    findings: &mut Vec<Finding>,
) {
    let value = |key: &str| field_value(fields, key);
    if let Some(agent) = value("agent")
        && Dialect::from_agent(agent).is_none()
    {
        findings.push(Finding::warning(
            id::report::AGENT_UNKNOWN,
            format!(
                "`agent` is {agent:?}; expected `Cloud-Init/<version>` or `Azure-Init/<version>` (§6.2)"
            ),
        ));
    }
    if dialect == Some(Dialect::AzureInit)
        && let Some(pps) = value("pps_type")
        && pps != "None"
    {
        findings.push(Finding::info(
            id::report::PPS_TYPE_VALUE,
            format!("`pps_type` is {pps:?}; azure-init always writes `None` today (§6.2)"),
        ));
    }
    match value("vm_id") {
        Some("") => findings.push(Finding::warning(
            id::report::VM_ID_EMPTY,
            "`vm_id` is empty; expected the VM id",
        )),
        Some("None") => findings.push(Finding::warning(
            id::report::VM_ID_NONE,
            "`vm_id` is `None`: the agent did not know the VM id (cloud-init 25.2+ prints a missing id as None, §6.2)",
        )),
        Some(v) if v.starts_with("failed to read vm id") => findings.push(Finding::warning(
            id::report::VM_ID_UNREADABLE,
            format!("`vm_id` is {v:?}: the agent could not read the VM id (§6.2)"),
        )),
        _ => {}
    }
    if let Some(ts) = value("timestamp") {
        let cut = truncated && keys.last() == Some(&"timestamp");
        check_timestamp(ts, dialect, value("agent"), cut, findings);
    }
}

fn check_layout(
    keys: &[&str],
    layout: &Layout,
    truncated: bool,
    missing_severity: Severity,
    findings: &mut Vec<Finding>,
    repeats: &mut Repeats,
) {
    // A missing head field is reported once, not again as a shift of everything after it.
    let mut expected: usize = 0;
    for &key in layout.head {
        let at = keys.iter().position(|k| *k == key);
        if at.is_some() {
            expected += 1;
        }
        let expected = expected.saturating_sub(1);
        match at {
            None => findings.push(missing_finding(key, layout, missing_severity)),
            Some(at) if at != expected => {
                findings.push(order_finding(key, keys, expected, layout.name))
            }
            Some(_) => {}
        }
    }

    // Tail positions count from the end; in a cut report, from wherever the tail starts.
    let present: Vec<(usize, usize)> = layout
        .tail
        .iter()
        .enumerate()
        .filter_map(|(j, key)| keys.iter().rposition(|k| k == key).map(|at| (j, at)))
        .collect();
    let base = if truncated {
        present.first().map(|&(j, at)| at.saturating_sub(j))
    } else {
        keys.len().checked_sub(layout.tail.len())
    };
    for (j, &key) in layout.tail.iter().enumerate() {
        match present.iter().find(|&&(pj, _)| pj == j) {
            None => findings.push(missing_finding(key, layout, missing_severity)),
            Some(&(_, at)) if Some(at) != base.map(|b| b + j) => findings.push(order_finding(
                key,
                keys,
                base.map_or(j, |b| b + j),
                layout.name,
            )),
            Some(_) => {}
        }
    }

    if !layout.supporting {
        for (index, key) in keys.iter().enumerate() {
            if !layout.head.contains(key) && !layout.tail.contains(key) {
                repeats.push(findings, id::report::UNEXPECTED.stem(), || {
                    Finding::warning(
                        id::report::UNEXPECTED.id(key),
                        format!(
                            "field index {index}: `{key}` has no place in a {}; no other fields (§6.2)",
                            layout.name
                        ),
                    )
                });
            }
        }
    }
}

fn missing_finding(key: &str, layout: &Layout, severity: Severity) -> Finding {
    Finding::new(
        id::report::MISSING.id(key),
        severity,
        format!("no `{key}` field; expected one per §6.2 ({})", layout.name),
    )
}

fn order_finding(key: &str, keys: &[&str], expected: usize, layout: &str) -> Finding {
    let at = keys.iter().position(|k| *k == key).unwrap_or_default();
    Finding::warning(
        id::report::ORDER.id(key),
        format!("`{key}` is at field index {at}; expected index {expected} per §6.2 ({layout})"),
    )
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The shape of a timestamp: `YYYY-MM-DDTHH:MM:SS[.fraction][offset]`.
struct Timestamp<'a> {
    fraction_digits: usize,
    /// `""` (naive), `"Z"` or `"+HH:MM"`/`"-HH:MM"`.
    offset: &'a str,
}

fn parse_timestamp(ts: &str) -> Option<Timestamp<'_>> {
    let b = ts.as_bytes();
    if !ts.is_ascii() || b.len() < 19 {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        let s = &ts[range];
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let date = chrono::NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
    let time = chrono::NaiveTime::from_hms_opt(num(11..13)?, num(14..16)?, num(17..19)?)?;
    let _ = date.and_time(time);
    let mut rest = &ts[19..];
    let mut fraction_digits = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        fraction_digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if fraction_digits == 0 {
            return None;
        }
        rest = &fraction[fraction_digits..];
    }
    let offset_ok = match rest.as_bytes() {
        [] | [b'Z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
                && rest[1..3].parse::<u8>().is_ok_and(|h| h < 24)
                && rest[4..6].parse::<u8>().is_ok_and(|m| m < 60)
        }
        _ => false,
    };
    offset_ok.then_some(Timestamp {
        fraction_digits,
        offset: rest,
    })
}

/// `Cloud-Init/23.3.3-0ubuntu0~20.04.1` → (23, 3).
fn cloud_init_version(agent: &str) -> Option<(u32, u32)> {
    let version = agent.strip_prefix("Cloud-Init/")?;
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// §6.2 timestamp formats: cloud-init 23.2–24.3 naive, 24.4+ `+00:00` (Python isoformat:
/// no fraction or 6 digits); azure-init RFC 3339 `+00:00`, never `Z`, 0/3/6/9 digits.
fn check_timestamp(
    ts: &str,
    dialect: Option<Dialect>,
    agent: Option<&str>,
    cut: bool,
    findings: &mut Vec<Finding>,
) {
    let Some(parsed) = parse_timestamp(ts) else {
        findings.push(Finding::new(
            id::report::TIMESTAMP_INVALID,
            if cut { Severity::Info } else { Severity::Error },
            format!(
                "`timestamp` is {ts:?}; expected YYYY-MM-DDTHH:MM:SS[.fraction][+00:00] (§6.2){}",
                if cut {
                    " (the report is cut, this may be why)"
                } else {
                    ""
                }
            ),
        ));
        return;
    };
    let mut complain = |id: &str, message: String| {
        findings.push(Finding::warning(
            id,
            format!("`timestamp` is {ts:?}: {message} (§6.2)"),
        ));
    };
    if parsed.offset == "Z" {
        complain(
            id::report::TIMESTAMP_ZULU,
            "ends in `Z`; neither producer writes `Z` (cloud-init 24.4+ and azure-init write `+00:00`)".into(),
        );
        return;
    }
    if !matches!(parsed.offset, "" | "+00:00") {
        complain(
            id::report::TIMESTAMP_OFFSET,
            format!("offset {} is not UTC; expected `+00:00`", parsed.offset),
        );
        return;
    }
    match dialect {
        Some(Dialect::CloudInit) => {
            if !matches!(parsed.fraction_digits, 0 | 6) {
                complain(
                    id::report::TIMESTAMP_FORMAT,
                    format!(
                        "{} fractional digits; cloud-init (Python isoformat) writes 6, or none when the microseconds are 0",
                        parsed.fraction_digits
                    ),
                );
            }
            match agent.and_then(cloud_init_version) {
                Some(version) if version >= (24, 4) && parsed.offset.is_empty() => complain(
                    id::report::TIMESTAMP_FORMAT,
                    format!(
                        "no UTC offset, but cloud-init {}.{} (24.4+) writes `+00:00`",
                        version.0, version.1
                    ),
                ),
                Some(version) if version < (24, 4) && !parsed.offset.is_empty() => complain(
                    id::report::TIMESTAMP_FORMAT,
                    format!(
                        "has an offset, but cloud-init {}.{} (before 24.4) writes a naive timestamp",
                        version.0, version.1
                    ),
                ),
                _ => {}
            }
        }
        Some(Dialect::AzureInit) => {
            if parsed.offset.is_empty() {
                complain(
                    id::report::TIMESTAMP_FORMAT,
                    "no UTC offset; azure-init writes RFC 3339 with `+00:00`".into(),
                );
            }
            if !matches!(parsed.fraction_digits, 0 | 3 | 6 | 9) {
                complain(
                    id::report::TIMESTAMP_FORMAT,
                    format!(
                        "{} fractional digits; azure-init writes 0, 3, 6 or 9",
                        parsed.fraction_digits
                    ),
                );
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(report: &EncodedReport) -> Vec<(&str, &str)> {
        report
            .fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    fn ids(report: &EncodedReport) -> Vec<&str> {
        report.findings.iter().map(|f| f.id.as_str()).collect()
    }

    const CI_ERROR: &str = "result=error|'reason=foo''bar'|agent=Cloud-Init/26.2|'x=a|b'|vm_id=vm-1|timestamp=2026-11-29T14:30:57.000662+00:00|documentation_url=https://aka.ms/linuxprovisioningerror";
    const CI_SUCCESS: &str = "result=success|agent=Cloud-Init/26.2|timestamp=2026-11-29T14:30:57.018005+00:00|vm_id=vm-1";
    const AI_SUCCESS: &str = "result=success|agent=Azure-Init/0.0.0|pps_type=None|vm_id=00000000-0000-0000-0000-000000000abc|timestamp=2026-06-17T00:00:00+00:00";

    /// Issue 23 (with "quadratic XML parsing"): a description of thousands of distinct keys
    /// compared each key with every key before it; the fake parses descriptions of every
    /// health POST. Four times the fields now cost about four times the steps.
    #[test]
    fn quadratic_report_parsing_distinct_keys_cost_linear_work() {
        let report = |n: usize| {
            let mut s = String::from("result=error|agent=Cloud-Init/26.2");
            for i in 0..n {
                s.push_str(&format!("|k{i}=|k{i}="));
            }
            s
        };
        let steps = |input: &str| {
            crate::bounds::take_steps();
            let parsed = parse(input, Mode::Lenient).unwrap();
            (crate::bounds::take_steps(), parsed)
        };
        let (small, _) = steps(&report(1_000));
        let (large, parsed) = steps(&report(4_000));
        assert!(
            large <= 5 * small.max(1),
            "4x the fields cost {large} steps against {small}: not linear"
        );
        // 4000 duplicated keys: sixteen listed, the rest counted.
        let duplicates = parsed
            .findings
            .iter()
            .filter(|f| id::report::DUPLICATE.key(&f.id).is_some())
            .count();
        assert_eq!(duplicates, crate::bounds::MAX_FINDINGS_OF_A_KIND);
        let summary = parsed
            .findings
            .iter()
            .find(|f| f.id == id::report::REPEATED)
            .expect("a summary finding");
        assert!(
            summary.message.starts_with("3984 more"),
            "{}",
            summary.message
        );
    }

    #[test]
    fn protocol_examples_parse_strictly_without_findings() {
        for input in [CI_ERROR, CI_SUCCESS, AI_SUCCESS] {
            let report = parse(input, Mode::Strict).unwrap();
            assert!(report.findings.is_empty(), "{input}: {:?}", report.findings);
            assert!(!report.truncated);
        }
        let report = parse(CI_ERROR, Mode::Strict).unwrap();
        assert_eq!(report.dialect, Some(Dialect::CloudInit));
        assert_eq!(report.get("reason"), Some("foo'bar"));
        assert_eq!(report.get("x"), Some("a|b"));
        assert_eq!(
            parse(AI_SUCCESS, Mode::Strict).unwrap().dialect,
            Some(Dialect::AzureInit)
        );
    }

    #[test]
    fn tricky_single_fields() {
        let ci = "result=error|reason=r|agent=Cloud-Init/26.2|'exception=UrlError(''HTTPConnectionPool(host=\\''127.0.0.1\\'', port=9)\"))'')'|stdout=say \"hi\"|'stderr=line1\nline2'|vm_id=v|timestamp=2026-11-29T14:30:57+00:00|documentation_url=https://aka.ms/linuxprovisioningerror";
        let report = parse(ci, Mode::Strict).unwrap();
        assert_eq!(
            report.get("exception"),
            Some("UrlError('HTTPConnectionPool(host=\\'127.0.0.1\\', port=9)\"))')")
        );
        assert_eq!(report.get("stdout"), Some("say \"hi\""));
        assert_eq!(report.get("stderr"), Some("line1\nline2"));
        assert!(report.findings.is_empty(), "{:?}", report.findings);

        let ai = "result=error|reason=r|agent=Azure-Init/0.1.1|\"error=a|b\"|\"q=he said \"\"hi\"\"\"|e2=can't open|pps_type=None|vm_id=v|timestamp=2026-06-17T00:00:00.123+00:00|documentation_url=https://aka.ms/linuxprovisioningerror";
        let report = parse(ai, Mode::Strict).unwrap();
        assert_eq!(report.get("error"), Some("a|b"));
        assert_eq!(report.get("q"), Some("he said \"hi\""));
        assert_eq!(report.get("e2"), Some("can't open"));
        assert!(report.findings.is_empty(), "{:?}", report.findings);
    }

    #[test]
    fn dialect_from_first_quoted_field_without_agent() {
        let report = parse("result=error|\"reason=a|b\"", Mode::Lenient).unwrap();
        assert_eq!(report.dialect, Some(Dialect::AzureInit));
        let report = parse("result=error|reason=x", Mode::Lenient).unwrap();
        assert_eq!(report.dialect, None);
        assert!(ids(&report).contains(&"report.dialect.unknown"));
    }

    #[test]
    fn trailing_pipe_yields_empty_final_field_and_field_splits_at_first_equals() {
        // Strict: the empty final field has no `=`.
        let err = parse("result=success|a=b=c|", Mode::Strict).unwrap_err();
        assert_eq!(
            err,
            EncodedError::MissingEquals {
                offset: 21,
                field: 2,
                text: String::new()
            }
        );
        let report = parse("result=success|a=b=c|", Mode::Lenient).unwrap();
        assert_eq!(fields(&report)[1], ("a", "b=c"));
        assert!(report.truncated);
    }

    #[test]
    fn errors_name_offset_field_and_expectation() {
        let err = parse(
            "result=error|'reason=x'y|agent=Cloud-Init/26.2",
            Mode::Lenient,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "byte 23 (field index 1): a field quoted with ' must end at `|` or the end of input after its closing quote, found 'y'"
        );
        let err = parse("result=error|noequals|agent=Cloud-Init/26.2", Mode::Lenient).unwrap_err();
        assert_eq!(
            err.to_string(),
            "byte 13 (field index 1): field \"noequals\" has no `=`; expected key=value"
        );
        assert_eq!(parse("", Mode::Lenient).unwrap_err(), EncodedError::Empty);
    }

    #[test]
    fn unterminated_quote_is_error_in_strict_and_truncation_in_lenient() {
        let input = "result=error|reason=r|agent=Cloud-Init/26.2|'exception=cut | here";
        let err = parse(input, Mode::Strict).unwrap_err();
        assert_eq!(
            err,
            EncodedError::Unterminated {
                offset: input.len(),
                field: 3,
                quote: '\'',
                opened: 44
            }
        );
        let report = parse(input, Mode::Lenient).unwrap();
        assert!(report.truncated);
        assert_eq!(report.get("exception"), Some("cut | here"));
        assert!(ids(&report).contains(&"report.truncated"));
        // Missing tail fields of a cut report are warnings, not errors.
        assert!(!report.has_errors(), "{:?}", report.findings);
        assert!(ids(&report).contains(&"report.missing.documentation_url"));
    }

    #[test]
    fn cut_inside_a_key_drops_the_fragment() {
        let input = "result=error|reason=r|agent=Cloud-Init/26.2|vm_id=v|timestamp=2026-11-29T14:30:57+00:00|documentation_u";
        let report = parse(input, Mode::Lenient).unwrap();
        assert!(report.truncated);
        assert_eq!(report.fields.len(), 5);
        assert!(!report.has_errors(), "{:?}", report.findings);
        assert!(parse(input, Mode::Strict).is_err());
    }

    #[test]
    fn strict_quoting_rule() {
        // cloud-init quoting a field that needs no quotes.
        let err = parse("result=success|'agent=Cloud-Init/26.2'", Mode::Strict).unwrap_err();
        assert!(
            matches!(
                err,
                EncodedError::NeedlessQuotes {
                    field: 1,
                    offset: 15,
                    ..
                }
            ),
            "{err}"
        );
        // azure-init field containing `"` left unquoted.
        let err = parse(
            "result=error|reason=say \"hi\"|agent=Azure-Init/0.1.1",
            Mode::Strict,
        )
        .unwrap_err();
        assert!(
            matches!(err, EncodedError::MissingQuotes { field: 1, .. }),
            "{err}"
        );
        // Wrong quote for the dialect.
        let err = parse(
            "result=error|'reason=a|b'|agent=Azure-Init/0.1.1",
            Mode::Strict,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                EncodedError::WrongQuote {
                    found: '\'',
                    expected: '"',
                    ..
                }
            ),
            "{err}"
        );
        // Lenient: the same deviations are findings.
        let report = parse(
            "result=error|'reason=a|b'|agent=Azure-Init/0.1.1",
            Mode::Lenient,
        )
        .unwrap();
        assert!(ids(&report).contains(&"report.quoting.wrong-quote"));
        // An unquoted LF is wrong in any dialect.
        let err = parse("result=error|reason=a\nb", Mode::Strict).unwrap_err();
        assert!(
            matches!(
                err,
                EncodedError::MissingQuotes {
                    what: "a CR or LF",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn order_findings_for_each_layout() {
        // cloud-init success with vm_id before timestamp (that is the error layout's habit).
        let report = parse(
            "result=success|agent=Cloud-Init/26.2|vm_id=v|timestamp=2026-11-29T14:30:57+00:00",
            Mode::Strict,
        )
        .unwrap();
        assert_eq!(
            ids(&report),
            ["report.order.timestamp", "report.order.vm_id"]
        );
        // azure-init error without pps_type and the reason after agent.
        let report = parse(
            "result=error|agent=Azure-Init/0.1.1|reason=r|vm_id=v|timestamp=2026-06-17T00:00:00+00:00|documentation_url=https://aka.ms/linuxprovisioningerror",
            Mode::Strict,
        )
        .unwrap();
        assert_eq!(
            ids(&report),
            [
                "report.order.reason",
                "report.order.agent",
                "report.missing.pps_type"
            ]
        );
        let missing = &report.findings[2];
        assert_eq!(missing.severity, Severity::Error);
        // An error without reason.
        let report = parse(
            "result=error|agent=Cloud-Init/26.2|vm_id=v|timestamp=2026-11-29T14:30:57+00:00|documentation_url=https://aka.ms/linuxprovisioningerror",
            Mode::Strict,
        )
        .unwrap();
        assert!(ids(&report).contains(&"report.missing.reason"));
        assert!(report.has_errors());
        // cloud-init success carries no supporting data.
        let report = parse(
            "result=success|agent=Cloud-Init/26.2|timestamp=2026-11-29T14:30:57+00:00|vm_id=v|extra=1",
            Mode::Strict,
        )
        .unwrap();
        assert_eq!(ids(&report), ["report.unexpected.extra"]);
        // azure-init success may carry extra data after the timestamp.
        let report = parse(&format!("{AI_SUCCESS}|extra=1"), Mode::Strict).unwrap();
        assert!(report.findings.is_empty(), "{:?}", report.findings);
    }

    #[test]
    fn documentation_url_and_result_values() {
        let report = parse(
            "result=error|reason=r|agent=Cloud-Init/26.2|vm_id=v|timestamp=2026-11-29T14:30:57+00:00|documentation_url=http://aka.ms/x",
            Mode::Strict,
        )
        .unwrap();
        assert_eq!(ids(&report), ["report.documentation_url.value"]);
        let report = parse("result=maybe|agent=Cloud-Init/26.2", Mode::Strict).unwrap();
        assert_eq!(ids(&report), ["report.result.unknown"]);
    }

    #[test]
    fn timestamp_rules_per_dialect_and_version() {
        let ci = |version: &str, ts: &str| {
            let input = format!("result=success|agent=Cloud-Init/{version}|timestamp={ts}|vm_id=v");
            let report = parse(&input, Mode::Strict).unwrap();
            report
                .findings
                .iter()
                .map(|f| (f.id.clone(), f.severity))
                .collect::<Vec<_>>()
        };
        assert!(ci("24.4", "2026-11-29T14:30:57.000662+00:00").is_empty());
        assert!(ci("23.3.3-0ubuntu0~20.04.1", "2024-03-12T09:39:16.373226").is_empty());
        assert_eq!(
            ci("24.4", "2026-11-29T14:30:57.000662"),
            [("report.timestamp.format".to_string(), Severity::Warning)]
        );
        assert_eq!(
            ci("23.3", "2026-11-29T14:30:57+00:00"),
            [("report.timestamp.format".to_string(), Severity::Warning)]
        );
        assert_eq!(
            ci("24.3", "2026-11-29T14:30:57.123Z"),
            [("report.timestamp.zulu".to_string(), Severity::Warning)]
        );
        assert_eq!(
            ci("26.2", "2026-13-29T14:30:57+00:00"),
            [("report.timestamp.invalid".to_string(), Severity::Error)]
        );
        assert_eq!(
            ci("26.2", "yesterday"),
            [("report.timestamp.invalid".to_string(), Severity::Error)]
        );

        let ai = |ts: &str| {
            let input = format!(
                "result=success|agent=Azure-Init/0.1.1|pps_type=None|vm_id=v|timestamp={ts}"
            );
            parse(&input, Mode::Strict)
                .unwrap()
                .findings
                .into_iter()
                .map(|f| f.id)
                .collect::<Vec<_>>()
        };
        assert!(ai("2026-11-29T14:41:10.902560076+00:00").is_empty());
        assert!(ai("2026-11-29T14:41:10+00:00").is_empty());
        assert_eq!(
            ai("2026-11-29T14:41:10.902560076Z"),
            ["report.timestamp.zulu"]
        );
        assert_eq!(
            ai("2026-11-29T14:41:10.90256+00:00"),
            ["report.timestamp.format"]
        );
        assert_eq!(ai("2026-11-29T14:41:10"), ["report.timestamp.format"]);
        assert_eq!(ai("2026-11-29T14:41:10+02:00"), ["report.timestamp.offset"]);
    }

    #[test]
    fn trailing_whitespace_rules() {
        let report = parse(&format!("{CI_SUCCESS} "), Mode::Strict).unwrap();
        assert_eq!(ids(&report), ["report.trailing-whitespace"]);
        // azure-init keeps trailing whitespace: nothing to say.
        let report = parse(&format!("{AI_SUCCESS}|extra=x "), Mode::Strict).unwrap();
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        for base in [CI_SUCCESS, AI_SUCCESS] {
            let report = parse(&format!("{base}\r\n"), Mode::Strict).unwrap();
            assert!(
                ids(&report).contains(&"report.trailing-newline"),
                "{:?}",
                report.findings
            );
        }
    }

    #[test]
    fn azure_init_kvp_lost_quotes_are_tolerated_in_lenient_mode() {
        // First field quoted, outer `"` trimmed off both ends by azure-init's KVP writer.
        let original = "\"note=a|b\"|result=success|agent=Azure-Init/0.1.1|pps_type=None|vm_id=v|timestamp=2026-06-17T00:00:00+00:00|\"k=x|y\"";
        let trimmed = original.trim_matches('"');
        assert!(parse(trimmed, Mode::Strict).is_err());
        let report = parse(trimmed, Mode::Lenient).unwrap();
        assert_eq!(report.get("note"), Some("a|b"));
        assert_eq!(report.get("k"), Some("x|y"));
        assert!(report.truncated, "the lost closing quote looks like a cut");
        assert!(ids(&report).contains(&"report.quote.lost-opening"));
    }

    #[test]
    fn known_length_limit_is_noted() {
        let mut input = format!("{CI_SUCCESS}|");
        input.truncate(100);
        let padded = format!("result=error|reason={}", "x".repeat(512 - 20));
        assert_eq!(padded.chars().count(), 512);
        let report = parse(&padded, Mode::Lenient).unwrap();
        assert!(ids(&report).contains(&"report.length.at-known-limit"));
    }

    #[test]
    fn looks_encoded_wants_result_prefix() {
        assert!(looks_encoded("result=error|reason=x"));
        assert!(!looks_encoded(" result=error"));
        assert!(!looks_encoded(
            "The VM encountered an error during deployment."
        ));
    }

    #[test]
    fn dialect_serde_names() {
        assert_eq!(
            serde_json::to_string(&Dialect::CloudInit).unwrap(),
            "\"cloud-init\""
        );
        assert_eq!(
            serde_json::to_string(&Dialect::AzureInit).unwrap(),
            "\"azure-init\""
        );
    }

    #[test]
    fn a_declared_dialect_judges_a_report_cut_before_its_agent() {
        // Cut inside the reason (cloud-init's 512-character trim): no agent, no quoted field.
        let cut = "result=error|reason=disk error: 0123456789";
        let guessed = parse(cut, Mode::Lenient).unwrap();
        assert_eq!(guessed.dialect, None);
        assert!(ids(&guessed).contains(&"report.dialect.unknown"));
        let declared = parse_declared(cut, Mode::Lenient, Some(Dialect::CloudInit)).unwrap();
        assert_eq!(declared.dialect, Some(Dialect::CloudInit));
        assert!(!ids(&declared).contains(&"report.dialect.unknown"));
        // The declared dialect's quoting rules apply: a raw `'` needs quotes in cloud-init's.
        let quote = "result=error|reason=can't";
        assert!(parse(quote, Mode::Strict).is_ok());
        assert!(matches!(
            parse_declared(quote, Mode::Strict, Some(Dialect::CloudInit)),
            Err(EncodedError::MissingQuotes { .. })
        ));
    }

    #[test]
    fn a_report_in_another_dialect_than_declared_is_an_error() {
        let report = parse_declared(CI_ERROR, Mode::Strict, Some(Dialect::AzureInit)).unwrap();
        assert_eq!(report.dialect, Some(Dialect::CloudInit));
        let f = report
            .findings
            .iter()
            .find(|f| f.id == "report.dialect.declared")
            .unwrap();
        assert_eq!(f.severity, Severity::Error);
        let same = parse_declared(CI_ERROR, Mode::Strict, Some(Dialect::CloudInit)).unwrap();
        assert_eq!(same, parse(CI_ERROR, Mode::Strict).unwrap());
    }
}
