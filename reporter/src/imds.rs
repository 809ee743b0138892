//! The IMDS client: the instance document, for `compute.vmId` and `extended.compute.ppsType`
//! (docs/protocol.md §1.2, §8).
//!
//! `GET /metadata/instance?api-version=2021-08-01&extended=true` with `Metadata: true`; on a 400
//! once more with `api-version=2019-06-01` (as cloud-init does); 404, 410, 429, 500 and
//! transport errors are retried within the IMDS budget, and so is a document without a usable
//! `vmId` ([`crate::vm_id::check_vm_id`]). A `ppsType` that is not a short ASCII word is left
//! out. Any other status, a redirect included, is not retried.

use reqwest::Url;
use serde_json::Value;
use thiserror::Error;

use crate::bounded_log::{Excerpt, ID_MAX};
use crate::http::{Answer, Http, error_chain};
use crate::retry::{Attempt, Budget, RetryError, RetryPolicy, Retryable, StatusClass};
use crate::vm_id::check_vm_id;
use crate::wireserver::{join, parenthesized};

pub const INSTANCE_PATH: &str = "/metadata/instance?api-version=2021-08-01&extended=true";
pub const FALLBACK_INSTANCE_PATH: &str = "/metadata/instance?api-version=2019-06-01";

/// What the reporter takes from the instance document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceMetadata {
    pub vm_id: String,
    /// Present only when IMDS gave one (the 2019-06-01 document has no `extended` part).
    pub pps_type: Option<String>,
}

/// Why IMDS gave no usable answer.
#[derive(Debug, Error)]
pub enum ImdsError {
    #[error(
        "{url}: IMDS answered HTTP {status}, which is not retried{}",
        parenthesized(detail)
    )]
    Rejected {
        url: String,
        status: u16,
        /// [`Answer::detail`]: a redirect's `Location`, the start of the body.
        detail: String,
    },
    #[error("{url}: gave up after {attempts} attempt(s) in {:.1} s; last failure: {last}", elapsed.as_secs_f64())]
    Exhausted {
        url: String,
        attempts: u32,
        elapsed: std::time::Duration,
        last: String,
    },
}

/// The longest `ppsType` taken into the report (the platform's longest, `PreprovisionedOSDisk`,
/// is 20 bytes).
pub const PPS_TYPE_MAX_BYTES: usize = 64;

/// Extracts vmId and ppsType from an instance document. A vmId that [`check_vm_id`] refuses
/// makes the document unusable (as a missing one does); a ppsType that is not a word of ASCII
/// letters and digits of at most [`PPS_TYPE_MAX_BYTES`] is left out, with a warning: either
/// would otherwise crowd the rest of the 4096-byte description out, or reach the log whole.
pub fn parse_instance(body: &[u8]) -> Result<InstanceMetadata, String> {
    let doc: Value =
        serde_json::from_slice(body).map_err(|e| format!("instance document is not JSON: {e}"))?;
    let vm_id = doc
        .pointer("/compute/vmId")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .ok_or("instance document has no compute.vmId string")?;
    check_vm_id(vm_id).map_err(|e| format!("instance document's compute.vmId is unusable: {e}"))?;
    let pps_type = match doc
        .pointer("/extended/compute/ppsType")
        .and_then(Value::as_str)
    {
        Some(pps_type) if is_pps_type(pps_type) => Some(pps_type.to_owned()),
        Some(other) => {
            tracing::warn!(
                "IMDS: extended.compute.ppsType \"{}\" is not a word of at most \
                 {PPS_TYPE_MAX_BYTES} ASCII letters and digits; the report leaves pps_type out",
                Excerpt::new(other, ID_MAX)
            );
            None
        }
        None => None,
    };
    Ok(InstanceMetadata {
        vm_id: vm_id.to_owned(),
        pps_type,
    })
}

fn is_pps_type(text: &str) -> bool {
    (1..=PPS_TYPE_MAX_BYTES).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric())
}

enum Fetched {
    Metadata(InstanceMetadata),
    /// 400 to the newer api-version: try the older one.
    BadRequest,
}

/// Fetches the instance metadata from IMDS at `base` (e.g. `http://169.254.169.254`).
pub async fn fetch_instance(
    http: &Http,
    base: &Url,
    policy: RetryPolicy,
) -> Result<InstanceMetadata, ImdsError> {
    let mut budget = Budget::start(policy);
    let primary = join(base, INSTANCE_PATH);
    match fetch(http, &primary, true, &mut budget).await? {
        Fetched::Metadata(metadata) => Ok(metadata),
        Fetched::BadRequest => {
            let fallback = join(base, FALLBACK_INSTANCE_PATH);
            tracing::info!(url = %primary, "IMDS answered HTTP 400; falling back to {fallback}");
            match fetch(http, &fallback, false, &mut budget).await? {
                Fetched::Metadata(metadata) => Ok(metadata),
                Fetched::BadRequest => unreachable!("400 is only special on the first api-version"),
            }
        }
    }
}

async fn fetch(
    http: &Http,
    url: &Url,
    may_fall_back: bool,
    budget: &mut Budget,
) -> Result<Fetched, ImdsError> {
    let label = format!("GET {}", url.path());
    budget
        .run(&label, |attempt| {
            let request = http.client().get(url.clone()).header("Metadata", "true");
            let label = &label;
            async move {
                match http.execute(label, attempt, request).await {
                    Err(e) => Attempt::Retry(error_chain(&e)),
                    Ok(answer) if answer.status == 200 => match parse_instance(&answer.body) {
                        Ok(metadata) => Attempt::Done(Fetched::Metadata(metadata)),
                        Err(why) => Attempt::Retry(why),
                    },
                    Ok(answer) if answer.status == 400 && may_fall_back => {
                        Attempt::Done(Fetched::BadRequest)
                    }
                    Ok(answer) => classify(url, &answer),
                }
            }
        })
        .await
        .map_err(|e| match e {
            RetryError::Failed(e) => e,
            RetryError::Exhausted {
                attempts,
                elapsed,
                last,
            } => ImdsError::Exhausted {
                url: url.to_string(),
                attempts,
                elapsed,
                last,
            },
        })
}

fn classify<T>(url: &Url, answer: &Answer) -> Attempt<T, ImdsError> {
    match Retryable::IMDS.classify(answer) {
        StatusClass::Retry(why) => Attempt::Retry(why),
        StatusClass::Fatal => Attempt::Fail(ImdsError::Rejected {
            url: url.to_string(),
            status: answer.status,
            detail: answer.detail(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_id_and_pps_type() {
        let body = br#"{"compute":{"vmId":"11111111-2222-3333-4444-555555555555"},"extended":{"compute":{"hasCustomData":false,"ppsType":"None"}}}"#;
        assert_eq!(
            parse_instance(body).unwrap(),
            InstanceMetadata {
                vm_id: "11111111-2222-3333-4444-555555555555".into(),
                pps_type: Some("None".into())
            }
        );
        let old = br#"{"compute":{"vmId":"abc"}}"#;
        assert_eq!(parse_instance(old).unwrap().pps_type, None);
        assert!(parse_instance(br#"{"compute":{}}"#).is_err());
        let newline = br#"{"compute":{"vmId":"abc\ndef"}}"#;
        assert!(
            parse_instance(newline)
                .unwrap_err()
                .contains("control character")
        );
        let long = format!(r#"{{"compute":{{"vmId":"{}"}}}}"#, "9".repeat(255));
        assert!(
            parse_instance(long.as_bytes())
                .unwrap_err()
                .contains("255 bytes")
        );
        let odd_pps = br#"{"compute":{"vmId":"abc"},"extended":{"compute":{"ppsType":"a|b"}}}"#;
        assert_eq!(parse_instance(odd_pps).unwrap().pps_type, None);
        assert!(parse_instance(b"<html>").is_err());
    }
}
