//! Snapshots of every body, document and encoded string the reporter produces. The clock, vm id
//! and goal-state ids are fixed at the source, so nothing is redacted.

use chrono::{DateTime, TimeZone, Utc};
use reporter::format::HealthState;
use reporter::format::encoded::{ReportContext, encode_error, encode_success};
use reporter::format::json::health_body;
use reporter::format::xml::{GoalState, health_document};
use reporter::kvp::record::{decode_record, encode_record};
use reporter::{Failure, Identity, ProvisioningError, Report, VmIdSource, prepare};

const VM_ID: &str = "11111111-2222-3333-4444-555555555555";

fn timestamp() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 14, 30, 57).unwrap() + chrono::Duration::microseconds(662)
}

fn identity(source: VmIdSource, pps_type: Option<&str>) -> Identity {
    Identity {
        vm_id: VM_ID.to_owned(),
        source,
        pps_type: pps_type.map(str::to_owned),
    }
}

fn goal_state() -> GoalState {
    GoalState {
        incarnation: "7".into(),
        container_id: "c0ffee00-1111-2222-3333-444444444444".into(),
        instance_id: "11111111222233334444555555555555.vector-vm".into(),
    }
}

fn tricky_failure() -> Failure {
    Failure::custom(
        "failed to provision user",
        [
            ("pipe", "a|b"),
            ("apostrophe", "can't"),
            ("quotes", "say \"hi\""),
            ("markup", "<a>&amp;</a>"),
            ("multiline", "line 1\nline 2\nline 3"),
            ("carriage_return", "a\rb"),
            ("unicode", "é € 😀"),
            ("tab", "a\tb"),
            ("empty", ""),
        ],
    )
    .unwrap()
}

fn prepared(report: &Report, identity: &Identity) -> reporter::Prepared {
    prepare(report, identity, timestamp())
}

#[test]
fn json_bodies() {
    let imds = identity(VmIdSource::Imds, Some("None"));
    insta::assert_snapshot!(
        "json_ready",
        health_body(&prepared(&Report::Ready, &imds).health)
    );
    insta::assert_snapshot!(
        "json_failure",
        health_body(&prepared(&Report::Failure(tricky_failure()), &imds).health)
    );
    insta::assert_snapshot!(
        "json_in_progress_default",
        health_body(&prepared(&Report::InProgress { description: None }, &imds).health)
    );
    insta::assert_snapshot!(
        "json_in_progress_custom",
        health_body(
            &prepared(
                &Report::InProgress {
                    description: Some("waiting for \"cloud-init\" <stage 2>".into())
                },
                &imds
            )
            .health
        )
    );
}

#[test]
fn xml_documents() {
    let imds = identity(VmIdSource::Imds, Some("None"));
    let doc = |report: &Report| health_document(&goal_state(), &prepared(report, &imds).health);
    insta::assert_snapshot!("xml_ready", doc(&Report::Ready));
    insta::assert_snapshot!("xml_failure", doc(&Report::Failure(tricky_failure())));
    insta::assert_snapshot!(
        "xml_in_progress_default",
        doc(&Report::InProgress { description: None })
    );
    insta::assert_snapshot!(
        "xml_in_progress_custom",
        doc(&Report::InProgress {
            description: Some("step 3 & 4 <of 5>\u{1}".into())
        })
    );
    let hostile_ids = GoalState {
        incarnation: "1&2".into(),
        container_id: "<c>".into(),
        instance_id: "i'\"".into(),
    };
    insta::assert_snapshot!(
        "xml_ready_escaped_ids",
        health_document(&hostile_ids, &HealthState::Ready)
    );
}

#[test]
fn encoded_reports() {
    let imds = identity(VmIdSource::Imds, Some("None"));
    let success = prepared(&Report::Ready, &imds).encoded.unwrap();
    insta::assert_snapshot!("encoded_success", success);
    insta::assert_snapshot!(
        "encoded_error_tricky",
        prepared(&Report::Failure(tricky_failure()), &imds)
            .encoded
            .unwrap()
    );
    let basic = Failure::custom("boom", [("k", "v")]).unwrap();
    let mut sources = String::new();
    for (source, pps) in [
        (VmIdSource::Imds, Some("PerVM")),
        (VmIdSource::Imds, None),
        (VmIdSource::Given, None),
        (VmIdSource::Dmi, None),
        (VmIdSource::Zero, None),
    ] {
        let encoded = prepared(&Report::Failure(basic.clone()), &identity(source, pps))
            .encoded
            .unwrap();
        sources.push_str(&format!("{source} pps_type={pps:?}\n{encoded}\n\n"));
    }
    insta::assert_snapshot!("encoded_error_by_vm_id_source", sources);
    // Whole-second timestamps drop the microseconds, as Python's isoformat() does.
    let whole = ReportContext {
        agent: "provision-report/0.0.0",
        vm_id: VM_ID,
        timestamp: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        pps_type: None,
        vm_id_source: None,
    };
    insta::assert_snapshot!(
        "encoded_whole_second",
        format!(
            "{}\n{}",
            encode_success(&whole),
            encode_error(&whole, &basic)
        )
    );
}

#[test]
fn long_failure_is_trimmed_for_the_wireserver_and_for_kvp() {
    let imds = identity(VmIdSource::Imds, Some("None"));
    let long = Failure::custom("boom", [("detail", "é".repeat(3000))]).unwrap();
    let prepared = prepared(&Report::Failure(long), &imds);
    let encoded = prepared.encoded.unwrap();
    let HealthState::NotReady { description, .. } = &prepared.health else {
        panic!("failure is NotReady");
    };
    let record = decode_record(&encode_record("PROVISIONING_REPORT", &encoded).unwrap());
    insta::assert_snapshot!(
        "trimmed_lengths",
        format!(
            "encoded: {} bytes\ndescription: {} bytes, ends {:?}\nkvp value: {} bytes, ends {:?}",
            encoded.len(),
            description.len(),
            &description[description.len() - 8..],
            record.value.len(),
            &record.value[record.value.len() - 8..],
        )
    );
}

#[test]
fn kvp_record() {
    let record = encode_record(
        "PROVISIONING_REPORT",
        "result=success|agent=provision-report/0.0.0|timestamp=2026-01-02T03:04:05+00:00|vm_id=x",
    )
    .unwrap();
    let used = |field: &[u8]| field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let (key, value) = record.split_at(512);
    insta::assert_snapshot!(
        "kvp_record",
        format!(
            "size {}\nkey ({} bytes + {} NUL): {:?}\nvalue ({} bytes + {} NUL): {:?}",
            record.len(),
            used(key),
            512 - used(key),
            String::from_utf8_lossy(&key[..used(key)]),
            used(value),
            2048 - used(value),
            String::from_utf8_lossy(&value[..used(value)]),
        )
    );
}

/// Fails to compile when a variant is added without a sample below.
fn covered(error: &ProvisioningError) {
    use ProvisioningError::*;
    match error {
        DhcpInterfaceNotFound { .. }
        | DhcpLeaseFailed { .. }
        | ImdsConnectionTimeout { .. }
        | ImdsConnectionError { .. }
        | ImdsReadTimeout { .. }
        | ImdsHttpError { .. }
        | ImdsUnexpectedError { .. }
        | ImdsInvalidMetadata { .. }
        | ImdsMetadataParse { .. }
        | CustomDataUnreadable { .. }
        | OvfEnvParse { .. }
        | HostShutdownWait
        | VmIdUnidentified { .. }
        | HttpStatus { .. }
        | SubprocessFailed { .. }
        | UserNotFound { .. }
        | UserProvisioning { .. }
        | HostnameProvisioning { .. }
        | PasswordProvisioning { .. }
        | NonEmptyPasswordUnsupported
        | UnsupportedPasswordLength { .. }
        | SshdConfigLoad { .. }
        | SshdConfigUpdate { .. }
        | ProxyAgentNotFound
        | ProxyAgentStatus { .. }
        | Timeout { .. }
        | Unhandled { .. } => {}
    }
}

#[test]
fn taxonomy() {
    use ProvisioningError::*;
    let url = "http://169.254.169.254/metadata/instance?api-version=2021-08-01&extended=true";
    let samples = vec![
        DhcpInterfaceNotFound { duration: 300.0 },
        DhcpLeaseFailed {
            driver: Some("hv_netvsc".into()),
            duration: 12.5,
            interface: Some("eth0".into()),
            mac_address: None,
        },
        ImdsConnectionTimeout {
            duration: 30.25,
            exception: "ConnectTimeout('timed out')".into(),
            url: url.into(),
        },
        ImdsConnectionError {
            duration: 1.0,
            exception: "ConnectionError('refused')".into(),
            url: url.into(),
        },
        ImdsReadTimeout {
            duration: 60.0,
            exception: "ReadTimeout('read timed out')".into(),
            url: url.into(),
        },
        ImdsHttpError {
            http_code: 404,
            duration: 12.5,
            exception: "UrlError('404 Client Error: Not Found')".into(),
            url: url.into(),
        },
        ImdsUnexpectedError {
            duration: 0.5,
            exception: "ValueError('x')".into(),
            url: url.into(),
        },
        ImdsInvalidMetadata {
            key: "compute.osProfile.adminUsername".into(),
            value: "".into(),
            value_type: "str".into(),
        },
        ImdsMetadataParse {
            exception: "expected value at line 1 column 1".into(),
        },
        CustomDataUnreadable {
            provisioning_media: "/dev/sr0".into(),
        },
        OvfEnvParse {
            message: "no UserName".into(),
        },
        HostShutdownWait,
        VmIdUnidentified {
            exception: "Not a UUID".into(),
            system_uuid: "Not Settable".into(),
        },
        HttpStatus {
            endpoint: "http://168.63.129.16/provisioning/health".into(),
            status: 401,
        },
        SubprocessFailed {
            command: "useradd -m azureuser".into(),
            exit_status: "exit status: 9".into(),
        },
        UserNotFound {
            user: "azureuser".into(),
        },
        UserProvisioning {
            error: "useradd: group 'wheel' does not exist".into(),
        },
        HostnameProvisioning {
            error: "hostnamectl: exit status 1".into(),
        },
        PasswordProvisioning {
            error: "passwd: exit status 3".into(),
        },
        NonEmptyPasswordUnsupported,
        UnsupportedPasswordLength {
            length: 80,
            max_length: 72,
        },
        SshdConfigLoad {
            details: "/etc/ssh/sshd_config: permission denied".into(),
        },
        SshdConfigUpdate {
            error: "read-only file system".into(),
        },
        ProxyAgentNotFound,
        ProxyAgentStatus {
            exit_code: 2,
            stdout: "".into(),
            stderr: "status: unhealthy\nretry later".into(),
        },
        Timeout {
            error: "A timeout error occurred".into(),
        },
        Unhandled {
            error: "Os { code: 28, kind: StorageFull, message: \"No space left on device\" }"
                .into(),
        },
    ];
    let imds = identity(VmIdSource::Imds, Some("None"));
    let mut out = String::new();
    for sample in &samples {
        covered(sample);
        let encoded = prepared(&Report::Failure(Failure::from(sample)), &imds)
            .encoded
            .unwrap();
        out.push_str(&format!("{}\n{encoded}\n\n", sample.reason()));
    }
    insta::assert_snapshot!("taxonomy", out);
}
