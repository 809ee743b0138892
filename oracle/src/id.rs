//! Every finding id the oracle mints, and the classes of ids the conformance checks steer by.
//!
//! The ids are the serialized vocabulary (journal, results.json, snapshots): each is spelled
//! once, here. The mint sites use these constants and [`Family`] constructors; the checks ask
//! the classification methods below (on [`Finding`]), which match ids exactly, so renaming an
//! id here renames it on both sides. The tests at the end produce every id a class names from
//! a real input, so a class cannot name an id nothing mints.

use crate::finding::Finding;

/// A family of ids: a fixed stem plus a key (`report.missing.` + `vm_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family(&'static str);

impl Family {
    /// The id of this family for `key`.
    pub fn id(self, key: &str) -> String {
        format!("{}{key}", self.0)
    }

    /// The fixed stem (`report.missing.`): the kind [`crate::bounds`] counts a family's
    /// findings under.
    pub const fn stem(self) -> &'static str {
        self.0
    }

    /// The key, when `id` is of this family (the exact inverse of [`Family::id`]).
    pub fn key(self, id: &str) -> Option<&str> {
        id.strip_prefix(self.0).filter(|k| !k.is_empty())
    }
}

/// Encoded-report findings (`oracle::encoded`, docs/protocol.md §6).
pub mod report {
    use super::Family;

    /// The input is empty.
    pub const EMPTY: &str = "report.empty";
    /// Text after a field's closing quote.
    pub const SYNTAX_AFTER_CLOSING_QUOTE: &str = "report.syntax.after-closing-quote";
    /// A field without `=`.
    pub const SYNTAX_MISSING_EQUALS: &str = "report.syntax.missing-equals";
    /// An unterminated quote or a cut inside a key: the report was cut.
    pub const TRUNCATED: &str = "report.truncated";
    /// The other dialect's quote character.
    pub const QUOTING_WRONG_QUOTE: &str = "report.quoting.wrong-quote";
    /// Quotes the dialect would not write.
    pub const QUOTING_UNNEEDED: &str = "report.quoting.unneeded";
    /// A field that needed quotes has none.
    pub const QUOTING_MISSING: &str = "report.quoting.missing";
    /// azure-init's KVP value lost its opening quote.
    pub const QUOTE_LOST_OPENING: &str = "report.quote.lost-opening";
    /// The report's dialect is not the one its producer is declared to write.
    pub const DIALECT_DECLARED: &str = "report.dialect.declared";
    /// Neither `agent=` nor a quoted field tells the dialect.
    pub const DIALECT_UNKNOWN: &str = "report.dialect.unknown";
    /// A trailing CR or LF.
    pub const TRAILING_NEWLINE: &str = "report.trailing-newline";
    /// Trailing whitespace cloud-init would have stripped.
    pub const TRAILING_WHITESPACE: &str = "report.trailing-whitespace";
    /// Exactly a known truncation limit long.
    pub const LENGTH_AT_KNOWN_LIMIT: &str = "report.length.at-known-limit";
    /// A key that is not an identifier.
    pub const KEY_INVALID: &str = "report.key.invalid";
    /// `result` is neither `error` nor `success`.
    pub const RESULT_UNKNOWN: &str = "report.result.unknown";
    /// `reason` is empty.
    pub const REASON_EMPTY: &str = "report.reason.empty";
    /// `documentation_url` is not the platform's.
    pub const DOCUMENTATION_URL_VALUE: &str = "report.documentation_url.value";
    /// `agent` names neither Cloud-Init nor Azure-Init.
    pub const AGENT_UNKNOWN: &str = "report.agent.unknown";
    /// `pps_type` is not `None`.
    pub const PPS_TYPE_VALUE: &str = "report.pps_type.value";
    /// `vm_id` is empty.
    pub const VM_ID_EMPTY: &str = "report.vm_id.empty";
    /// `vm_id` is `None`.
    pub const VM_ID_NONE: &str = "report.vm_id.none";
    /// `vm_id` says the agent could not read it.
    pub const VM_ID_UNREADABLE: &str = "report.vm_id.unreadable";
    /// `timestamp` does not parse.
    pub const TIMESTAMP_INVALID: &str = "report.timestamp.invalid";
    /// `timestamp` ends in `Z`.
    pub const TIMESTAMP_ZULU: &str = "report.timestamp.zulu";
    /// `timestamp` has an offset other than UTC.
    pub const TIMESTAMP_OFFSET: &str = "report.timestamp.offset";
    /// `timestamp` is not in the format its producer writes.
    pub const TIMESTAMP_FORMAT: &str = "report.timestamp.format";
    /// Findings of one kind past [`crate::bounds::MAX_FINDINGS_OF_A_KIND`], counted.
    pub const REPEATED: &str = "report.repeated";

    /// A required field is missing (`report.missing.<key>`).
    pub const MISSING: Family = Family("report.missing.");
    /// A field is out of place (`report.order.<key>`).
    pub const ORDER: Family = Family("report.order.");
    /// A field the layout has no place for (`report.unexpected.<key>`).
    pub const UNEXPECTED: Family = Family("report.unexpected.");
    /// A key given twice (`report.duplicate.<key>`).
    pub const DUPLICATE: Family = Family("report.duplicate.");

    /// Every fixed id.
    pub const ALL: &[&str] = &[
        EMPTY,
        SYNTAX_AFTER_CLOSING_QUOTE,
        SYNTAX_MISSING_EQUALS,
        TRUNCATED,
        QUOTING_WRONG_QUOTE,
        QUOTING_UNNEEDED,
        QUOTING_MISSING,
        QUOTE_LOST_OPENING,
        DIALECT_DECLARED,
        DIALECT_UNKNOWN,
        TRAILING_NEWLINE,
        TRAILING_WHITESPACE,
        LENGTH_AT_KNOWN_LIMIT,
        KEY_INVALID,
        RESULT_UNKNOWN,
        REASON_EMPTY,
        DOCUMENTATION_URL_VALUE,
        AGENT_UNKNOWN,
        PPS_TYPE_VALUE,
        VM_ID_EMPTY,
        VM_ID_NONE,
        VM_ID_UNREADABLE,
        TIMESTAMP_INVALID,
        TIMESTAMP_ZULU,
        TIMESTAMP_OFFSET,
        TIMESTAMP_FORMAT,
        REPEATED,
    ];

    /// Every family.
    pub const FAMILIES: &[Family] = &[MISSING, ORDER, UNEXPECTED, DUPLICATE];

    /// Findings about one field's value, with that field's key. A report cut through that
    /// field (its last) has these findings because of the cut.
    pub const VALUE_OF: &[(&str, &str)] = &[
        (RESULT_UNKNOWN, "result"),
        (REASON_EMPTY, "reason"),
        (DOCUMENTATION_URL_VALUE, "documentation_url"),
        (AGENT_UNKNOWN, "agent"),
        (PPS_TYPE_VALUE, "pps_type"),
        (VM_ID_EMPTY, "vm_id"),
        (VM_ID_NONE, "vm_id"),
        (VM_ID_UNREADABLE, "vm_id"),
        (TIMESTAMP_INVALID, "timestamp"),
        (TIMESTAMP_ZULU, "timestamp"),
        (TIMESTAMP_OFFSET, "timestamp"),
        (TIMESTAMP_FORMAT, "timestamp"),
    ];

    /// Findings about the report's style, not its content: an agent with a name of its own
    /// has them without deviating.
    pub const STYLE_ONLY: &[&str] = &[AGENT_UNKNOWN, DIALECT_UNKNOWN];

    /// True when `id` is one the encoded-report parser mints.
    pub fn is_known(id: &str) -> bool {
        ALL.contains(&id) || FAMILIES.iter().any(|f| f.key(id).is_some())
    }
}

/// Health-document findings (`oracle::health`, docs/protocol.md §4, §5).
pub mod health {
    use super::Family;

    /// An empty body.
    pub const BODY_EMPTY: &str = "health.body.empty";
    /// A body that is not UTF-8.
    pub const BODY_INVALID_UTF8: &str = "health.body.invalid-utf8";
    /// Not well-formed XML.
    pub const XML_INVALID: &str = "health.xml.invalid";
    /// An entity XML does not predefine.
    pub const XML_UNKNOWN_ENTITY: &str = "health.xml.unknown-entity";
    /// A `<Role>` without its `<InstanceId>` first.
    pub const XML_ROLE_INSTANCE: &str = "health.xml.role-instance";
    /// The root element is not `<Health>`.
    pub const XML_ROOT: &str = "health.xml.root";
    /// An element spelled in the wrong case.
    pub const XML_ELEMENT_CASE: &str = "health.xml.element-case";
    /// More than one `<Role>`.
    pub const XML_MULTIPLE_ROLES: &str = "health.xml.multiple-roles";
    /// Elements nested deeper than [`crate::health::XML_MAX_DEPTH`]: not read further.
    pub const XML_TOO_DEEP: &str = "health.xml.too-deep";
    /// More than [`crate::health::XML_MAX_ELEMENTS`] elements: not read further.
    pub const XML_TOO_MANY_ELEMENTS: &str = "health.xml.too-many-elements";
    /// Findings of one kind past [`crate::bounds::MAX_FINDINGS_OF_A_KIND`], counted.
    pub const REPEATED: &str = "health.repeated";
    /// `<GoalStateIncarnation>` differs from the served goal state's.
    pub const INCARNATION_MISMATCH: &str = "health.incarnation-mismatch";
    /// `<ContainerId>` differs from the served goal state's.
    pub const CONTAINER_ID_MISMATCH: &str = "health.container-id-mismatch";
    /// `<InstanceId>` differs from the served goal state's.
    pub const INSTANCE_ID_MISMATCH: &str = "health.instance-id-mismatch";
    /// The JSON body does not parse.
    pub const JSON_INVALID: &str = "health.json.invalid";
    /// The JSON body is not an object.
    pub const JSON_NOT_OBJECT: &str = "health.json.not-object";
    /// A JSON key the platform does not know.
    pub const JSON_UNKNOWN_KEY: &str = "health.json.unknown-key";
    /// `details` is not an object.
    pub const JSON_TYPE_DETAILS: &str = "health.json.type.details";
    /// No state.
    pub const MISSING_STATE: &str = "health.missing.state";
    /// Ready with Details.
    pub const READY_WITH_DETAILS: &str = "health.ready-with-details";
    /// NotReady without a substatus.
    pub const NOTREADY_MISSING_SUBSTATUS: &str = "health.notready.missing-substatus";
    /// A state other than Ready and NotReady.
    pub const STATE_UNKNOWN: &str = "health.state.unknown";
    /// A substatus no agent sends.
    pub const SUBSTATUS_UNKNOWN: &str = "health.substatus.unknown";
    /// A description over the platform's 4096 bytes.
    pub const DESCRIPTION_OVER_PLATFORM_LIMIT: &str = "health.description.over-platform-limit";
    /// A WALinuxAgent-style exception text.
    pub const DESCRIPTION_EXCEPTION: &str = "health.description.exception";
    /// Exception text over WALinuxAgent's trim.
    pub const DESCRIPTION_OVER_WALA_TRIM: &str = "health.description.over-wala-trim";
    /// A description that starts like an encoded report but is none.
    pub const DESCRIPTION_REPORT_INVALID: &str = "health.description.report.invalid";

    /// Whitespace around a leaf's text (`health.xml.whitespace.<leaf>`).
    pub const XML_WHITESPACE: Family = Family("health.xml.whitespace.");
    /// A leaf given twice (`health.xml.duplicate.<leaf>`).
    pub const XML_DUPLICATE: Family = Family("health.xml.duplicate.");
    /// A required leaf missing (`health.missing.<leaf>`; `state` is [`MISSING_STATE`]).
    pub const MISSING: Family = Family("health.missing.");
    /// A JSON value of the wrong type (`health.json.type.<key>`).
    pub const JSON_TYPE: Family = Family("health.json.type.");

    /// The encoded report inside a description: its findings' ids are this stem plus their
    /// own (`health.description.report.missing.reason`).
    pub(crate) const DESCRIPTION_STEM: &str = "health.description.";

    /// Every fixed id.
    pub const ALL: &[&str] = &[
        BODY_EMPTY,
        BODY_INVALID_UTF8,
        XML_INVALID,
        XML_UNKNOWN_ENTITY,
        XML_ROLE_INSTANCE,
        XML_ROOT,
        XML_ELEMENT_CASE,
        XML_MULTIPLE_ROLES,
        XML_TOO_DEEP,
        XML_TOO_MANY_ELEMENTS,
        REPEATED,
        INCARNATION_MISMATCH,
        CONTAINER_ID_MISMATCH,
        INSTANCE_ID_MISMATCH,
        JSON_INVALID,
        JSON_NOT_OBJECT,
        JSON_UNKNOWN_KEY,
        JSON_TYPE_DETAILS,
        MISSING_STATE,
        READY_WITH_DETAILS,
        NOTREADY_MISSING_SUBSTATUS,
        STATE_UNKNOWN,
        SUBSTATUS_UNKNOWN,
        DESCRIPTION_OVER_PLATFORM_LIMIT,
        DESCRIPTION_EXCEPTION,
        DESCRIPTION_OVER_WALA_TRIM,
        DESCRIPTION_REPORT_INVALID,
    ];

    /// Every family.
    pub const FAMILIES: &[Family] = &[XML_WHITESPACE, XML_DUPLICATE, MISSING, JSON_TYPE];

    /// The ids that say the report echoes another goal state than the one served (§4.3).
    pub const GOAL_STATE_MISMATCH: &[&str] = &[
        INCARNATION_MISMATCH,
        CONTAINER_ID_MISMATCH,
        INSTANCE_ID_MISMATCH,
    ];

    /// True when `id` is one the health parser mints about the document itself.
    pub fn is_known(id: &str) -> bool {
        ALL.contains(&id) || FAMILIES.iter().any(|f| f.key(id).is_some())
    }
}

/// KVP pool findings (`oracle::kvp`, docs/protocol.md §7).
pub mod kvp {
    /// The pool is not a whole number of records.
    pub const POOL_SIZE: &str = "kvp.pool.size";
    /// A record with an empty key.
    pub const KEY_EMPTY: &str = "kvp.key.empty";
    /// The key fills its field with no NUL.
    pub const KEY_FILLS_FIELD: &str = "kvp.key.fills-field";
    /// Non-NUL bytes after the key's NUL.
    pub const KEY_PADDING: &str = "kvp.key.padding";
    /// The key is not UTF-8.
    pub const KEY_INVALID_UTF8: &str = "kvp.key.invalid-utf8";
    /// The key is longer than the host reads.
    pub const KEY_OVER_HOST_LIMIT: &str = "kvp.key.over-host-limit";
    /// The value fills its field with no NUL.
    pub const VALUE_FILLS_FIELD: &str = "kvp.value.fills-field";
    /// Non-NUL bytes after the value's NUL.
    pub const VALUE_PADDING: &str = "kvp.value.padding";
    /// The value is not UTF-8.
    pub const VALUE_INVALID_UTF8: &str = "kvp.value.invalid-utf8";
    /// The value is longer than the host reads.
    pub const VALUE_OVER_HOST_LIMIT: &str = "kvp.value.over-host-limit";
    /// `PROVISIONING_REPORT` written as several records under its one key: the host keeps one.
    pub const PROVISIONING_REPORT_SPLIT: &str = "kvp.provisioning-report.split";
    /// More than one `PROVISIONING_REPORT`; the host keeps one, which one is not documented.
    pub const PROVISIONING_REPORT_MULTIPLE: &str = "kvp.provisioning-report.multiple";
    /// `PROVISIONING_REPORT` is not an encoded report.
    pub const PROVISIONING_REPORT_INVALID: &str = "kvp.provisioning-report.invalid";
    /// Several records under one key: the host keeps one of them.
    pub const KEY_DUPLICATE: &str = "kvp.key.duplicate";
    /// A value cut inside a UTF-8 character, continued in the next chunk.
    pub const VALUE_SPLIT_CHARACTER: &str = "kvp.value.split-character";
    /// A `<key>|<index>` chunked event with a missing or repeated index.
    pub const CHUNK_GAP: &str = "kvp.chunk.gap";
    /// More pool findings of one kind than are listed.
    pub const REPEATED: &str = "kvp.repeated";
    /// A split event's key suffix disagrees with its `msg_i`.
    pub const SPLIT_INDEX_MISMATCH: &str = "kvp.split.index-mismatch";
    /// A split event's `msg_i` values have a gap.
    pub const SPLIT_GAP: &str = "kvp.split.gap";
    /// A rebuilt split event is not a JSON string body.
    pub const SPLIT_INVALID_JSON: &str = "kvp.split.invalid-json";

    /// Every id.
    pub const ALL: &[&str] = &[
        POOL_SIZE,
        KEY_EMPTY,
        KEY_FILLS_FIELD,
        KEY_PADDING,
        KEY_INVALID_UTF8,
        KEY_OVER_HOST_LIMIT,
        VALUE_FILLS_FIELD,
        VALUE_PADDING,
        VALUE_INVALID_UTF8,
        VALUE_OVER_HOST_LIMIT,
        PROVISIONING_REPORT_SPLIT,
        PROVISIONING_REPORT_MULTIPLE,
        PROVISIONING_REPORT_INVALID,
        KEY_DUPLICATE,
        VALUE_SPLIT_CHARACTER,
        CHUNK_GAP,
        REPEATED,
        SPLIT_INDEX_MISMATCH,
        SPLIT_GAP,
        SPLIT_INVALID_JSON,
    ];
}

/// Findings about a health report's description length (`report.limit` judges them, the
/// other report checks leave them): the platform's cap, and an encoded report in the
/// description that is exactly a known truncation limit long.
const LENGTH: &[&str] = &[health::DESCRIPTION_OVER_PLATFORM_LIMIT];
const LENGTH_WITHIN_DESCRIPTION: &[&str] = &[report::LENGTH_AT_KNOWN_LIMIT];

impl Finding {
    /// The same finding as one about the encoded report inside a health description.
    pub fn in_description(self) -> Finding {
        Finding {
            id: format!("{}{}", health::DESCRIPTION_STEM, self.id),
            ..self
        }
    }

    /// True for a finding of the encoded report inside a health description
    /// ([`Finding::in_description`]).
    pub fn is_within_description(&self) -> bool {
        self.id
            .strip_prefix(health::DESCRIPTION_STEM)
            .is_some_and(report::is_known)
    }

    /// The id within the document the finding is about: an encoded report's own id for a
    /// finding of the report inside a health description, else the id.
    pub fn local_id(&self) -> &str {
        match self.id.strip_prefix(health::DESCRIPTION_STEM) {
            Some(inner) if report::is_known(inner) => inner,
            _ => &self.id,
        }
    }

    /// A finding about the description's length (see `LENGTH`).
    pub fn is_length(&self) -> bool {
        if self.is_within_description() {
            LENGTH_WITHIN_DESCRIPTION.contains(&self.local_id())
        } else {
            LENGTH.contains(&self.id.as_str())
        }
    }

    /// A health report echoing another goal state than the one served.
    pub fn is_goal_state_mismatch(&self) -> bool {
        health::GOAL_STATE_MISMATCH.contains(&self.id.as_str())
    }

    /// An encoded-report finding about style only ([`report::STYLE_ONLY`]), in a description
    /// or not.
    pub fn is_style_only(&self) -> bool {
        report::STYLE_ONLY.contains(&self.local_id())
    }

    /// An encoded-report finding a cut report has because of the cut when `last_key` is the
    /// field the cut went through: a missing or misplaced field, or that field's value.
    pub fn is_cut_by_trim(&self, last_key: Option<&str>) -> bool {
        let id = self.local_id();
        report::MISSING.key(id).is_some()
            || report::ORDER.key(id).is_some()
            || report::VALUE_OF
                .iter()
                .any(|(v, key)| *v == id && Some(*key) == last_key)
    }
}

#[cfg(test)]
mod tests {
    //! Every id a class names is minted by some input here: a class naming an id nothing
    //! produces (a rename on one side) fails, instead of a check going blind.

    use super::*;
    use crate::encoded::{self, Mode};
    use crate::health::{self as parse_health, ServedIds};

    fn encoded_ids(input: &str) -> Vec<String> {
        encoded::parse(input, Mode::Lenient)
            .unwrap_or_else(|e| panic!("{input}: {e}"))
            .findings
            .into_iter()
            .map(|f| f.id)
            .collect()
    }

    fn served() -> ServedIds {
        ServedIds {
            incarnation: "7".into(),
            container_id: "c".into(),
            instance_id: "i".into(),
        }
    }

    fn xml(incarnation: &str, container: &str, instance: &str, description: &str) -> Vec<u8> {
        format!(
            "<Health><GoalStateIncarnation>{incarnation}</GoalStateIncarnation><Container><ContainerId>{container}</ContainerId><RoleInstanceList><Role><InstanceId>{instance}</InstanceId><Health><State>NotReady</State><Details><SubStatus>ProvisioningFailed</SubStatus><Description>{description}</Description></Details></Health></Role></RoleInstanceList></Container></Health>"
        )
        .into_bytes()
    }

    fn health_findings(body: &[u8]) -> Vec<Finding> {
        parse_health::parse_xml(body, Some(&served())).findings
    }

    const GOOD: &str = "result=error|reason=x|agent=Cloud-Init/25.1|vm_id=v|timestamp=2025-01-01T00:00:00+00:00|documentation_url=https://aka.ms/linuxprovisioningerror";

    #[test]
    fn every_length_id_is_minted_and_classified() {
        let long = format!("result=error|reason={}", "x".repeat(5000));
        let f = health_findings(&xml("7", "c", "i", &long));
        let over = f
            .iter()
            .find(|f| f.is_length() && !f.is_within_description());
        assert_eq!(
            over.map(|f| f.id.as_str()),
            Some(health::DESCRIPTION_OVER_PLATFORM_LIMIT),
            "{f:?}"
        );
        // 512 characters: the health description limit of §6.5 step 7.
        let mut at_limit = GOOD.to_owned();
        at_limit.insert_str("result=error|reason=".len(), &"y".repeat(512 - GOOD.len()));
        assert_eq!(at_limit.chars().count(), 512);
        let f = health_findings(&xml("7", "c", "i", &at_limit));
        let within: Vec<&str> = f
            .iter()
            .filter(|f| f.is_length())
            .map(Finding::local_id)
            .collect();
        assert_eq!(within, LENGTH_WITHIN_DESCRIPTION, "{f:?}");
        for id in LENGTH.iter().chain(LENGTH_WITHIN_DESCRIPTION) {
            assert!(health::is_known(id) || report::is_known(id), "{id}");
        }
        // The same id outside a description is not about the description's length.
        let bare = Finding::info(report::LENGTH_AT_KNOWN_LIMIT, "x");
        assert!(!bare.is_length());
    }

    /// Keys an agent chooses end up in ids (`report.unexpected.<key>`, `report.duplicate.<key>`):
    /// none of them makes a finding look like a length, mismatch or cut finding (the substring
    /// rules before issue 14 took `|size=1|size=2` for a length finding).
    #[test]
    fn keys_an_agent_chooses_do_not_change_a_findings_class() {
        for key in [
            "size", "length", "limit", "too-long", "mismatch", "missing", "order",
        ] {
            let input = format!("{GOOD}|{key}=1|{key}=2");
            let f = health_findings(&xml("7", "c", "i", &input));
            let keyed: Vec<&Finding> = f
                .iter()
                .filter(|f| f.id.ends_with(&format!(".{key}")))
                .collect();
            assert!(!keyed.is_empty(), "{key}: {f:?}");
            for finding in keyed {
                assert!(!finding.is_length(), "{key}: {finding:?}");
                assert!(!finding.is_goal_state_mismatch(), "{key}: {finding:?}");
                // As the last key of a cut report, only that field's value findings are the
                // cut's; an unexpected or duplicate key named like a family is not.
                assert!(!finding.is_cut_by_trim(Some(key)), "{key}: {finding:?}");
            }
        }
    }

    #[test]
    fn every_goal_state_mismatch_id_is_minted_and_classified() {
        let f = health_findings(&xml("1", "d", "j", GOOD));
        let mut got: Vec<&str> = f
            .iter()
            .filter(|f| f.is_goal_state_mismatch())
            .map(|f| f.id.as_str())
            .collect();
        got.sort_unstable();
        let mut want = health::GOAL_STATE_MISMATCH.to_vec();
        want.sort_unstable();
        assert_eq!(got, want, "{f:?}");
        // Nothing else is a mismatch.
        assert!(f.iter().filter(|f| !f.is_goal_state_mismatch()).count() == f.len() - 3);
    }

    #[test]
    fn every_style_only_id_is_minted_in_and_out_of_a_description() {
        let agent = GOOD.replace("Cloud-Init/25.1", "mine/1");
        assert!(encoded_ids(&agent).contains(&report::AGENT_UNKNOWN.to_owned()));
        let no_dialect = "result=success|agent=mine/1";
        assert!(encoded_ids(no_dialect).contains(&report::DIALECT_UNKNOWN.to_owned()));
        let f = health_findings(&xml("7", "c", "i", &agent));
        // `agent=mine/1` and no quoted field: both, nested.
        let mut style: Vec<&str> = f
            .iter()
            .filter(|f| f.is_style_only())
            .map(Finding::local_id)
            .collect();
        style.sort_unstable();
        let mut want = report::STYLE_ONLY.to_vec();
        want.sort_unstable();
        assert_eq!(style, want, "{f:?}");
        assert!(
            f.iter()
                .all(|f| !f.is_style_only() || f.is_within_description())
        );
        for id in report::STYLE_ONLY {
            assert!(report::ALL.contains(id), "{id}");
        }
    }

    /// Each value id with its key is produced by a report whose field `key` has a bad value.
    #[test]
    fn every_value_id_is_minted_by_its_field() {
        let cases: &[(&str, &str, &str)] = &[
            (
                report::RESULT_UNKNOWN,
                "result",
                "result=maybe|agent=Cloud-Init/25.1",
            ),
            (
                report::REASON_EMPTY,
                "reason",
                &GOOD.replace("reason=x", "reason="),
            ),
            (
                report::DOCUMENTATION_URL_VALUE,
                "documentation_url",
                &GOOD.replace("https://aka.ms/linuxprovisioningerror", "https://x"),
            ),
            (
                report::AGENT_UNKNOWN,
                "agent",
                &GOOD.replace("Cloud-Init/25.1", "mine/1"),
            ),
            (
                report::PPS_TYPE_VALUE,
                "pps_type",
                "result=error|reason=x|agent=Azure-Init/0.1|pps_type=Savable|vm_id=v|timestamp=2025-01-01T00:00:00+00:00|documentation_url=https://aka.ms/linuxprovisioningerror",
            ),
            (
                report::VM_ID_EMPTY,
                "vm_id",
                &GOOD.replace("vm_id=v", "vm_id="),
            ),
            (
                report::VM_ID_NONE,
                "vm_id",
                &GOOD.replace("vm_id=v", "vm_id=None"),
            ),
            (
                report::VM_ID_UNREADABLE,
                "vm_id",
                &GOOD.replace("vm_id=v", "vm_id=failed to read vm id: x"),
            ),
            (
                report::TIMESTAMP_INVALID,
                "timestamp",
                &GOOD.replace("2025-01-01T00:00:00+00:00", "soon"),
            ),
            (
                report::TIMESTAMP_ZULU,
                "timestamp",
                &GOOD.replace("+00:00", "Z"),
            ),
            (
                report::TIMESTAMP_OFFSET,
                "timestamp",
                &GOOD.replace("+00:00", "+01:00"),
            ),
            (
                report::TIMESTAMP_FORMAT,
                "timestamp",
                &GOOD.replace("+00:00", ""),
            ),
        ];
        let mut covered: Vec<(&str, &str)> = Vec::new();
        for (id, key, input) in cases {
            let ids = encoded_ids(input);
            assert!(ids.iter().any(|i| i == id), "{input}: {ids:?} lacks {id}");
            let f = Finding::warning(*id, "x");
            assert!(f.is_cut_by_trim(Some(key)), "{id}");
            assert!(!f.is_cut_by_trim(Some("other")), "{id}");
            assert!(f.clone().in_description().is_cut_by_trim(Some(key)), "{id}");
            covered.push((id, key));
        }
        assert_eq!(covered, report::VALUE_OF);
    }

    #[test]
    fn missing_and_order_families_are_minted_and_cut() {
        let ids = encoded_ids("result=error|agent=Cloud-Init/25.1|reason=x|vm_id=v");
        let missing = ids.iter().find_map(|i| report::MISSING.key(i));
        let order = ids.iter().find_map(|i| report::ORDER.key(i));
        assert!(missing.is_some() && order.is_some(), "{ids:?}");
        for id in &ids {
            let f = Finding::error(id.as_str(), "x");
            let family = report::MISSING.key(id).is_some() || report::ORDER.key(id).is_some();
            assert_eq!(f.is_cut_by_trim(None), family, "{id}");
        }
    }

    #[test]
    fn nesting_is_exact() {
        let f = Finding::error(report::MISSING.id("reason"), "x").in_description();
        assert_eq!(f.id, "health.description.report.missing.reason");
        assert!(f.is_within_description());
        assert_eq!(f.local_id(), "report.missing.reason");
        // The health document's own description ids are not nested reports.
        for id in [
            health::DESCRIPTION_REPORT_INVALID,
            health::DESCRIPTION_OVER_PLATFORM_LIMIT,
            health::DESCRIPTION_EXCEPTION,
        ] {
            let f = Finding::error(id, "x");
            assert!(!f.is_within_description(), "{id}");
            assert_eq!(f.local_id(), id);
        }
    }

    /// What the parsers produce is in this vocabulary.
    #[test]
    fn minted_ids_are_known() {
        let inputs = [
            GOOD.to_owned(),
            "result=maybe".to_owned(),
            "result=error|reason=\"a|agent=Cloud-Init/25.1".to_owned(),
            format!("{GOOD}|x=1|x=2\n"),
            "result=success|agent=Azure-Init/1|pps_type=None|vm_id=|timestamp=2025-01-01T00:00:00.1+00:00|".to_owned(),
        ];
        for input in &inputs {
            if let Ok(r) = encoded::parse(input, Mode::Lenient) {
                for f in &r.findings {
                    assert!(report::is_known(&f.id), "{input}: {}", f.id);
                }
            }
        }
        for body in [
            xml(
                "1",
                "d",
                "j",
                &format!("result=error|reason={}", "x".repeat(5000)),
            ),
            xml("7", "c", "i", "[ProvisionError] boom"),
            xml("7", "c", "i", "result=error|reason=\"x"),
            b"".to_vec(),
            b"<health/>".to_vec(),
        ] {
            for f in health_findings(&body) {
                assert!(
                    health::is_known(&f.id) || f.is_within_description(),
                    "{}",
                    f.id
                );
            }
        }
        for body in [
            &br#"{"state":"NotReady","details":{"subStatus":"x","description":1},"x":1}"#[..],
            b"[]",
            b"{",
        ] {
            for f in parse_health::parse_json(body).findings {
                assert!(
                    health::is_known(&f.id) || f.is_within_description(),
                    "{}",
                    f.id
                );
            }
        }
    }
}
