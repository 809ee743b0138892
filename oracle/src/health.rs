//! Health reports as the wireserver receives them: XML (docs/protocol.md §4) and JSON (§5).
//!
//! Both parsers are lenient the way §4.3 asks a server to be (prolog and namespaces optional,
//! whitespace between elements ignored, element names case-sensitive) and never fail: whatever
//! is wrong with a body becomes a finding on the returned report.
//!
//! The body is the agent's, so the work is linear in it ([`crate::bounds`]): an XML element
//! costs a bounded number of steps, the read stops at [`XML_MAX_DEPTH`] nested elements or
//! [`XML_MAX_ELEMENTS`] elements (an error finding each; the real documents nest 7 deep with 12
//! elements), a finding that repeats per element or key is listed 16 times, and JSON nesting
//! is bounded by serde_json's recursion limit (128; deeper is `health.json.invalid`).

use quick_xml::events::Event;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::bounds::Repeats;
use super::encoded::{self, EncodedReport, Mode};
use super::finding::Finding;
use super::id;

/// The platform keeps at most this many bytes of a description (§4.2).
pub const DESCRIPTION_PLATFORM_CAP: usize = 4096;

/// WALinuxAgent trims descriptions to this many characters before escaping (4096-byte platform
/// cap minus 10 %, §4.2).
pub const WALA_DESCRIPTION_TRIM: usize = 3686;

const READY: &str = "Ready";
const NOT_READY: &str = "NotReady";
const PROVISIONING_FAILED: &str = "ProvisioningFailed";
const PROVISIONING: &str = "Provisioning";

/// The deepest element nesting read (4x the real documents' 7, testdata/vectors); deeper is
/// a [`id::health::XML_TOO_DEEP`] error and the body is not read further.
pub const XML_MAX_DEPTH: usize = 32;

/// The most elements read (20x the real documents' 12); more is a
/// [`id::health::XML_TOO_MANY_ELEMENTS`] error and the body is not read further.
pub const XML_MAX_ELEMENTS: usize = 256;

/// Health states a report may carry (§4.1, §5); anything else is a finding.
pub const KNOWN_STATES: [&str; 2] = [READY, NOT_READY];

/// Substatus values agents send (§4.2, §5); anything else is a finding.
pub const KNOWN_SUBSTATUSES: [&str; 2] = [PROVISIONING_FAILED, PROVISIONING];

/// Declares a verbatim unknown spelling of one value type. Only `From` on that type makes one
/// (no public constructor, and one type per value), so an `Other` never holds a known spelling
/// and matching on the known variants is exact.
macro_rules! unknown_spelling {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name(String);

        impl $name {
            /// The spelling as received.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

unknown_spelling!(
    /// A state that is neither `Ready` nor `NotReady`, as received.
    UnknownState
);
unknown_spelling!(
    /// A substatus that is neither `ProvisioningFailed` nor `Provisioning`, as received.
    UnknownSubStatus
);

/// A report's state as the agent spelled it: one of the two the platform knows (§4.1, §5,
/// case-sensitive), or whatever else arrived (`"ready"`, garbage), kept verbatim so a finding
/// and the journal can show it. Serialized as exactly the received string.
///
/// A substatus's unknown spelling is another type, so it cannot become a state:
///
/// ```compile_fail
/// use wirecheck_oracle::{HealthState, SubStatus};
/// let SubStatus::Other(spelling) = SubStatus::from("Ready") else { unreachable!() };
/// let _state = HealthState::Other(spelling);
/// ```
#[derive(Debug, Clone)]
pub enum HealthState {
    /// `Ready`.
    Ready,
    /// `NotReady`.
    NotReady,
    /// Any other spelling (a finding says so).
    Other(UnknownState),
}

impl HealthState {
    /// The state exactly as sent.
    pub fn as_str(&self) -> &str {
        match self {
            HealthState::Ready => READY,
            HealthState::NotReady => NOT_READY,
            HealthState::Other(s) => s.as_str(),
        }
    }

    /// `Ready` or `NotReady`.
    pub fn is_known(&self) -> bool {
        KNOWN_STATES.contains(&self.as_str())
    }
}

impl From<&str> for HealthState {
    fn from(s: &str) -> Self {
        match s {
            READY => HealthState::Ready,
            NOT_READY => HealthState::NotReady,
            other => HealthState::Other(UnknownState(other.to_owned())),
        }
    }
}

impl From<String> for HealthState {
    fn from(s: String) -> Self {
        match HealthState::from(s.as_str()) {
            HealthState::Other(_) => HealthState::Other(UnknownState(s)),
            known => known,
        }
    }
}

/// A report's substatus as the agent spelled it (§4.2, §5): `ProvisioningFailed`,
/// `Provisioning`, or anything else, kept verbatim (a warning). Serialized as exactly the
/// received string.
#[derive(Debug, Clone)]
pub enum SubStatus {
    /// `ProvisioningFailed`.
    ProvisioningFailed,
    /// `Provisioning` (still in progress).
    Provisioning,
    /// Any other spelling (a finding says so).
    Other(UnknownSubStatus),
}

impl SubStatus {
    /// The substatus exactly as sent.
    pub fn as_str(&self) -> &str {
        match self {
            SubStatus::ProvisioningFailed => PROVISIONING_FAILED,
            SubStatus::Provisioning => PROVISIONING,
            SubStatus::Other(s) => s.as_str(),
        }
    }

    /// `ProvisioningFailed` or `Provisioning`.
    pub fn is_known(&self) -> bool {
        KNOWN_SUBSTATUSES.contains(&self.as_str())
    }
}

impl From<&str> for SubStatus {
    fn from(s: &str) -> Self {
        match s {
            PROVISIONING_FAILED => SubStatus::ProvisioningFailed,
            PROVISIONING => SubStatus::Provisioning,
            other => SubStatus::Other(UnknownSubStatus(other.to_owned())),
        }
    }
}

impl From<String> for SubStatus {
    fn from(s: String) -> Self {
        match SubStatus::from(s.as_str()) {
            SubStatus::Other(_) => SubStatus::Other(UnknownSubStatus(s)),
            known => known,
        }
    }
}

/// Equality, hashing, display and serde by the spelling: one implementation for both types.
macro_rules! by_spelling {
    ($t:ty) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.as_str() == other.as_str()
            }
        }
        impl Eq for $t {}
        impl std::hash::Hash for $t {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.as_str().hash(state)
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map(<$t>::from)
            }
        }
    };
}
by_spelling!(HealthState);
by_spelling!(SubStatus);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// Which health endpoint a report came to.
pub enum ReportKind {
    /// The XML `Health` document (`POST /machine?comp=health`, §4).
    Xml,
    /// The JSON body (`POST /provisioning/health`, §5).
    Json,
}

/// The ids the fake served in its goal state; XML reports echo them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServedIds {
    /// The goal state's `Incarnation`.
    pub incarnation: String,
    /// The goal state's `ContainerId`.
    pub container_id: String,
    /// The role instance's `InstanceId`.
    pub instance_id: String,
}

/// What a health POST said, as the oracle reads it, with findings for what is wrong in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// XML or JSON.
    pub kind: ReportKind,
    /// `Ready` | `NotReady` | anything else (with a finding).
    pub state: Option<HealthState>,
    /// `ProvisioningFailed` | `Provisioning` | anything else (with a finding).
    pub substatus: Option<SubStatus>,
    /// Unescaped, verbatim (not trimmed).
    pub description: Option<String>,
    /// XML only.
    pub goal_state_incarnation: Option<String>,
    /// XML only: the `ContainerId` echoed.
    pub container_id: Option<String>,
    /// XML only: the role instance's `InstanceId` echoed.
    pub instance_id: Option<String>,
    /// When the description looks encoded (`result=…`): its lenient parse; its findings are
    /// also in `findings`, nested ([`Finding::in_description`]).
    pub encoded: Option<EncodedReport>,
    /// When the description is WALinuxAgent's exception text (`[ProvisionError] message`,
    /// §9.1): the exception's class name. A dialect of its own, not an encoded report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception_class: Option<String>,
    /// Everything wrong or notable (ids start with `health.`).
    pub findings: Vec<Finding>,
}

impl HealthReport {
    fn empty(kind: ReportKind) -> Self {
        HealthReport {
            kind,
            state: None,
            substatus: None,
            description: None,
            goal_state_incarnation: None,
            container_id: None,
            instance_id: None,
            encoded: None,
            exception_class: None,
            findings: Vec::new(),
        }
    }

    /// `NotReady` with substatus `Provisioning`: the agent says it is still working (§4.1).
    pub fn is_in_progress(&self) -> bool {
        self.state == Some(HealthState::NotReady) && self.substatus == Some(SubStatus::Provisioning)
    }

    /// The report ends provisioning: `Ready`, or `NotReady` with any substatus but
    /// `Provisioning` (a failure). An unknown or missing state is neither.
    pub fn is_terminal(&self) -> bool {
        match &self.state {
            Some(HealthState::Ready) => true,
            Some(HealthState::NotReady) => self.substatus != Some(SubStatus::Provisioning),
            _ => false,
        }
    }

    /// True when any finding is an error.
    pub fn has_errors(&self) -> bool {
        super::finding::has_errors(&self.findings)
    }
}

// ---------------------------------------------------------------------------------------------
// XML (§4)

const ROLE: &[&str] = &["Health", "Container", "RoleInstanceList", "Role"];

/// The depth of the deepest leaf read (`.../Role/Health/Details/Description`).
const LEAF_MAX_DEPTH: usize = ROLE.len() + 3;

/// The leaf elements read from a health document, by path below the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaf {
    Incarnation,
    ContainerId,
    InstanceId,
    State,
    SubStatus,
    Description,
}

impl Leaf {
    fn at(path: &[String]) -> Option<Leaf> {
        // No leaf lies deeper: a deep element costs no look at its path.
        if path.len() > LEAF_MAX_DEPTH {
            return None;
        }
        crate::bounds::step(path.len());
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        match path.as_slice() {
            ["Health", "GoalStateIncarnation"] => Some(Leaf::Incarnation),
            ["Health", "Container", "ContainerId"] => Some(Leaf::ContainerId),
            [a, b, c, d, rest @ ..] if [*a, *b, *c, *d] == ROLE => match rest {
                ["InstanceId"] => Some(Leaf::InstanceId),
                ["Health", "State"] => Some(Leaf::State),
                ["Health", "Details", "SubStatus"] => Some(Leaf::SubStatus),
                ["Health", "Details", "Description"] => Some(Leaf::Description),
                _ => None,
            },
            _ => None,
        }
    }

    /// The id segment of findings about this leaf.
    fn id(self) -> &'static str {
        match self {
            Leaf::Incarnation => "goal-state-incarnation",
            Leaf::ContainerId => "container-id",
            Leaf::InstanceId => "instance-id",
            Leaf::State => "state",
            Leaf::SubStatus => "substatus",
            Leaf::Description => "description",
        }
    }

    fn element(self) -> &'static str {
        match self {
            Leaf::Incarnation => "GoalStateIncarnation",
            Leaf::ContainerId => "ContainerId",
            Leaf::InstanceId => "InstanceId",
            Leaf::State => "State",
            Leaf::SubStatus => "SubStatus",
            Leaf::Description => "Description",
        }
    }
}

/// Element names expected under each parent, to point out case mistakes (`Substatus`).
fn expected_children(parent: &[String]) -> &'static [&'static str] {
    if parent.len() >= LEAF_MAX_DEPTH {
        return &[];
    }
    crate::bounds::step(parent.len());
    let parent: Vec<&str> = parent.iter().map(String::as_str).collect();
    match parent.as_slice() {
        [] => &["Health"],
        ["Health"] => &["GoalStateIncarnation", "Container"],
        ["Health", "Container"] => &["ContainerId", "RoleInstanceList"],
        ["Health", "Container", "RoleInstanceList"] => &["Role"],
        p if p == ROLE => &["InstanceId", "Health"],
        [a, b, c, d, "Health"] if [*a, *b, *c, *d] == ROLE => &["State", "Details"],
        [a, b, c, d, "Health", "Details"] if [*a, *b, *c, *d] == ROLE => {
            &["SubStatus", "Description"]
        }
        _ => &[],
    }
}

#[derive(Default)]
struct XmlValues {
    values: Vec<(Leaf, String)>,
    details: bool,
    roles: usize,
}

impl XmlValues {
    fn get(&self, leaf: Leaf) -> Option<&str> {
        self.values
            .iter()
            .find(|(l, _)| *l == leaf)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses a health XML body (§4) leniently. Never panics, never fails: problems are findings.
/// With `served`, the echoed ids are compared with what the fake served (mismatches are
/// warnings, never rejections, §4.3).
pub fn parse_xml(body: &[u8], served: Option<&ServedIds>) -> HealthReport {
    let mut report = HealthReport::empty(ReportKind::Xml);
    let text = body_text(body, &mut report.findings);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.trim().is_empty() {
        report.findings.push(Finding::error(
            id::health::BODY_EMPTY,
            "the body is empty; expected a <Health> document (§4.1)",
        ));
        return report;
    }
    let mut repeats = Repeats::default();
    let values = match read_xml(text, &mut report.findings, &mut repeats) {
        Ok(values) => values,
        Err(finding) => {
            report.findings.push(finding);
            repeats.finish(&mut report.findings, id::health::REPEATED);
            return report;
        }
    };

    let trimmed = |leaf: Leaf, findings: &mut Vec<Finding>| {
        let raw = values.get(leaf)?;
        let value = raw.trim();
        if value != raw {
            findings.push(Finding::warning(
                id::health::XML_WHITESPACE.id(leaf.id()),
                format!(
                    "<{}> is {raw:?}: surrounding whitespace is not part of the value; expected {value:?}",
                    leaf.element()
                ),
            ));
        }
        Some(value.to_string())
    };
    report.goal_state_incarnation = trimmed(Leaf::Incarnation, &mut report.findings);
    report.container_id = trimmed(Leaf::ContainerId, &mut report.findings);
    report.instance_id = trimmed(Leaf::InstanceId, &mut report.findings);
    report.state = trimmed(Leaf::State, &mut report.findings).map(HealthState::from);
    report.substatus = trimmed(Leaf::SubStatus, &mut report.findings).map(SubStatus::from);
    report.description = values.get(Leaf::Description).map(str::to_string);

    if values.roles > 1 {
        report.findings.push(Finding::warning(
            id::health::XML_MULTIPLE_ROLES,
            format!(
                "{} <Role> elements under RoleInstanceList; the first one is read (agents send one)",
                values.roles
            ),
        ));
    }
    for (leaf, path) in [
        (Leaf::Incarnation, "Health/GoalStateIncarnation"),
        (Leaf::ContainerId, "Health/Container/ContainerId"),
        (
            Leaf::InstanceId,
            "Health/Container/RoleInstanceList/Role/InstanceId",
        ),
    ] {
        if values.get(leaf).is_none() {
            report.findings.push(Finding::error(
                id::health::MISSING.id(leaf.id()),
                format!("no <{}> element; expected {path} (§4.1)", leaf.element()),
            ));
        }
    }
    if let Some(served) = served {
        compare_ids(&mut report, served);
    }
    check_semantics(
        &mut report,
        values.details,
        "Health/Container/RoleInstanceList/Role/Health/State",
    );
    repeats.finish(&mut report.findings, id::health::REPEATED);
    report
}

/// Where a read of the document stands: the open elements, the leaf being captured, the
/// values of the first `<Role>` so far. Each element costs a bounded number of steps (no look
/// at a path deeper than any leaf), and [`XML_MAX_DEPTH`] / [`XML_MAX_ELEMENTS`] end the read.
#[derive(Default)]
struct XmlWalk {
    values: XmlValues,
    path: Vec<String>,
    /// The leaf being read, its depth and its text so far.
    capture: Option<(Leaf, usize, String)>,
    root_seen: bool,
    elements: usize,
}

impl XmlWalk {
    /// An element opens at byte `at`. `Err`: a second root, or past a cap.
    fn open(
        &mut self,
        name: String,
        at: u64,
        findings: &mut Vec<Finding>,
        repeats: &mut Repeats,
    ) -> Result<(), Finding> {
        if self.path.is_empty() {
            if self.root_seen {
                return Err(not_well_formed(
                    at,
                    &format!("a second root element <{name}>"),
                ));
            }
            self.root_seen = true;
        }
        self.elements += 1;
        if self.elements > XML_MAX_ELEMENTS {
            return Err(Finding::error(
                id::health::XML_TOO_MANY_ELEMENTS,
                format!(
                    "more than {XML_MAX_ELEMENTS} elements (at byte {at}); a health document has 12 (§4.1), so the body is not read further"
                ),
            ));
        }
        if self.path.len() >= XML_MAX_DEPTH {
            return Err(Finding::error(
                id::health::XML_TOO_DEEP,
                format!(
                    "elements nested deeper than {XML_MAX_DEPTH} (at byte {at}); a health document nests 7 deep (§4.1), so the body is not read further"
                ),
            ));
        }
        check_name_case(&self.path, &name, findings, repeats);
        self.path.push(name);
        let path = &self.path;
        if path.len() == ROLE.len() && path == ROLE {
            self.values.roles += 1;
        }
        if path.len() == 4 && path[..3] == ROLE[..3] && path[3] == "RoleInstance" {
            repeats.push(findings, id::health::XML_ROLE_INSTANCE, || Finding::error(
                id::health::XML_ROLE_INSTANCE,
                "the health document lists <RoleInstance>; it uses RoleInstanceList/Role (the goal state's name is RoleInstance, §4)",
            ));
        }
        // Only the first <Role> is read.
        let in_first_role =
            !(path.len() > ROLE.len() && path[..ROLE.len()] == *ROLE) || self.values.roles == 1;
        if in_first_role
            && path.len() == ROLE.len() + 2
            && path[..ROLE.len()] == *ROLE
            && path[ROLE.len()] == "Health"
            && path[ROLE.len() + 1] == "Details"
        {
            self.values.details = true;
        }
        if self.capture.is_none()
            && in_first_role
            && let Some(leaf) = Leaf::at(path)
        {
            self.capture = Some((leaf, path.len(), String::new()));
        }
        Ok(())
    }

    /// The innermost open element closes.
    fn close(&mut self, findings: &mut Vec<Finding>, repeats: &mut Repeats) {
        let depth = self.path.len();
        if let Some((leaf, _, text)) = self.capture.take_if(|(_, d, _)| *d == depth) {
            if self.values.get(leaf).is_some() {
                repeats.push(findings, id::health::XML_DUPLICATE.stem(), || {
                    Finding::warning(
                        id::health::XML_DUPLICATE.id(leaf.id()),
                        format!("more than one <{}>; the first one is read", leaf.element()),
                    )
                });
            } else {
                self.values.values.push((leaf, text));
            }
        }
        self.path.pop();
    }

    /// Text of the leaf being read, if any.
    fn text(&mut self, text: &str) {
        if let Some((_, _, buf)) = self.capture.as_mut() {
            buf.push_str(text);
        }
    }
}

fn not_well_formed(at: u64, what: &str) -> Finding {
    Finding::error(
        id::health::XML_INVALID,
        format!("the body is not well-formed XML at byte {at}: {what}"),
    )
}

/// Reads the document, collecting the leaves of the first `<Role>`. `Err` = not well-formed,
/// or past a cap (the body is not read further).
fn read_xml(
    text: &str,
    findings: &mut Vec<Finding>,
    repeats: &mut Repeats,
) -> Result<XmlValues, Finding> {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut walk = XmlWalk::default();
    let invalid = |reader: &quick_xml::Reader<&[u8]>, what: String| {
        not_well_formed(reader.error_position(), &what)
    };
    loop {
        let event = reader
            .read_event()
            .map_err(|e| invalid(&reader, e.to_string()))?;
        crate::bounds::step(1);
        match &event {
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                walk.open(name, reader.buffer_position(), findings, repeats)?;
                if matches!(event, Event::Empty(_)) {
                    walk.close(findings, repeats);
                }
            }
            Event::End(_) => walk.close(findings, repeats),
            Event::Text(t) => {
                let content = t
                    .xml10_content()
                    .map_err(|e| invalid(&reader, e.to_string()))?;
                if walk.path.is_empty() && !content.trim().is_empty() {
                    return Err(invalid(&reader, "text outside the root element".into()));
                }
                walk.text(&content);
            }
            Event::CData(t) => walk.text(&String::from_utf8_lossy(t)),
            Event::GeneralRef(r) => {
                let name = r.decode().map_err(|e| invalid(&reader, e.to_string()))?;
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => match quick_xml::escape::resolve_predefined_entity(&name) {
                        Some(s) => s.to_string(),
                        None => {
                            repeats.push(findings, id::health::XML_UNKNOWN_ENTITY, || Finding::error(
                                id::health::XML_UNKNOWN_ENTITY,
                                format!(
                                    "entity &{name}; is not one of XML's predefined entities (amp, lt, gt, quot, apos); kept as written"
                                ),
                            ));
                            format!("&{name};")
                        }
                    },
                    Err(e) => return Err(invalid(&reader, e.to_string())),
                };
                walk.text(&resolved);
            }
            Event::Eof => break,
            // Declaration, comments, processing instructions, doctype: nothing to read.
            _ => {}
        }
    }

    if !walk.root_seen {
        return Err(invalid(&reader, "no root element".into()));
    }
    if let Some(open) = walk.path.last() {
        return Err(invalid(
            &reader,
            format!("the document ends inside <{open}>"),
        ));
    }
    Ok(walk.values)
}

fn check_name_case(
    parent: &[String],
    name: &str,
    findings: &mut Vec<Finding>,
    repeats: &mut Repeats,
) {
    let expected = expected_children(parent);
    if parent.is_empty() && name != "Health" {
        findings.push(Finding::error(
            id::health::XML_ROOT,
            format!("the root element is <{name}>; expected <Health> (§4.1)"),
        ));
        return;
    }
    if let Some(want) = expected
        .iter()
        .find(|want| want.eq_ignore_ascii_case(name) && **want != name)
    {
        repeats.push(findings, id::health::XML_ELEMENT_CASE, || {
            Finding::error(
                id::health::XML_ELEMENT_CASE,
                format!(
                    "element <{name}> under {}: element names are case-sensitive; expected <{want}> (§4.3)",
                    if parent.is_empty() {
                        "the document".to_string()
                    } else {
                        parent.join("/")
                    }
                ),
            )
        });
    }
}

fn compare_ids(report: &mut HealthReport, served: &ServedIds) {
    let pairs = [
        (
            id::health::INCARNATION_MISMATCH,
            "GoalStateIncarnation",
            &report.goal_state_incarnation,
            &served.incarnation,
        ),
        (
            id::health::CONTAINER_ID_MISMATCH,
            "ContainerId",
            &report.container_id,
            &served.container_id,
        ),
        (
            id::health::INSTANCE_ID_MISMATCH,
            "InstanceId",
            &report.instance_id,
            &served.instance_id,
        ),
    ];
    let mut found = Vec::new();
    for (id, element, sent, served) in pairs {
        if let Some(sent) = sent
            && sent != served
        {
            found.push(Finding::warning(
                id,
                format!(
                    "<{element}> is {sent:?}; the goal state served {served:?} (recorded, not rejected, §4.3)"
                ),
            ));
        }
    }
    report.findings.extend(found);
}

// ---------------------------------------------------------------------------------------------
// JSON (§5)

/// Parses a JSON health body (§5). Never panics, never fails: problems are findings.
pub fn parse_json(body: &[u8]) -> HealthReport {
    let mut report = HealthReport::empty(ReportKind::Json);
    if body.iter().all(u8::is_ascii_whitespace) {
        report.findings.push(Finding::error(
            id::health::BODY_EMPTY,
            "the body is empty; expected a JSON object like {\"state\":\"Ready\"} (§5)",
        ));
        return report;
    }
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => {
            report.findings.push(Finding::error(
                id::health::JSON_INVALID,
                format!("the body is not valid JSON: {e}"),
            ));
            return report;
        }
    };
    let Some(object) = value.as_object() else {
        report.findings.push(Finding::error(
            id::health::JSON_NOT_OBJECT,
            format!(
                "the body is a JSON {}; expected an object with `state` (§5)",
                json_type(&value)
            ),
        ));
        return report;
    };

    let mut repeats = Repeats::default();
    for key in object.keys() {
        if key != "state" && key != "details" {
            repeats.push(&mut report.findings, id::health::JSON_UNKNOWN_KEY, || {
                unknown_key_finding(key, "", &["state", "details"])
            });
        }
    }
    report.state =
        json_string(object.get("state"), "state", &mut report.findings).map(HealthState::from);

    let mut details_present = false;
    match object.get("details") {
        None => {}
        Some(Value::Object(details)) => {
            details_present = true;
            for key in details.keys() {
                if key != "subStatus" && key != "description" {
                    repeats.push(&mut report.findings, id::health::JSON_UNKNOWN_KEY, || {
                        unknown_key_finding(key, "details.", &["subStatus", "description"])
                    });
                }
            }
            report.substatus = json_string(
                details.get("subStatus"),
                "details.subStatus",
                &mut report.findings,
            )
            .map(SubStatus::from);
            report.description = json_string(
                details.get("description"),
                "details.description",
                &mut report.findings,
            );
        }
        Some(other) => report.findings.push(Finding::error(
            id::health::JSON_TYPE_DETAILS,
            format!(
                "`details` is a JSON {}; expected an object (§5)",
                json_type(other)
            ),
        )),
    }
    check_semantics(&mut report, details_present, "`state`");
    repeats.finish(&mut report.findings, id::health::REPEATED);
    report
}

fn json_string(value: Option<&Value>, name: &str, findings: &mut Vec<Finding>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        other => {
            findings.push(Finding::error(
                id::health::JSON_TYPE.id(name),
                format!(
                    "`{name}` is a JSON {}; expected a string (§5)",
                    json_type(other)
                ),
            ));
            None
        }
    }
}

fn unknown_key_finding(key: &str, prefix: &str, known: &[&str]) -> Finding {
    let hint = known
        .iter()
        .find(|k| k.eq_ignore_ascii_case(key))
        .map(|k| format!(" (keys are case-sensitive: did you mean `{prefix}{k}`?)"))
        .unwrap_or_default();
    Finding::warning(
        id::health::JSON_UNKNOWN_KEY,
        format!(
            "unknown key `{prefix}{key}`; expected only {}{hint} (§5)",
            known
                .iter()
                .map(|k| format!("`{prefix}{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// ---------------------------------------------------------------------------------------------
// Shared

/// The body as text; a body that is not UTF-8 (cloud-init 22.4.2 encodes Latin-1) is read
/// lossily with a finding.
fn body_text(body: &[u8], findings: &mut Vec<Finding>) -> String {
    match std::str::from_utf8(body) {
        Ok(s) => s.to_string(),
        Err(e) => {
            findings.push(Finding::error(
                id::health::BODY_INVALID_UTF8,
                format!(
                    "the body is not valid UTF-8 (first bad byte at offset {}); read with replacement characters",
                    e.valid_up_to()
                ),
            ));
            String::from_utf8_lossy(body).into_owned()
        }
    }
}

/// Checks shared by both formats: state, details, substatus, description.
fn check_semantics(report: &mut HealthReport, details_present: bool, state_at: &str) {
    let mut findings = Vec::new();
    match &report.state {
        None => findings.push(Finding::error(
            id::health::MISSING_STATE,
            format!("no state; expected {state_at} = Ready or NotReady"),
        )),
        Some(HealthState::Ready) => {
            if details_present {
                findings.push(Finding::error(
                    id::health::READY_WITH_DETAILS,
                    "state Ready carries Details; Details are sent only with NotReady (§4.1, §5)",
                ));
            }
        }
        Some(HealthState::NotReady) => {
            if report.substatus.is_none() {
                findings.push(Finding::error(
                    id::health::NOTREADY_MISSING_SUBSTATUS,
                    "state NotReady without a substatus; expected ProvisioningFailed or Provisioning (§4.1, §5)",
                ));
            }
        }
        Some(HealthState::Other(other)) => findings.push(Finding::error(
            id::health::STATE_UNKNOWN,
            format!("state is {other}; expected Ready or NotReady (case-sensitive)"),
        )),
    }
    if let Some(SubStatus::Other(substatus)) = &report.substatus {
        findings.push(Finding::warning(
            id::health::SUBSTATUS_UNKNOWN,
            format!("substatus is {substatus}; agents send ProvisioningFailed or Provisioning"),
        ));
    }
    if let Some(description) = &report.description {
        if description.len() > DESCRIPTION_PLATFORM_CAP {
            findings.push(Finding::error(
                id::health::DESCRIPTION_OVER_PLATFORM_LIMIT,
                format!(
                    "the description is {} bytes; the platform keeps {DESCRIPTION_PLATFORM_CAP} (§4.2)",
                    description.len()
                ),
            ));
        }
        if let Some(class) = exception_class(description) {
            findings.push(Finding::info(
                id::health::DESCRIPTION_EXCEPTION,
                format!(
                    "the description is WALinuxAgent-style exception text ([{class}] ...), not an encoded report (§9.1)"
                ),
            ));
            let chars = description.chars().count();
            if chars > WALA_DESCRIPTION_TRIM {
                findings.push(Finding::warning(
                    id::health::DESCRIPTION_OVER_WALA_TRIM,
                    format!(
                        "exception text of {chars} characters; WALinuxAgent trims to {WALA_DESCRIPTION_TRIM} before escaping (§4.2)"
                    ),
                ));
            }
            report.exception_class = Some(class.to_owned());
        } else if encoded::looks_encoded(description) {
            match encoded::parse(description, Mode::Lenient) {
                Ok(parsed) => {
                    findings.extend(parsed.findings.iter().cloned().map(Finding::in_description));
                    report.encoded = Some(parsed);
                }
                Err(e) => findings.push(Finding::error(
                    id::health::DESCRIPTION_REPORT_INVALID,
                    format!("the description starts with `result=` but is not an encoded report (§6.5): {e}"),
                )),
            }
        }
    }
    report.findings.extend(findings);
}

/// `ProvisionError` of `[ProvisionError] message`: WALA writes failures as `[{class}] {msg}`
/// (`azurelinuxagent/common/exception.py:46`, `AgentError.__init__`). The class is an identifier.
pub fn exception_class(description: &str) -> Option<&str> {
    let rest = description.strip_prefix('[')?;
    let (class, after) = rest.split_once(']')?;
    let mut chars = class.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    (ident && (after.is_empty() || after.starts_with(' '))).then_some(class)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wala_exception_descriptions_are_their_own_dialect() {
        let desc = "[ProvisionError] OVF xml could not be parsed [/x/ovf-env.xml]: [ProtocolError] Failed to validate OVF: HostName not found";
        let body = xml(&format!(
            "<State>NotReady</State><Details><SubStatus>ProvisioningFailed</SubStatus><Description>{desc}</Description></Details>"
        ));
        let r = parse_xml(body.as_bytes(), Some(&served()));
        assert_eq!(r.exception_class.as_deref(), Some("ProvisionError"));
        assert!(r.encoded.is_none());
        assert_eq!(ids(&r), ["health.description.exception"]);
        assert!(!r.has_errors());
        // Not every bracket is an exception class.
        for not in [
            "[a b] x",
            "[] x",
            "[1x] y",
            "[Err]x",
            "result=error|[X] y",
            "x [E] y",
        ] {
            assert_eq!(exception_class(not), None, "{not}");
        }
        // Past WALA's own trim: a warning.
        let long = format!("[ProvisionError] {}", "x".repeat(WALA_DESCRIPTION_TRIM));
        let body = xml(&format!(
            "<State>NotReady</State><Details><SubStatus>ProvisioningFailed</SubStatus><Description>{long}</Description></Details>"
        ));
        let r = parse_xml(body.as_bytes(), Some(&served()));
        assert!(
            ids(&r).contains(&"health.description.over-wala-trim"),
            "{:?}",
            ids(&r)
        );
    }

    /// Steps counted for one parse, and its report.
    fn xml_steps(body: &str) -> (u64, HealthReport) {
        crate::bounds::take_steps();
        let report = parse_xml(body.as_bytes(), None);
        (crate::bounds::take_steps(), report)
    }

    fn nested(n: usize) -> String {
        format!("{}{}", "<a>".repeat(n), "</a>".repeat(n))
    }

    /// Issue 23, "quadratic XML parsing": two 300 KB bodies of nested tags froze every case's
    /// fake for 10–30 s (each element looked at its whole path). Four times the input now
    /// costs at most about four times the steps, and a body past the depth cap is one finding.
    #[test]
    fn quadratic_xml_parsing_nested_tags_cost_linear_work() {
        let (small, _) = xml_steps(&nested(1_000));
        let (large, _) = xml_steps(&nested(4_000));
        assert!(
            large <= 5 * small.max(1),
            "4x the nesting cost {large} steps against {small}: not linear"
        );
        let bomb = nested(300 * 1024 / 7);
        let (work, report) = xml_steps(&bomb);
        assert!(
            work <= bomb.len() as u64,
            "{work} steps for a {} byte body",
            bomb.len()
        );
        // `<a>` is not `<Health>`; then the nesting ends the read.
        assert_eq!(
            ids(&report),
            [id::health::XML_ROOT, id::health::XML_TOO_DEEP]
        );
        assert!(report.has_errors() && report.state.is_none());
        assert!(
            report.findings[1]
                .message
                .contains(&format!("deeper than {XML_MAX_DEPTH}")),
            "{}",
            report.findings[1].message
        );
    }

    /// The real documents nest 7 deep with 12 elements (testdata/vectors); the caps leave room
    /// and refuse the rest with a finding, never by reading on.
    #[test]
    fn xml_depth_and_element_caps_are_findings() {
        let at_cap = format!(
            "{}{}",
            "<Health>".repeat(XML_MAX_DEPTH),
            "</Health>".repeat(XML_MAX_DEPTH)
        );
        assert!(!ids(&parse_xml(at_cap.as_bytes(), None)).contains(&id::health::XML_TOO_DEEP));
        let wide = xml(&format!(
            "<State>Ready</State>{}",
            "<x/>".repeat(XML_MAX_ELEMENTS)
        ));
        let report = parse_xml(wide.as_bytes(), Some(&served()));
        assert_eq!(ids(&report), [id::health::XML_TOO_MANY_ELEMENTS]);
        assert!(report.state.is_none());
        let (small, _) = xml_steps(&"<Health>x</Health>".repeat(100));
        let (large, _) = xml_steps(&"<Health>x</Health>".repeat(400));
        assert!(large <= 5 * small.max(1), "{large} against {small}");
    }

    /// A finding per repeated element or entity is listed at most 16 times, the rest counted.
    #[test]
    fn repeated_xml_findings_are_listed_sixteen_times_then_counted() {
        let body = xml(&format!(
            "<State>NotReady</State><Details><SubStatus>ProvisioningFailed</SubStatus><Description>{}</Description></Details>",
            "&bogus;".repeat(1000)
        ));
        let report = parse_xml(body.as_bytes(), Some(&served()));
        let unknown = ids(&report)
            .iter()
            .filter(|i| **i == id::health::XML_UNKNOWN_ENTITY)
            .count();
        assert_eq!(unknown, crate::bounds::MAX_FINDINGS_OF_A_KIND);
        let summary = report.findings.last().unwrap();
        assert_eq!(summary.id, id::health::REPEATED);
        assert!(
            summary.message.starts_with("984 more"),
            "{}",
            summary.message
        );
        let dupes = xml(&"<State>Ready</State>".repeat(100));
        let report = parse_xml(dupes.as_bytes(), Some(&served()));
        assert_eq!(
            report.findings.len(),
            crate::bounds::MAX_FINDINGS_OF_A_KIND + 1
        );
    }

    /// A JSON body with thousands of unknown keys lists sixteen.
    #[test]
    fn repeated_json_findings_are_listed_sixteen_times_then_counted() {
        let keys: String = (0..5000).map(|i| format!("\"k{i}\":0,")).collect();
        let report = parse_json(format!("{{{keys}\"state\":\"Ready\"}}").as_bytes());
        assert_eq!(report.state, Some(HealthState::Ready));
        assert_eq!(
            report.findings.len(),
            crate::bounds::MAX_FINDINGS_OF_A_KIND + 1
        );
        assert_eq!(report.findings.last().unwrap().id, id::health::REPEATED);
    }

    fn served() -> ServedIds {
        ServedIds {
            incarnation: "7".into(),
            container_id: "c".into(),
            instance_id: "i".into(),
        }
    }

    fn ids(report: &HealthReport) -> Vec<&str> {
        report.findings.iter().map(|f| f.id.as_str()).collect()
    }

    fn xml(state_block: &str) -> String {
        format!(
            "<Health><GoalStateIncarnation>7</GoalStateIncarnation><Container><ContainerId>c</ContainerId><RoleInstanceList><Role><InstanceId>i</InstanceId><Health>{state_block}</Health></Role></RoleInstanceList></Container></Health>"
        )
    }

    #[test]
    fn compact_xml_without_prolog_or_namespaces() {
        let report = parse_xml(xml("<State>Ready</State>").as_bytes(), Some(&served()));
        assert_eq!(report.state, Some(HealthState::Ready));
        assert_eq!(report.goal_state_incarnation.as_deref(), Some("7"));
        assert_eq!(report.container_id.as_deref(), Some("c"));
        assert_eq!(report.instance_id.as_deref(), Some("i"));
        assert!(report.findings.is_empty(), "{:?}", report.findings);
    }

    #[test]
    fn prefixed_namespace_and_cdata_and_char_refs() {
        let body = "<?xml version=\"1.0\"?><h:Health xmlns:h=\"urn:x\"><h:GoalStateIncarnation>7</h:GoalStateIncarnation><h:Container><h:ContainerId>c</h:ContainerId><h:RoleInstanceList><h:Role><h:InstanceId>i</h:InstanceId><h:Health><h:State>NotReady</h:State><h:Details><h:SubStatus>ProvisioningFailed</h:SubStatus><h:Description>a&#38;b<![CDATA[<x>]]>&quot;</h:Description></h:Details></h:Health></h:Role></h:RoleInstanceList></h:Container></h:Health>";
        let report = parse_xml(body.as_bytes(), Some(&served()));
        assert_eq!(report.description.as_deref(), Some("a&b<x>\""));
        assert!(report.findings.is_empty(), "{:?}", report.findings);
    }

    #[test]
    fn mismatched_ids_are_warnings() {
        let body = xml("<State>Ready</State>").replace(">7<", ">1<");
        let report = parse_xml(body.as_bytes(), Some(&served()));
        assert_eq!(ids(&report), ["health.incarnation-mismatch"]);
        assert!(!report.has_errors());
        assert_eq!(report.state, Some(HealthState::Ready));
    }

    #[test]
    fn state_and_details_rules() {
        let report = parse_xml(
            xml("<State>Ready</State><Details><SubStatus>ProvisioningFailed</SubStatus></Details>")
                .as_bytes(),
            None,
        );
        assert_eq!(ids(&report), ["health.ready-with-details"]);
        let report = parse_xml(xml("<State>NotReady</State>").as_bytes(), None);
        assert_eq!(ids(&report), ["health.notready.missing-substatus"]);
        let report = parse_xml(xml("<State>Started</State>").as_bytes(), None);
        assert_eq!(ids(&report), ["health.state.unknown"]);
        let report = parse_xml(
            xml("<State>NotReady</State><Details><SubStatus>Starting</SubStatus></Details>")
                .as_bytes(),
            None,
        );
        assert_eq!(ids(&report), ["health.substatus.unknown"]);
    }

    #[test]
    fn unknown_spellings_are_kept_verbatim_and_serialized_as_received() {
        let report = parse_xml(xml("<State>ready</State>").as_bytes(), None);
        assert_eq!(report.state, Some(HealthState::from("ready")));
        assert_eq!(ids(&report), ["health.state.unknown"]);
        let report =
            parse_json(br#"{"state":"NotReady","details":{"subStatus":"provisioningfailed"}}"#);
        assert_eq!(report.state, Some(HealthState::NotReady));
        assert_eq!(
            report.substatus,
            Some(SubStatus::from("provisioningfailed"))
        );
        assert_eq!(ids(&report), ["health.substatus.unknown"]);
        // The JSON shape is the received string, known or not, and reads back equal.
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["state"], "NotReady");
        assert_eq!(json["substatus"], "provisioningfailed");
        let back: HealthReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
        // A known spelling is its variant however it was built.
        assert!(matches!(
            HealthState::from("Ready".to_owned()),
            HealthState::Ready
        ));
        assert_eq!(HealthState::from("Ready".to_string()), HealthState::Ready);
        assert!(!HealthState::from("Ready ").is_known());
        assert_eq!(SubStatus::from("Provisioning"), SubStatus::Provisioning);
        assert!(SubStatus::ProvisioningFailed.is_known());
        for name in KNOWN_STATES {
            assert_eq!(HealthState::from(name).as_str(), name);
            assert!(!matches!(HealthState::from(name), HealthState::Other(_)));
        }
        for name in KNOWN_SUBSTATUSES {
            assert!(!matches!(SubStatus::from(name), SubStatus::Other(_)));
        }
    }

    #[test]
    fn element_names_are_case_sensitive() {
        let report = parse_xml(
            xml("<State>NotReady</State><Details><Substatus>ProvisioningFailed</Substatus></Details>")
                .as_bytes(),
            None,
        );
        assert_eq!(report.substatus, None);
        assert_eq!(
            ids(&report),
            [
                "health.xml.element-case",
                "health.notready.missing-substatus"
            ]
        );
        assert!(report.findings[0].message.contains("expected <SubStatus>"));
    }

    #[test]
    fn role_instance_instead_of_role() {
        let body = xml("<State>Ready</State>")
            .replace("<Role>", "<RoleInstance>")
            .replace("</Role>", "</RoleInstance>");
        let report = parse_xml(body.as_bytes(), None);
        assert_eq!(
            ids(&report),
            [
                "health.xml.role-instance",
                "health.missing.instance-id",
                "health.missing.state"
            ]
        );
    }

    #[test]
    fn invalid_xml_is_one_error_finding() {
        for body in [
            &b"<Health><State>Ready</Health>"[..],
            b"<Health>",
            b"not xml",
            b"<Health/><Health/>",
        ] {
            let report = parse_xml(body, None);
            assert_eq!(
                ids(&report),
                ["health.xml.invalid"],
                "{:?}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(report.state, None);
        }
        let report = parse_xml(b"  \n", None);
        assert_eq!(ids(&report), ["health.body.empty"]);
    }

    #[test]
    fn latin1_body_is_read_lossily_with_a_finding() {
        let mut body = xml("<State>NotReady</State><Details><SubStatus>ProvisioningFailed</SubStatus><Description>caf\u{e9}</Description></Details>").into_bytes();
        let at = body.iter().position(|&b| b == 0xc3).unwrap();
        body.splice(at..at + 2, [0xe9]);
        let report = parse_xml(&body, None);
        assert_eq!(ids(&report), [id::health::BODY_INVALID_UTF8]);
        assert_eq!(report.description.as_deref(), Some("caf\u{fffd}"));
    }

    #[test]
    fn encoded_description_is_parsed_and_findings_prefixed() {
        let description = "result=error|agent=Cloud-Init/26.2|vm_id=v|timestamp=2026-11-29T14:30:57+00:00|documentation_url=https://aka.ms/linuxprovisioningerror";
        let body = format!(
            "{{\"details\":{{\"description\":\"{description}\",\"subStatus\":\"ProvisioningFailed\"}},\"state\":\"NotReady\"}}"
        );
        let report = parse_json(body.as_bytes());
        let encoded = report.encoded.as_ref().unwrap();
        assert_eq!(encoded.get("agent"), Some("Cloud-Init/26.2"));
        assert_eq!(ids(&report), ["health.description.report.missing.reason"]);
    }

    #[test]
    fn json_shapes() {
        let report = parse_json(br#"{"state":"Ready"}"#);
        assert_eq!(report.state, Some(HealthState::Ready));
        assert!(report.findings.is_empty());

        let report = parse_json(
            br#"{"details":{"description":"Provisioning is still in progress for vm_id=x.","subStatus":"Provisioning"},"state":"NotReady"}"#,
        );
        assert_eq!(report.substatus, Some(SubStatus::Provisioning));
        assert!(report.findings.is_empty(), "{:?}", report.findings);

        let report =
            parse_json(br#"{"state":"NotReady","details":{"substatus":"ProvisioningFailed"}}"#);
        assert_eq!(
            ids(&report),
            [
                "health.json.unknown-key",
                "health.notready.missing-substatus"
            ]
        );
        assert!(
            report.findings[0]
                .message
                .contains("did you mean `details.subStatus`")
        );

        assert_eq!(ids(&parse_json(b"[1]")), ["health.json.not-object"]);
        assert_eq!(ids(&parse_json(b"{\"state\":")), ["health.json.invalid"]);
        assert_eq!(
            ids(&parse_json(br#"{"state":1}"#)),
            ["health.json.type.state", "health.missing.state"]
        );
        assert_eq!(ids(&parse_json(b"")), ["health.body.empty"]);
    }

    #[test]
    fn description_over_platform_cap() {
        let description = "x".repeat(DESCRIPTION_PLATFORM_CAP + 1);
        let body = serde_json::json!({"state": "NotReady", "details": {"subStatus": "ProvisioningFailed", "description": description}});
        let report = parse_json(body.to_string().as_bytes());
        assert_eq!(ids(&report), ["health.description.over-platform-limit"]);
        let body = serde_json::json!({"state": "NotReady", "details": {"subStatus": "ProvisioningFailed", "description": "x".repeat(DESCRIPTION_PLATFORM_CAP)}});
        assert!(parse_json(body.to_string().as_bytes()).findings.is_empty());
    }
}
