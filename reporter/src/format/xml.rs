//! The legacy XML flow's documents (docs/protocol.md §3, §4, §8.1): the Health document the
//! reporter writes, and the versions, goal-state and throttling documents it reads.

use std::borrow::Cow;

use quick_xml::Writer;
use quick_xml::escape::partial_escape;
use quick_xml::events::{BytesDecl, BytesText, Event};
use serde::Deserialize;
use thiserror::Error;

use super::{HealthState, trim_description};

/// The wire protocol version every client asks for (`x-ms-version`).
pub const PROTOCOL_VERSION: &str = "2012-11-30";

const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";
const XSD: &str = "http://www.w3.org/2001/XMLSchema";

/// The ids a health document echoes back from the goal state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalState {
    pub incarnation: String,
    pub container_id: String,
    pub instance_id: String,
}

/// A document the wireserver sent that the reporter cannot use.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum XmlError {
    #[error("malformed {document} XML: {message}")]
    Malformed {
        document: &'static str,
        message: String,
    },
    #[error("{document} XML has no {element}")]
    Missing {
        document: &'static str,
        element: &'static str,
    },
}

/// The Health document for `POST /machine?comp=health`.
///
/// Laid out like afterburn's template (declaration, namespaces, two-space indentation, trailing
/// newline), with a `Details` block for NotReady. Values are escaped for `&`, `<` and `>` only,
/// as cloud-init and WALinuxAgent do, plus CR as `&#13;` so that it survives XML end-of-line
/// normalisation; characters XML 1.0 cannot carry at all (most C0 controls) become U+FFFD,
/// before the description is trimmed to the platform cap.
pub fn health_document(goal_state: &GoalState, state: &HealthState) -> String {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    write_health(&mut writer, goal_state, state).expect("writing XML to a Vec cannot fail");
    let mut document =
        String::from_utf8(writer.into_inner()).expect("the XML writer keeps UTF-8 input UTF-8");
    document.push('\n');
    document
}

fn write_health(
    writer: &mut Writer<Vec<u8>>,
    goal_state: &GoalState,
    state: &HealthState,
) -> std::io::Result<()> {
    writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("utf-8"), None)))?;
    writer
        .create_element("Health")
        .with_attribute(("xmlns:xsi", XSI))
        .with_attribute(("xmlns:xsd", XSD))
        .write_inner_content(|w| {
            text_element(w, "GoalStateIncarnation", &goal_state.incarnation)?;
            w.create_element("Container").write_inner_content(|w| {
                text_element(w, "ContainerId", &goal_state.container_id)?;
                w.create_element("RoleInstanceList")
                    .write_inner_content(|w| {
                        w.create_element("Role").write_inner_content(|w| {
                            text_element(w, "InstanceId", &goal_state.instance_id)?;
                            w.create_element("Health")
                                .write_inner_content(|w| write_state(w, state))?;
                            Ok(())
                        })?;
                        Ok(())
                    })?;
                Ok(())
            })?;
            Ok(())
        })?;
    Ok(())
}

fn write_state(writer: &mut Writer<Vec<u8>>, state: &HealthState) -> std::io::Result<()> {
    match state {
        HealthState::Ready => text_element(writer, "State", "Ready"),
        HealthState::NotReady {
            substatus,
            description,
        } => {
            text_element(writer, "State", "NotReady")?;
            writer.create_element("Details").write_inner_content(|w| {
                text_element(w, "SubStatus", substatus.as_str())?;
                let safe = xml_safe(description);
                text_element(w, "Description", trim_description(&safe))
            })?;
            Ok(())
        }
    }
}

fn text_element(writer: &mut Writer<Vec<u8>>, name: &str, text: &str) -> std::io::Result<()> {
    let mut escaped = partial_escape(xml_safe(text));
    if escaped.contains('\r') {
        // A literal CR would reach the server as LF (XML end-of-line handling).
        escaped = Cow::Owned(escaped.replace('\r', "&#13;"));
    }
    writer
        .create_element(name)
        .write_text_content(BytesText::from_escaped(escaped))?;
    Ok(())
}

/// Replaces characters outside XML 1.0's `Char` production with U+FFFD.
pub fn xml_safe(text: &str) -> Cow<'_, str> {
    fn allowed(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
    }
    if text.chars().all(allowed) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(
            text.chars()
                .map(|c| if allowed(c) { c } else { '\u{FFFD}' })
                .collect(),
        )
    }
}

// --- documents the reporter reads -------------------------------------------------------------

#[derive(Deserialize)]
struct GoalStateDoc {
    #[serde(rename = "Incarnation")]
    incarnation: Option<String>,
    #[serde(rename = "Container")]
    container: Option<ContainerDoc>,
}

#[derive(Deserialize)]
struct ContainerDoc {
    #[serde(rename = "ContainerId")]
    container_id: Option<String>,
    #[serde(rename = "RoleInstanceList")]
    role_instance_list: Option<RoleInstanceListDoc>,
}

#[derive(Deserialize)]
struct RoleInstanceListDoc {
    #[serde(rename = "RoleInstance", default)]
    role_instances: Vec<RoleInstanceDoc>,
}

#[derive(Deserialize)]
struct RoleInstanceDoc {
    #[serde(rename = "InstanceId")]
    instance_id: Option<String>,
}

/// Reads `Incarnation`, `Container/ContainerId` and the first
/// `Container/RoleInstanceList/RoleInstance/InstanceId` from a goal state (§3.1).
pub fn parse_goal_state(body: &str) -> Result<GoalState, XmlError> {
    const DOC: &str = "goal state";
    let doc: GoalStateDoc = quick_xml::de::from_str(body).map_err(|e| XmlError::Malformed {
        document: DOC,
        message: e.to_string(),
    })?;
    let missing = |element| XmlError::Missing {
        document: DOC,
        element,
    };
    let incarnation = non_empty(doc.incarnation).ok_or_else(|| missing("Incarnation"))?;
    let container = doc.container.ok_or_else(|| missing("Container"))?;
    let container_id =
        non_empty(container.container_id).ok_or_else(|| missing("Container/ContainerId"))?;
    let instance_id = container
        .role_instance_list
        .and_then(|list| list.role_instances.into_iter().next())
        .and_then(|role| non_empty(role.instance_id))
        .ok_or_else(|| missing("Container/RoleInstanceList/RoleInstance/InstanceId"))?;
    Ok(GoalState {
        incarnation,
        container_id,
        instance_id,
    })
}

#[derive(Deserialize)]
struct VersionsDoc {
    #[serde(rename = "Preferred")]
    preferred: Option<VersionListDoc>,
    #[serde(rename = "Supported")]
    supported: Option<VersionListDoc>,
}

#[derive(Deserialize)]
struct VersionListDoc {
    #[serde(rename = "Version", default)]
    versions: Vec<String>,
}

/// The versions document (§3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    pub preferred: Vec<String>,
    pub supported: Vec<String>,
}

impl Versions {
    /// Whether [`PROTOCOL_VERSION`] is listed under `Supported`, as afterburn requires.
    pub fn supports_protocol(&self) -> bool {
        self.supported.iter().any(|v| v == PROTOCOL_VERSION)
    }
}

/// Reads `GET /?comp=versions`.
pub fn parse_versions(body: &str) -> Result<Versions, XmlError> {
    let doc: VersionsDoc = quick_xml::de::from_str(body).map_err(|e| XmlError::Malformed {
        document: "versions",
        message: e.to_string(),
    })?;
    let list = |l: Option<VersionListDoc>| {
        l.map(|l| {
            l.versions
                .into_iter()
                .map(|v| v.trim().to_owned())
                .collect()
        })
        .unwrap_or_default()
    };
    Ok(Versions {
        preferred: list(doc.preferred),
        supported: list(doc.supported),
    })
}

#[derive(Deserialize)]
struct ErrorDoc {
    #[serde(rename = "Code")]
    code: Option<String>,
}

/// Whether a 403 body is the platform's throttling reply (§8.1): matched on `<Code>`, never
/// on whitespace or length.
pub fn is_throttling_body(body: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    quick_xml::de::from_str::<ErrorDoc>(text)
        .ok()
        .and_then(|doc| doc.code)
        .is_some_and(|code| code.trim() == "RequestRateLimitExceeded")
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOAL_STATE: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<GoalState xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">
  <Version>2010-12-15</Version>
  <Incarnation>1</Incarnation>
  <Machine><ExpectedState>Started</ExpectedState></Machine>
  <Container>
    <ContainerId>c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2</ContainerId>
    <RoleInstanceList>
      <RoleInstance>
        <InstanceId>b61f93d0-e1ed-40b2-b067-22c243233448.MachineRole_IN_0</InstanceId>
        <State>Started</State>
        <Configuration><ConfigName>MachineRole_IN_0.0.MachineRole.xml</ConfigName></Configuration>
      </RoleInstance>
    </RoleInstanceList>
  </Container>
</GoalState>"#;

    #[test]
    fn reads_the_minimal_goal_state_of_protocol_md() {
        assert_eq!(
            parse_goal_state(GOAL_STATE).unwrap(),
            GoalState {
                incarnation: "1".into(),
                container_id: "c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2".into(),
                instance_id: "b61f93d0-e1ed-40b2-b067-22c243233448.MachineRole_IN_0".into(),
            }
        );
    }

    #[test]
    fn goal_state_without_instance_is_an_error() {
        let body = "<GoalState><Incarnation>3</Incarnation><Container><ContainerId>c</ContainerId></Container></GoalState>";
        assert_eq!(
            parse_goal_state(body),
            Err(XmlError::Missing {
                document: "goal state",
                element: "Container/RoleInstanceList/RoleInstance/InstanceId"
            })
        );
        assert!(matches!(
            parse_goal_state("<GoalState><Incarnation>"),
            Err(XmlError::Malformed { .. })
        ));
    }

    #[test]
    fn versions_need_2012_11_30_under_supported() {
        let both = "<Versions><Preferred><Version>2012-11-30</Version></Preferred><Supported><Version>2012-11-30</Version><Version>2010-12-15</Version></Supported></Versions>";
        assert!(parse_versions(both).unwrap().supports_protocol());
        let preferred_only =
            "<Versions><Preferred><Version>2012-11-30</Version></Preferred></Versions>";
        assert!(!parse_versions(preferred_only).unwrap().supports_protocol());
    }

    #[test]
    fn throttling_body_is_matched_on_code() {
        let platform = r#"<?xml version="1.0" encoding="utf-8"?> <Error xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema"> <Code>RequestRateLimitExceeded</Code> <Message>The request was denied because of too many requests by this client. Please retry the request after a few seconds.</Message> <Details></Details> </Error>"#;
        assert!(is_throttling_body(platform.as_bytes()));
        assert!(is_throttling_body(
            b"<Error>\n\t<Code>\n RequestRateLimitExceeded\n</Code></Error>"
        ));
        assert!(!is_throttling_body(
            b"<Error><Code>Forbidden</Code></Error>"
        ));
        assert!(!is_throttling_body(b"RequestRateLimitExceeded"));
        assert!(!is_throttling_body(b"\xff\xfe"));
    }

    #[test]
    fn carriage_returns_survive_an_xml_parser() {
        let ids = GoalState {
            incarnation: "1".into(),
            container_id: "c".into(),
            instance_id: "i".into(),
        };
        let doc = health_document(&ids, &HealthState::failed("a\r\nb"));
        assert!(
            doc.contains("<Description>a&#13;\nb</Description>"),
            "{doc}"
        );
    }

    #[test]
    fn control_characters_become_replacement_characters() {
        assert_eq!(xml_safe("a\u{1}b\tc"), "a\u{FFFD}b\tc");
        assert!(matches!(xml_safe("plain"), Cow::Borrowed(_)));
    }
}
