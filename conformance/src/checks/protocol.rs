//! Protocol checks: method, path spelling, query and headers per endpoint (docs/protocol.md §1, §2).

use fake_wireserver::EndpointId;
use fake_wireserver::journal::Entry;

use super::{Judgement, Tally, about, line, request_excerpt};
use crate::observe::Observation;

/// The method each endpoint takes.
fn expected_method(endpoint: EndpointId) -> Option<&'static str> {
    match endpoint {
        EndpointId::WireserverVersions
        | EndpointId::WireserverGoalstate
        | EndpointId::WireserverConfig
        | EndpointId::WireserverCertificates => Some("GET"),
        EndpointId::WireserverHealthXml
        | EndpointId::WireserverHealthJson
        | EndpointId::WireserverTelemetry => Some("POST"),
        e if e.is_imds() => Some("GET"),
        _ => None,
    }
}

/// Path spellings the reference agents use, per endpoint (`None`: not judged here).
fn accepted_paths(endpoint: EndpointId) -> Option<&'static [&'static str]> {
    match endpoint {
        EndpointId::WireserverVersions => Some(&["/"]),
        EndpointId::WireserverGoalstate | EndpointId::WireserverHealthXml => {
            Some(&["/machine", "/machine/"])
        }
        EndpointId::WireserverHealthJson => Some(&["/provisioning/health"]),
        _ => None,
    }
}

pub fn request(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for e in &obs.journal {
        t.judged();
        let excerpt = Some(request_excerpt(e, &[]));
        if e.endpoint.is_unknown() {
            t.fail(
                format!("{} is not a known endpoint ({})", e.target, e.endpoint),
                about(line(e), &[e], excerpt.clone()),
            );
            continue;
        }
        if let Some(method) = expected_method(e.endpoint)
            && e.method != method
        {
            t.fail(
                format!("{} must be {method}, got {}", e.endpoint, e.method),
                about(line(e), &[e], excerpt.clone()),
            );
        }
        if let Some(paths) = accepted_paths(e.endpoint)
            && !paths.contains(&e.path())
        {
            t.non_strict(
                format!(
                    "{} path spelled {:?}; reference agents use {}",
                    e.endpoint,
                    e.path(),
                    paths
                        .iter()
                        .map(|p| format!("{p:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
                about(line(e), &[e], excerpt.clone()),
            );
        }
        if e.endpoint.is_imds() {
            imds_query(&mut t, e);
        }
        let findings: Vec<_> = e
            .findings
            .iter()
            .filter(|f| !f.id.starts_with("header."))
            .cloned()
            .collect();
        t.findings(&findings, &[e.seq], &format!("request #{}", e.seq));
    }
    t.finish("the agent sent no request")
}

fn imds_query(t: &mut Tally, e: &Entry) {
    let pairs = e.query_pairs();
    let excerpt = Some(request_excerpt(e, &[]));
    if !pairs.iter().any(|(k, _)| k == "api-version") {
        t.fail(
            "IMDS request without api-version (the platform answers 400)",
            about(line(e), &[e], excerpt.clone()),
        );
    }
    let mut keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        t.fail(
            "IMDS request with a duplicate query parameter (the platform rejects it)",
            about(line(e), &[e], excerpt.clone()),
        );
    }
    if e.header("x-forwarded-for").is_some() {
        t.fail(
            "IMDS request with X-Forwarded-For (the platform rejects it)",
            about(
                line(e),
                &[e],
                Some(request_excerpt(e, &["x-forwarded-for"])),
            ),
        );
    }
}

/// `text/xml; charset=utf-8` → `text/xml`.
fn media_type(value: &str) -> String {
    value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

pub fn headers(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for e in &obs.journal {
        let ep = e.endpoint;
        if ep.is_imds() {
            t.judged();
            match e.header("metadata") {
                Some(v) if v.eq_ignore_ascii_case("true") => {}
                Some(v) => t.fail(
                    format!("IMDS request with Metadata: {v:?}; expected \"true\" (the platform answers 400)"),
                    about(line(e), &[e], Some(request_excerpt(e, &["metadata"]))),
                ),
                None => t.fail(
                    "IMDS request without the Metadata: true header (the platform answers 400)",
                    about(line(e), &[e], Some(request_excerpt(e, &[]))),
                ),
            }
        }
        if matches!(
            ep,
            EndpointId::WireserverGoalstate
                | EndpointId::WireserverHealthXml
                | EndpointId::WireserverConfig
                | EndpointId::WireserverCertificates
        ) {
            t.judged();
            match e.header("x-ms-version") {
                Some("2012-11-30") => {}
                Some(v) => t.non_strict(
                    format!("{ep}: x-ms-version {v:?}; every reference agent sends 2012-11-30"),
                    about(line(e), &[e], Some(request_excerpt(e, &["x-ms-version"]))),
                ),
                None => t.non_strict(
                    format!("{ep}: no x-ms-version header; every reference agent sends 2012-11-30"),
                    about(line(e), &[e], Some(request_excerpt(e, &[]))),
                ),
            }
            if let Some(name) = e.header("x-ms-agent-name") {
                t.note(about(
                    format!("#{} x-ms-agent-name: {name} (informational)", e.seq),
                    &[e],
                    None,
                ));
            }
        }
        let wanted = match ep {
            EndpointId::WireserverHealthJson => Some("application/json"),
            EndpointId::WireserverHealthXml => Some("text/xml"),
            _ => None,
        };
        if let Some(wanted) = wanted {
            t.judged();
            match e.header("content-type") {
                Some(v) if media_type(v) == wanted => {}
                Some(v) => t.fail(
                    format!("{ep}: Content-Type {v:?}; expected {wanted}"),
                    about(line(e), &[e], Some(request_excerpt(e, &["content-type"]))),
                ),
                None => t.non_strict(
                    format!("{ep}: no Content-Type; expected {wanted}"),
                    about(line(e), &[e], Some(request_excerpt(e, &[]))),
                ),
            }
        }
        let findings: Vec<_> = e
            .findings
            .iter()
            .filter(|f| f.id.starts_with("header."))
            .cloned()
            .collect();
        if !findings.is_empty() {
            t.judged();
            t.findings(&findings, &[e.seq], &format!("request #{}", e.seq));
        }
    }
    t.finish("the agent sent no request with required headers")
}
