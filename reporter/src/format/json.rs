//! The JSON health report for `POST /provisioning/health` (docs/protocol.md §5).
//!
//! Compact JSON with keys in alphabetical order, as azure-init's serde structs produce it:
//! `{"state":"Ready"}` or
//! `{"details":{"description":"…","subStatus":"ProvisioningFailed"},"state":"NotReady"}`.

use serde::Serialize;

use super::{HealthState, trim_description};

// Field order is the serialisation order: keep it alphabetical.
#[derive(Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details<'a>>,
    state: &'a str,
}

#[derive(Serialize)]
struct Details<'a> {
    description: &'a str,
    #[serde(rename = "subStatus")]
    sub_status: &'a str,
}

/// The request body for a health state.
pub fn health_body(state: &HealthState) -> String {
    let body = match state {
        HealthState::Ready => Body {
            details: None,
            state: "Ready",
        },
        HealthState::NotReady {
            substatus,
            description,
        } => Body {
            details: Some(Details {
                description: trim_description(description),
                sub_status: substatus.as_str(),
            }),
            state: "NotReady",
        },
    };
    serde_json::to_string(&body).expect("serialising plain strings cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_is_a_single_key() {
        assert_eq!(health_body(&HealthState::Ready), r#"{"state":"Ready"}"#);
    }

    #[test]
    fn csv_quotes_are_escaped_again_for_json() {
        let body = health_body(&HealthState::failed(r#"q=he said "hi""#));
        assert_eq!(
            body,
            r#"{"details":{"description":"q=he said \"hi\"","subStatus":"ProvisioningFailed"},"state":"NotReady"}"#
        );
    }
}
