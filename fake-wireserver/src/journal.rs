//! The journal: one [`Entry`] per request the fake received, with what it answered.
//!
//! Field names are a public interface (the admin API returns a JSON array of entries,
//! `--journal FILE` writes JSON Lines, the conformance runner reads both). The in-memory window
//! is bounded (oldest entries are dropped first); the JSON Lines file keeps everything.
//!
//! The names in an entry are typed ([`Listener`], [`EndpointId`], [`AnswerKind`], and the
//! oracle's [`HealthState`](crate::oracle::HealthState) / [`SubStatus`](crate::oracle::SubStatus)
//! in its report) and serialize as the strings the journal always had:
//!
//! ```
//! use fake_wireserver::{AnswerKind, EndpointId, Entry, Listener};
//!
//! let line = r#"{"seq":1,"at_ms":0,"done_ms":1,"listener":"imds","client":"127.0.0.1:1","method":"GET","target":"/metadata/versions","http_version":"HTTP/1.1","headers":[],"body":"","body_b64":null,"body_len":0,"body_truncated":false,"endpoint":"imds.versions","answer":{"kind":"close","status":null,"step":null},"report":null,"findings":[]}"#;
//! let entry = Entry::from_json(line)?;
//! assert_eq!(entry.listener, Listener::Imds);
//! assert_eq!(entry.endpoint, EndpointId::ImdsVersions);
//! assert!(entry.answer.kind == AnswerKind::Close && entry.answer.kind.is_transport_fault());
//! assert_eq!(serde_json::to_string(&entry)?, line);
//!
//! // A name the journal never writes is an error naming the field.
//! let err = Entry::from_json(&line.replace(r#""kind":"close""#, r#""kind":"closed""#)).unwrap_err();
//! assert_eq!(err.field, "answer.kind");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::endpoint::EndpointId;
use crate::journal_file::{JournalFile, JournalFileError};
use crate::oracle::{Finding, HealthReport};

/// `as_str` of each value of an array, in order: the names serde and its error messages use,
/// so a name is spelled once (in `as_str`).
macro_rules! names_of {
    ($all:expr, $n:expr) => {{
        let mut out = [""; $n];
        let mut i = 0;
        while i < $n {
            out[i] = $all[i].as_str();
            i += 1;
        }
        out
    }};
}

/// Bodies longer than this are cut in the journal (`body_truncated = true`); `body_len` keeps
/// the received length.
pub const BODY_KEEP_BYTES: usize = 64 * 1024;

/// Default number of entries kept in memory.
pub const DEFAULT_CAPACITY: usize = 10_000;

/// Default bound on the bytes the in-memory window retains (see [`Entry::retained_bytes`]).
/// With 64 KiB bodies (plus base64) a count bound alone would allow over 1 GiB.
pub const DEFAULT_MAX_BYTES: usize = 32 * 1024 * 1024;

/// Fixed per-entry cost counted on top of the variable-length fields (struct, small strings).
const ENTRY_OVERHEAD_BYTES: usize = 256;

/// The state of the in-memory journal window ([`crate::Fake::journal_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalStats {
    /// Entries in the window now.
    pub entries: usize,
    /// Sum of [`Entry::retained_bytes`] over the window.
    pub retained_bytes: usize,
    /// The entry-count bound (`--journal-capacity`).
    pub capacity: usize,
    /// The byte bound (`--journal-max-bytes`); the newest entry is kept even when it alone is
    /// larger.
    pub max_bytes: usize,
    /// Entries dropped from the window (oldest first) since the fake started; the JSON Lines
    /// file still has them. A reset is not an eviction.
    pub evicted: u64,
    /// Entries the `--journal` file misses because a write to it failed (a full disk); 0
    /// without a file. [`crate::Fake::journal_file_error`] says why.
    #[serde(default)]
    pub file_lost: u64,
}

/// One request the fake received and what it did about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// 1-based, per fake instance; never reused (not even after a reset).
    pub seq: u64,
    /// Milliseconds since the fake started (monotonic clock), when the request head arrived.
    pub at_ms: u64,
    /// `at_ms` is the kernel's receive time of the read that completed the head
    /// (`SO_TIMESTAMPNS`): no delay of the fake's own in reading it is in it. Absent (false): the fake's time of
    /// reading them, late by however long its task waited.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub received_by_kernel: bool,
    /// When the answer finished (or the fault was applied); `None` while pending and for `hang`.
    pub done_ms: Option<u64>,
    /// The listener that accepted the connection (`"wireserver"`, `"imds"`, `"hostplugin"`,
    /// `"proxy"` in JSON).
    pub listener: Listener,
    /// Peer address, e.g. `"127.0.0.1:50123"`.
    pub client: String,
    /// Request method as received.
    pub method: String,
    /// Request target exactly as received (origin-form or absolute-form).
    pub target: String,
    /// `"HTTP/1.1"` or `"HTTP/1.0"`.
    pub http_version: String,
    /// Received order and capitalisation.
    pub headers: Vec<(String, String)>,
    /// UTF-8 (lossy), at most [`BODY_KEEP_BYTES`] kept.
    pub body: String,
    /// Base64 of the kept bytes when the body is not valid UTF-8.
    pub body_b64: Option<String>,
    /// The whole body's length in bytes (also what was not kept).
    pub body_len: usize,
    /// True when `body` holds less than `body_len` bytes.
    pub body_truncated: bool,
    /// Endpoint id (docs/fake-wireserver.md, "Endpoint ids"; the id string in JSON).
    pub endpoint: EndpointId,
    /// What the fake answered.
    pub answer: Answer,
    /// Health POSTs only: the oracle's parse of the report.
    pub report: Option<HealthReport>,
    /// Request-level findings (headers, path spelling, unknown path, malformed HTTP, ...).
    pub findings: Vec<Finding>,
    /// `hang` only: when the client closed the connection, i.e. gave up waiting (absent while
    /// it is open, and when the fake stopped first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_closed_ms: Option<u64>,
}

/// What the fake did with a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// What kind of answer: a scripted step's kind, the rate limiter's `throttled`, or
    /// `default` (the default documents).
    pub kind: AnswerKind,
    /// The status line sent, if any (`None` for hang/reset/close/malformed).
    pub status: Option<u16>,
    /// The scripted step that answered; `None` = default behaviour (or the rate limiter).
    pub step: Option<StepRef>,
}

/// The listener that accepted a connection: one per service the fake impersonates, plus the
/// proxy (absolute-form targets for either service). Serialized as [`Listener::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Listener {
    /// The wireserver listener (`168.63.129.16:80` in the sandbox).
    Wireserver,
    /// The IMDS listener (`169.254.169.254:80` in the sandbox).
    Imds,
    /// The HostGAPlugin listener (port 32526).
    HostPlugin,
    /// Proxy mode: one listener for both services, routed by target host.
    Proxy,
}

impl Listener {
    /// Every listener.
    pub const ALL: [Listener; 4] = [
        Listener::Wireserver,
        Listener::Imds,
        Listener::HostPlugin,
        Listener::Proxy,
    ];
    const NAMES: [&'static str; 4] = names_of!(Listener::ALL, 4);

    /// The name as the journal spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Listener::Wireserver => "wireserver",
            Listener::Imds => "imds",
            Listener::HostPlugin => "hostplugin",
            Listener::Proxy => "proxy",
        }
    }
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Declares the answer kinds from one row each: the step kinds (what a scenario's `kind` takes,
/// in the order its errors list them) and the two answers no step gives. [`AnswerKind`],
/// [`StepKind`], their lists and spellings are generated from the rows, so a kind is named in
/// one place.
macro_rules! answer_kinds {
    (
        steps { $($(#[doc = $sdoc:literal])* $step:ident = $sname:literal => $sdelivery:expr,)+ }
        others { $($(#[doc = $odoc:literal])* $other:ident = $oname:literal => $odelivery:expr,)+ }
    ) => {
        /// What kind of answer the fake gave: the kind of the scripted step that answered (the
        /// same names a scenario's `kind` takes), `throttled` (a rate limit: the `[rate_limit]`'s
        /// 403 or IMDS's own 429) or `default`.
        /// Serialized as [`AnswerKind::as_str`] (`"respond"`, `"hang"`, ...).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AnswerKind {
            $($(#[doc = $sdoc])* $step,)+
            $($(#[doc = $odoc])* $other,)+
        }

        /// A scenario step's `kind`: the step kinds of [`AnswerKind`], as their own type so
        /// `throttled` and `default` cannot be a step.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum StepKind {
            $($(#[doc = $sdoc])* $step,)+
        }

        impl AnswerKind {
            /// The kinds a scenario step may have (`[[endpoint.step]] kind`), in the order
            /// scenario errors list them.
            pub const STEP_KINDS: [AnswerKind; [$($sname),+].len()] = [$(AnswerKind::$step),+];

            /// Every kind.
            pub const ALL: [AnswerKind; [$($sname,)+ $($oname),+].len()] =
                [$(AnswerKind::$step,)+ $(AnswerKind::$other),+];

            /// The name as the journal and scenario files spell it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(AnswerKind::$step => $sname,)+
                    $(AnswerKind::$other => $oname,)+
                }
            }

            /// A kind a scenario step may have (not `throttled` or `default`).
            pub const fn is_step(self) -> bool {
                !matches!(self, $(AnswerKind::$other)|+)
            }

            /// How an answer of this kind reaches the client; every class of a kind derives
            /// from it.
            pub const fn delivery(self) -> Delivery {
                match self {
                    $(AnswerKind::$step => $sdelivery,)+
                    $(AnswerKind::$other => $odelivery,)+
                }
            }
        }

        impl StepKind {
            /// Every step kind, in the order of [`AnswerKind::STEP_KINDS`].
            pub const ALL: [StepKind; [$($sname),+].len()] = [$(StepKind::$step),+];

            /// The answer kind a step of this kind journals as.
            pub const fn answer_kind(self) -> AnswerKind {
                match self {
                    $(StepKind::$step => AnswerKind::$step,)+
                }
            }
        }
    };
}

answer_kinds! {
    steps {
        /// A scripted status/headers/body (`kind = "respond"`).
        Respond = "respond" => Delivery::AtOnce,
        /// Waited, then answered (`kind = "delay"`).
        Delay = "delay" => Delivery::AfterWait,
        /// Read the request and never answered.
        Hang = "hang" => Delivery::Never,
        /// TCP RST.
        Reset = "reset" => Delivery::Broken("connection reset"),
        /// Closed without a byte.
        Close = "close" => Delivery::Broken("connection closed without a reply"),
        /// Raw bytes, then closed.
        Malformed = "malformed" => Delivery::Broken("malformed HTTP reply"),
        /// The body cut short, then closed.
        Partial = "partial" => Delivery::Broken("reply cut short"),
        /// The body dribbled.
        Slow = "slow" => Delivery::OverTime,
    }
    others {
        /// A rate limit refused it (not a step kind): the `[rate_limit]`'s 403, or IMDS's own
        /// per-VM limit's 429 (docs/protocol.md §1.2); the entry's status tells which.
        Throttled = "throttled" => Delivery::AtOnce,
        /// The default answer (not a step kind).
        Default = "default" => Delivery::AtOnce,
    }
}

/// How an answer reaches the client: the one fact about an [`AnswerKind`] its row states.
/// The fake's classes of a kind ([`AnswerKind::is_fault`], [`AnswerKind::acts_on_arrival`],
/// ...) and the conformance model's reading of one (what a step costs an agent, whether it can
/// outlast a timeout, what failure the agent saw) all derive from it, so a new kind is
/// classified where it is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// A whole reply as soon as the request was read.
    AtOnce,
    /// A whole reply after a scripted wait, which the client's timeout may end first.
    AfterWait,
    /// The reply written over time, which the client's timeout may end first.
    OverTime,
    /// No answer ever: the client's timeout (or its giving up) ends the request.
    Never,
    /// At once, but no usable reply: the transport failure the client sees.
    Broken(&'static str),
}

impl Delivery {
    /// Holds the client waiting (a wait, a dribble, or no answer), so the request may take up
    /// to the client's timeout.
    pub const fn holds_client(self) -> bool {
        matches!(
            self,
            Delivery::AfterWait | Delivery::OverTime | Delivery::Never
        )
    }
}

impl AnswerKind {
    const NAMES: [&'static str; AnswerKind::ALL.len()] =
        names_of!(AnswerKind::ALL, AnswerKind::ALL.len());

    /// A transport fault: no complete answer in the normal way (never answered, cut, raw
    /// bytes, or dribbled).
    pub const fn is_transport_fault(self) -> bool {
        matches!(
            self.delivery(),
            Delivery::Never | Delivery::Broken(_) | Delivery::OverTime
        )
    }

    /// A fault whatever the status: a transport fault or the rate limiter.
    pub const fn is_fault(self) -> bool {
        self.is_transport_fault() || matches!(self, AnswerKind::Throttled)
    }

    /// Answered at once with a complete status line and body (`respond`, `default`,
    /// `throttled`): no fault of timing or transport.
    pub const fn is_immediate_reply(self) -> bool {
        matches!(self.delivery(), Delivery::AtOnce)
    }

    /// Done as soon as the fake had read the request, nothing scripted waiting first (as a kind
    /// that holds the client does: [`Delivery::holds_client`]), and on the wire by `done_ms`:
    /// the agent had it between the request's arrival and `done_ms` (a reset's entry is made
    /// final once its connection is dropped, which sends the RST).
    pub const fn acts_on_arrival(self) -> bool {
        matches!(self.delivery(), Delivery::AtOnce | Delivery::Broken(_))
    }
}

impl StepKind {
    const NAMES: [&'static str; StepKind::ALL.len()] =
        names_of!(StepKind::ALL, StepKind::ALL.len());

    /// The name as scenario files spell it.
    pub const fn as_str(self) -> &'static str {
        self.answer_kind().as_str()
    }
}

impl<'de> Deserialize<'de> for StepKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_name(deserializer, "StepKind", &StepKind::ALL, &StepKind::NAMES)
    }
}

impl std::str::FromStr for AnswerKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AnswerKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownName::new("an answer kind", s, &AnswerKind::NAMES))
    }
}

impl std::str::FromStr for Listener {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Listener::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownName::new("a listener", s, &Listener::NAMES))
    }
}

/// A string that names no value of a closed vocabulary ([`AnswerKind`], [`Listener`]); the
/// message lists the valid names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{:?} is not {what}; expected one of {}", crate::text::clip(.name, 64), .expected.join(", "))]
pub struct UnknownName {
    /// What was being named (`"an answer kind"`, `"a listener"`).
    pub what: &'static str,
    /// The string as given.
    pub name: String,
    /// The valid names.
    pub expected: &'static [&'static str],
}

impl UnknownName {
    fn new(what: &'static str, name: &str, expected: &'static [&'static str]) -> Self {
        UnknownName {
            what,
            name: name.to_owned(),
            expected,
        }
    }
}

impl std::fmt::Display for AnswerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Listener {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Listener {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_name(deserializer, "Listener", &Listener::ALL, &Listener::NAMES)
    }
}

impl Serialize for AnswerKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AnswerKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_name(
            deserializer,
            "AnswerKind",
            &AnswerKind::ALL,
            &AnswerKind::NAMES,
        )
    }
}

/// Deserializes one of a closed set of names as a unit enum variant would be, with serde's
/// own errors (`unknown variant `x`, expected one of ...`; TOML's `wanted string or table`
/// for a number), so the messages are those a derived enum gives.
pub(crate) fn deserialize_name<'de, D, T>(
    deserializer: D,
    enum_name: &'static str,
    all: &'static [T],
    names: &'static [&'static str],
) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Copy + 'static,
{
    use serde::de::{self, VariantAccess};

    struct NameVisitor<T: 'static> {
        enum_name: &'static str,
        all: &'static [T],
        names: &'static [&'static str],
    }

    impl<'de, T: Copy + 'static> de::Visitor<'de> for NameVisitor<T> {
        type Value = T;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "enum {}", self.enum_name)
        }

        fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
            let (name, variant): (String, _) = data.variant()?;
            let Some(i) = self.names.iter().position(|n| *n == name) else {
                return Err(de::Error::unknown_variant(&name, self.names));
            };
            variant.unit_variant()?;
            Ok(self.all[i])
        }
    }

    deserializer.deserialize_enum(
        enum_name,
        names,
        NameVisitor {
            enum_name,
            all,
            names,
        },
    )
}

/// A journal line that is not an [`Entry`]: the field (dotted path, `answer.kind`) and what
/// is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct EntryError {
    /// The field's path from the entry (`answer.kind`; `.` when the line itself is not JSON).
    pub field: String,
    /// serde's message (what was found and what is expected, with line and column).
    pub message: String,
}

/// Which scripted step answered: the `[[endpoint]]` id as written in the scenario, the step's
/// 0-based index in that plan, and the 1-based repetition of that step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRef {
    /// The plan's `id` as written (an id or glob).
    pub endpoint: String,
    /// 0-based index of the step in its plan.
    pub index: usize,
    /// 1-based repetition of the step (`times`).
    pub repeat: u32,
}

impl Entry {
    /// Approximate heap bytes this entry holds in the window: its variable-length fields (body,
    /// base64, target, headers, findings, the health report's source) plus a fixed overhead.
    pub fn retained_bytes(&self) -> usize {
        let headers: usize = self.headers.iter().map(|(n, v)| n.len() + v.len()).sum();
        let findings: usize = self
            .findings
            .iter()
            .map(|f| f.id.len() + f.message.len())
            .sum();
        // The parsed report holds strings taken from the body: at most about its size again.
        let report = if self.report.is_some() {
            self.body.len()
        } else {
            0
        };
        ENTRY_OVERHEAD_BYTES
            + self.body.len()
            + self.body_b64.as_ref().map_or(0, String::len)
            + self.target.len()
            + self.client.len()
            + self.method.len()
            + headers
            + findings
            + report
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path of the target, without scheme/authority and query (`/metadata/instance`).
    pub fn path(&self) -> &str {
        crate::endpoint::split_target(&self.target).path
    }

    /// The decoded query pairs of the target, in order (duplicates kept).
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        crate::endpoint::query_pairs(crate::endpoint::split_target(&self.target).query)
    }

    /// The first value of a query parameter.
    pub fn query(&self, name: &str) -> Option<String> {
        self.query_pairs()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// The received body bytes that were kept (decoded from `body_b64` when present).
    pub fn body_bytes(&self) -> Vec<u8> {
        use base64::Engine as _;
        match &self.body_b64 {
            Some(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_default(),
            None => self.body.as_bytes().to_vec(),
        }
    }

    /// True when the answer was a transport fault, the rate limiter, or an error status.
    pub fn is_fault(&self) -> bool {
        self.answer.kind.is_fault() || self.answer.status.is_some_and(|s| s >= 400)
    }

    /// Parses one line of a `--journal` file (or one entry of the admin API's array). An
    /// error names the field that is wrong (`answer.kind: unknown variant ...`).
    pub fn from_json(text: &str) -> Result<Entry, EntryError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| EntryError {
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })
    }
}

/// Fills `body`, `body_b64`, `body_len` and `body_truncated` from received bytes.
pub(crate) fn body_fields(bytes: &[u8]) -> (String, Option<String>, usize, bool) {
    use base64::Engine as _;
    let truncated = bytes.len() > BODY_KEEP_BYTES;
    let kept = &bytes[..bytes.len().min(BODY_KEEP_BYTES)];
    match std::str::from_utf8(kept) {
        Ok(s) => (s.to_owned(), None, bytes.len(), truncated),
        Err(e) => {
            // A cut through a multi-byte character is still "valid UTF-8" for our purpose.
            if truncated && e.error_len().is_none() {
                let s = String::from_utf8_lossy(&kept[..e.valid_up_to()]).into_owned();
                return (s, None, bytes.len(), truncated);
            }
            (
                String::from_utf8_lossy(kept).into_owned(),
                Some(base64::engine::general_purpose::STANDARD.encode(kept)),
                bytes.len(),
                truncated,
            )
        }
    }
}

/// The journal store: a bounded in-memory window plus an optional JSON Lines sink.
///
/// The window is bounded by entry count and by retained bytes; the oldest entries go first.
pub(crate) struct Journal {
    entries: VecDeque<Entry>,
    /// `retained_bytes()` of each entry, in step with `entries` (not recomputed on eviction).
    sizes: VecDeque<usize>,
    /// Whether each entry is final (already in the JSON Lines file), in step with `entries`.
    finished: VecDeque<bool>,
    capacity: usize,
    max_bytes: usize,
    /// Sum of `retained_bytes()` over `entries`.
    retained_bytes: usize,
    evicted: u64,
    next_seq: u64,
    file: Option<JournalFile>,
}

impl Journal {
    pub(crate) fn new(
        capacity: usize,
        max_bytes: usize,
        file: Option<&Path>,
    ) -> std::io::Result<Self> {
        let file = file.map(JournalFile::create).transpose()?;
        Ok(Journal {
            entries: VecDeque::new(),
            sizes: VecDeque::new(),
            finished: VecDeque::new(),
            capacity: capacity.max(1),
            max_bytes,
            retained_bytes: 0,
            evicted: 0,
            next_seq: 1,
            file,
        })
    }

    /// Records a new entry (its `seq` is assigned here) and returns the seq.
    pub(crate) fn begin(&mut self, mut entry: Entry) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        entry.seq = seq;
        let size = entry.retained_bytes();
        while !self.entries.is_empty()
            && (self.entries.len() >= self.capacity
                || self.retained_bytes.saturating_add(size) > self.max_bytes)
        {
            self.evict_oldest();
        }
        self.retained_bytes += size;
        self.entries.push_back(entry);
        self.sizes.push_back(size);
        self.finished.push_back(false);
        seq
    }

    fn evict_oldest(&mut self) {
        if let Some(entry) = self.entries.pop_front() {
            // Still pending (a long delay): the file gets it as it is now, or never would.
            if self.finished.pop_front() == Some(false)
                && let Some(file) = self.file.as_mut()
            {
                file.write(entry.seq, &entry);
            }
            let size = self.sizes.pop_front().unwrap_or_default();
            self.retained_bytes = self.retained_bytes.saturating_sub(size);
            self.evicted += 1;
        }
    }

    /// Updates an entry that is still in the window.
    pub(crate) fn update(&mut self, seq: u64, f: impl FnOnce(&mut Entry)) {
        let Some(idx) = self.index_of(seq) else {
            return;
        };
        let entry = &mut self.entries[idx];
        f(entry);
        let after = entry.retained_bytes();
        let before = std::mem::replace(&mut self.sizes[idx], after);
        self.retained_bytes = (self.retained_bytes + after).saturating_sub(before);
        // An update that grew the window past its bound drops the oldest others, never itself.
        while self.retained_bytes > self.max_bytes
            && self.entries.len() > 1
            && self.entries.front().is_some_and(|e| e.seq != seq)
        {
            self.evict_oldest();
        }
    }

    /// Marks an entry final: it is written to the JSON Lines file (one line, flushed).
    pub(crate) fn finish(&mut self, seq: u64, f: impl FnOnce(&mut Entry)) {
        self.update(seq, f);
        let Some(idx) = self.index_of(seq) else {
            return;
        };
        if std::mem::replace(&mut self.finished[idx], true) {
            return;
        }
        self.write_at(idx);
    }

    /// Writes every entry that is not final yet (answers still pending when the fake stops)
    /// to the JSON Lines file as it stands, `done_ms` null: the file misses no request.
    pub(crate) fn flush_pending(&mut self) {
        for idx in 0..self.entries.len() {
            if !std::mem::replace(&mut self.finished[idx], true) {
                self.write_at(idx);
            }
        }
    }

    /// The window's entry at `idx` as one JSON line to the file (a no-op without a file;
    /// serializing is the costliest part of journaling).
    fn write_at(&mut self, idx: usize) {
        if let Some(file) = self.file.as_mut() {
            file.write(self.entries[idx].seq, &self.entries[idx]);
        }
    }

    /// Seqs in the window are consecutive. Counted from the newest entry: the one a request
    /// finishes is nearly always near the back (in cache), the front is the window's coldest.
    fn index_of(&self, seq: u64) -> Option<usize> {
        let last = self.entries.back()?.seq;
        let back_offset = usize::try_from(last.checked_sub(seq)?).ok()?;
        let idx = self.entries.len().checked_sub(back_offset + 1)?;
        self.entries.get(idx).filter(|e| e.seq == seq).map(|_| idx)
    }

    pub(crate) fn snapshot(&self) -> Vec<Entry> {
        self.entries.iter().cloned().collect()
    }

    /// Empties the in-memory window (the file and the seq counter are kept).
    pub(crate) fn clear(&mut self) {
        // Pending entries leave the window now; their answers would never reach the file.
        self.flush_pending();
        self.entries.clear();
        self.sizes.clear();
        self.finished.clear();
        self.retained_bytes = 0;
    }

    pub(crate) fn stats(&self) -> JournalStats {
        JournalStats {
            entries: self.entries.len(),
            retained_bytes: self.retained_bytes,
            capacity: self.capacity,
            max_bytes: self.max_bytes,
            evicted: self.evicted,
            file_lost: self.file.as_ref().map_or(0, JournalFile::lost),
        }
    }

    /// Why the `--journal` file misses entries, once a write to it failed.
    pub(crate) fn file_error(&self) -> Option<JournalFileError> {
        self.file.as_ref().and_then(|f| f.error().cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::health::{HealthState, SubStatus};

    /// A `--journal` file written by the fake before the journal's fields were typed (strings
    /// then): every answer kind, every listener, a hang the client gave up on, a throttled
    /// request, health reports with known and unknown spellings, a non-UTF-8 body.
    const JOURNAL_V1: &str = include_str!("../tests/data/journal-v1.jsonl");

    #[test]
    fn journal_lines_written_before_typing_read_back_byte_identical() {
        let mut kinds = std::collections::BTreeSet::new();
        let mut listeners = std::collections::BTreeSet::new();
        for (i, line) in JOURNAL_V1.lines().enumerate() {
            let entry = Entry::from_json(line).unwrap_or_else(|e| panic!("line {}: {e}", i + 1));
            assert_eq!(
                serde_json::to_string(&entry).unwrap(),
                line,
                "line {}",
                i + 1
            );
            kinds.insert(entry.answer.kind.as_str());
            listeners.insert(entry.listener.as_str());
        }
        let mut every_kind: Vec<&str> = AnswerKind::ALL.iter().map(|k| k.as_str()).collect();
        every_kind.sort();
        assert_eq!(kinds.into_iter().collect::<Vec<_>>(), every_kind);
        assert_eq!(listeners.len(), Listener::ALL.len());

        // The typed values are the ones the strings named.
        let lines: Vec<Entry> = JOURNAL_V1
            .lines()
            .map(|l| Entry::from_json(l).unwrap())
            .collect();
        assert_eq!(lines[3].answer.kind, AnswerKind::Throttled);
        assert_eq!(
            (lines[10].listener, lines[10].endpoint),
            (Listener::Proxy, EndpointId::ImdsInstance)
        );
        assert_eq!(lines[11].endpoint, EndpointId::ProxyUnknownHost);
        assert_eq!(lines[9].listener, Listener::HostPlugin);
        let xml = lines[4].report.as_ref().unwrap();
        assert_eq!(xml.state, Some(HealthState::NotReady));
        assert_eq!(xml.substatus, Some(SubStatus::ProvisioningFailed));
        let json = lines[5].report.as_ref().unwrap();
        assert_eq!(json.state, Some(HealthState::from("ready")));
        assert_eq!(json.substatus, Some(SubStatus::from("Weird")));
        assert_eq!(lines[13].answer.kind, AnswerKind::Hang);
        assert!(lines[13].client_closed_ms.is_some());
    }

    #[test]
    fn an_unknown_name_in_a_journal_line_is_an_error_naming_the_field() {
        let line = JOURNAL_V1.lines().nth(7).unwrap(); // imds, imds.versions, close
        let err = Entry::from_json(&line.replace(r#""listener":"imds""#, r#""listener":"imdz""#))
            .unwrap_err();
        assert_eq!(err.field, "listener");
        assert!(
            err.to_string().starts_with(
                "listener: unknown variant `imdz`, expected one of `wireserver`, `imds`, `hostplugin`, `proxy`"
            ),
            "{err}"
        );
        let err =
            Entry::from_json(&line.replace(r#""kind":"close""#, r#""kind":"closed""#)).unwrap_err();
        assert_eq!(err.field, "answer.kind");
        assert!(
            err.to_string().starts_with(
                "answer.kind: unknown variant `closed`, expected one of `respond`, `delay`, `hang`, `reset`, `close`, `malformed`, `partial`, `slow`, `throttled`, `default`"
            ),
            "{err}"
        );
        let err = Entry::from_json(&line.replace(
            r#""endpoint":"imds.versions""#,
            r#""endpoint":"imds.version""#,
        ))
        .unwrap_err();
        assert_eq!(err.field, "endpoint");
        assert!(
            err.message.contains(
                "\"imds.version\" matches no endpoint id; expected one of wireserver.versions"
            ),
            "{err}"
        );
        let err = Entry::from_json(&line.replace(r#""kind":"close""#, r#""kind":7"#)).unwrap_err();
        assert_eq!(err.field, "answer.kind");
        // serde_json's own message for a number where a name belongs (as for a derived enum).
        assert!(err.message.starts_with("expected value at line 1"), "{err}");
    }

    #[test]
    fn each_kind_is_classed_by_how_it_reaches_the_client() {
        use AnswerKind as K;
        // Kind: transport fault, immediate reply, acts on arrival, holds the client waiting
        // (the lists each class was written as before the rows stated a delivery).
        let table = [
            (K::Respond, false, true, true, false),
            (K::Delay, false, false, false, true),
            (K::Hang, true, false, false, true),
            (K::Reset, true, false, true, false),
            (K::Close, true, false, true, false),
            (K::Malformed, true, false, true, false),
            (K::Partial, true, false, true, false),
            (K::Slow, true, false, false, true),
            (K::Throttled, false, true, true, false),
            (K::Default, false, true, true, false),
        ];
        assert_eq!(table.map(|row| row.0), AnswerKind::ALL);
        for (kind, transport, immediate, on_arrival, holds) in table {
            let got = (
                kind.is_transport_fault(),
                kind.is_immediate_reply(),
                kind.acts_on_arrival(),
                kind.delivery().holds_client(),
            );
            assert_eq!(got, (transport, immediate, on_arrival, holds), "{kind}");
        }
        // What the client sees of a broken answer is named (observe's transport failures).
        assert_eq!(K::Reset.delivery(), Delivery::Broken("connection reset"));
    }

    #[test]
    fn vocabulary_names_are_their_serde_strings() {
        for kind in AnswerKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<AnswerKind>(&json).unwrap(), kind);
            assert_eq!(kind.is_step(), AnswerKind::STEP_KINDS.contains(&kind));
            // A fault is a transport fault or the limiter; an immediate reply is neither.
            assert_eq!(
                kind.is_fault(),
                kind.is_transport_fault() || kind == AnswerKind::Throttled
            );
            assert!(!(kind.is_immediate_reply() && kind.is_transport_fault()));
        }
        assert_eq!(
            AnswerKind::STEP_KINDS.map(AnswerKind::as_str),
            [
                "respond",
                "delay",
                "hang",
                "reset",
                "close",
                "malformed",
                "partial",
                "slow"
            ]
        );
        for listener in Listener::ALL {
            let json = serde_json::to_string(&listener).unwrap();
            assert_eq!(json, format!("\"{listener}\""));
            assert_eq!(serde_json::from_str::<Listener>(&json).unwrap(), listener);
        }
        assert_eq!(Listener::HostPlugin.as_str(), "hostplugin");
        assert_eq!("proxy".parse::<Listener>(), Ok(Listener::Proxy));
        assert_eq!("slow".parse::<AnswerKind>(), Ok(AnswerKind::Slow));
        assert_eq!(
            "Slow".parse::<AnswerKind>().unwrap_err().to_string(),
            "\"Slow\" is not an answer kind; expected one of respond, delay, hang, reset, close, malformed, partial, slow, throttled, default"
        );
        assert_eq!(
            "ims".parse::<Listener>().unwrap_err().to_string(),
            "\"ims\" is not a listener; expected one of wireserver, imds, hostplugin, proxy"
        );
    }

    fn entry() -> Entry {
        Entry {
            seq: 0,
            at_ms: 0,
            received_by_kernel: false,
            done_ms: None,
            listener: Listener::Wireserver,
            client: "127.0.0.1:1".into(),
            method: "GET".into(),
            target: "http://169.254.169.254/metadata/instance?api-version=2021-02-01&extended=true"
                .into(),
            http_version: "HTTP/1.1".into(),
            headers: vec![("Metadata".into(), "true".into())],
            body: String::new(),
            body_b64: None,
            body_len: 0,
            body_truncated: false,
            endpoint: EndpointId::ImdsInstance,
            answer: Answer {
                kind: AnswerKind::Default,
                status: Some(200),
                step: None,
            },
            report: None,
            findings: vec![],
            client_closed_ms: None,
        }
    }

    #[test]
    fn window_is_bounded_and_seq_keeps_counting() {
        let mut j = Journal::new(3, DEFAULT_MAX_BYTES, None).unwrap();
        for _ in 0..5 {
            j.begin(entry());
        }
        let seqs: Vec<u64> = j.snapshot().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        j.update(4, |e| e.done_ms = Some(9));
        j.update(1, |e| e.done_ms = Some(1)); // dropped: no effect, no panic
        assert_eq!(j.snapshot()[1].done_ms, Some(9));
        j.clear();
        assert_eq!(j.begin(entry()), 6);
    }

    #[test]
    fn window_is_bounded_by_bytes_oldest_first() {
        let mut big = entry();
        big.body = "x".repeat(10_000);
        let size = big.retained_bytes();
        let mut j = Journal::new(1000, size * 3 + size / 2, None).unwrap();
        for _ in 0..10 {
            j.begin(big.clone());
        }
        let stats = j.stats();
        assert_eq!(stats.entries, 3);
        assert_eq!(stats.retained_bytes, size * 3);
        assert_eq!(stats.evicted, 7);
        let seqs: Vec<u64> = j.snapshot().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![8, 9, 10]);
        // An update that grows an entry evicts older ones, never the updated one.
        j.update(10, |e| e.body = "y".repeat(30_000));
        let seqs: Vec<u64> = j.snapshot().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![10]);
        assert_eq!(j.stats().retained_bytes, j.snapshot()[0].retained_bytes());
        // One entry larger than the bound is still kept (the window is never empty after begin).
        let mut huge = entry();
        huge.body = "z".repeat(size * 5);
        assert_eq!(j.begin(huge), 11);
        assert_eq!(j.stats().entries, 1);
        j.clear();
        assert_eq!(j.stats().retained_bytes, 0);
    }

    #[test]
    fn helpers_read_target_and_headers() {
        let e = entry();
        assert_eq!(e.path(), "/metadata/instance");
        assert_eq!(e.query("api-version").as_deref(), Some("2021-02-01"));
        assert_eq!(e.header("metadata"), Some("true"));
    }

    #[test]
    fn body_fields_keep_binary_as_base64() {
        let (s, b64, len, cut) = body_fields(&[0xff, 0x00, b'a']);
        assert_eq!((len, cut), (3, false));
        assert_eq!(b64.as_deref(), Some("/wBh"));
        assert!(s.ends_with('a'));
        let big = vec![b'x'; BODY_KEEP_BYTES + 10];
        let (s, b64, len, cut) = body_fields(&big);
        assert_eq!(
            (s.len(), b64, len, cut),
            (BODY_KEEP_BYTES, None, BODY_KEEP_BYTES + 10, true)
        );
    }
}
