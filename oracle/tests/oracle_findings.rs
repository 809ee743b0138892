//! What the oracle says about documents that deviate from PROTOCOL.md. Users read these
//! messages in journals and conformance reports, so their ids and wording are snapshotted.

use wirecheck_oracle::{Mode, ServedIds, encoded, health, kvp};

#[test]
fn encoded_report_deviations() {
    let cases = [
        (
            "cloud-init 26.2 error: naive timestamp, vm_id before reason, wrong documentation_url, trailing space",
            "result=error|agent=Cloud-Init/26.2|vm_id=v|reason=r|timestamp=2026-11-29T14:30:57.000662|documentation_url=https://example.com/x ",
        ),
        (
            "azure-init error: Z timestamp, no pps_type, single-quoted field, 4 fractional digits",
            "result=error|reason=r|agent=Azure-Init/0.1.1|'e=a|b'|vm_id=v|timestamp=2026-06-17T00:00:00.1234Z|documentation_url=https://aka.ms/linuxprovisioningerror",
        ),
        (
            "cloud-init success cut at 512 characters inside a quoted field",
            &format!(
                "result=success|agent=Cloud-Init/26.2|timestamp=2026-11-29T14:30:57+00:00|vm_id=v|'x={}",
                "y|".repeat(300)
            )
            .chars()
            .take(512)
            .collect::<String>(),
        ),
        (
            "no agent, no quotes, unknown result",
            "result=pending|x=1",
        ),
    ];
    let reports: Vec<_> = cases
        .iter()
        .map(|(what, input)| {
            let report = encoded::parse(input, Mode::Lenient).expect("lenient parse");
            (*what, report.truncated, report.findings)
        })
        .collect();
    insta::assert_yaml_snapshot!(reports);
}

#[test]
fn encoded_report_strict_errors() {
    let cases = [
        "",
        "result=error|'reason=a'b|agent=Cloud-Init/26.2",
        "result=error|reason=r|agent=Cloud-Init/26.2|'cut",
        "result=error|justtext|agent=Cloud-Init/26.2",
        "result=error|\"reason=a|b\"|agent=Cloud-Init/26.2",
        "result=error|'reason=plain'|agent=Cloud-Init/26.2",
        "result=error|reason=it's|agent=Cloud-Init/26.2",
        "result=error|reason=two\nlines|agent=Azure-Init/0.1.1",
    ];
    let errors: Vec<(&str, String)> = cases
        .iter()
        .map(|input| {
            let err = encoded::parse(input, Mode::Strict).expect_err("strict rejects");
            (*input, err.to_string())
        })
        .collect();
    insta::assert_yaml_snapshot!(errors);
}

#[test]
fn health_xml_deviations() {
    let served = ServedIds {
        incarnation: "7".into(),
        container_id: "c0ffee00-1111-2222-3333-444444444444".into(),
        instance_id: "11111111222233334444555555555555.vector-vm".into(),
    };
    // A no-agent client: hard-coded incarnation 1, other ids from elsewhere, a case slip.
    let body = "<Health><GoalStateIncarnation>1</GoalStateIncarnation><Container><ContainerId>other</ContainerId><RoleInstanceList><Role><InstanceId> x </InstanceId><Health><State>NotReady</State><Details><Substatus>ProvisioningFailed</Substatus><Description>result=error|reason=r|agent=Cloud-Init/26.2</Description></Details></Health></Role></RoleInstanceList></Container></Health>";
    let report = health::parse_xml(body.as_bytes(), Some(&served));
    insta::assert_yaml_snapshot!(report);
}

#[test]
fn health_json_deviations() {
    let body = br#"{"State":"Ready","state":"Ready","details":{"subStatus":"ProvisioningFailed","description":"x","extra":1}}"#;
    let report = health::parse_json(body);
    insta::assert_yaml_snapshot!(report);
}

#[test]
fn kvp_pool_deviations() {
    let long_key = "K".repeat(300);
    let long_value = "V".repeat(1500);
    let mut pool = kvp::encode_pool([
        (long_key.as_str(), "v"),
        ("big", long_value.as_str()),
        ("PROVISIONING_REPORT", "result=success|agent=Azure-Init/0.1.1|pps_type=None|vm_id=v|timestamp=2026-06-17T00:00:00Z"),
    ])
    .unwrap();
    pool.extend_from_slice(b"half a record");
    let view = kvp::decode_pool(&pool);
    let findings: Vec<_> = view.all_findings().cloned().collect();
    let report = view
        .provisioning_report
        .map(|(index, report)| (index, report.findings));
    insta::assert_yaml_snapshot!((findings, report));
}
