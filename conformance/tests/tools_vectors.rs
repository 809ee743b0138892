//! `wirecheck vectors check`: the shipped vectors all check out against the
//! fake and the parsers; an altered expectation fails exactly that vector.

use std::path::{Path, PathBuf};

use conformance::tools::{EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, vectors_check};
use serde_json::Value;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
}

fn fail_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("FAIL")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_vectors_all_check_out() {
    let out = vectors_check(vectors()).await.unwrap();
    assert_eq!(out.exit_code, EXIT_OK, "{}", out.stdout);
    assert!(fail_lines(&out.stdout).is_empty(), "{}", out.stdout);
    // 1 README + 46 http (6 of cloud-init 25.1.4, 6 of 26.2) + 86 http of WALinuxAgent (33 of
    // 2.7.3.0, 32 of 2.12.0.2, 21 of 2.16.0.2) + 6 kvp + 10 reports.
    assert!(
        out.stdout.ends_with("149 checked: 149 ok, 0 FAIL\n"),
        "{}",
        out.stdout
    );
    for line in [
        "ok    README.md (fixed fake values)",
        "ok    http/cloud-init-22.4.2/04-failure-tricky-health.json",
        "ok    http/cloud-init-22.4.2/09-imds-fallback-imds-instance.json",
        "ok    http/afterburn-5.11.0/14-checkin-health-proxy.json",
        "ok    http/platform/throttled-403.json",
        "ok    http/walinuxagent-2.7.3.0/04-ready-hostplugin-vmsettings.json",
        "ok    http/walinuxagent-2.7.3.0/28-health-410-wireserver-health-xml.json",
        "ok    http/walinuxagent-2.7.3.0/33-no-imds-wireserver-metadata.json",
        "ok    http/walinuxagent-2.12.0.2/24-failure-wireserver-health-xml.json",
        "ok    http/walinuxagent-2.16.0.2/06-ready-wireserver-health-xml.json",
        "ok    http/walinuxagent-2.16.0.2/14-failure-imds-instance.json",
        "ok    kvp/cloud-init-22.4.2-split.bin",
        "ok    reports/cloud-init-26.2-basic.json#imds-http-404",
        "ok    http/cloud-init-26.2/06-failure-tricky-health.json",
        "ok    kvp/cloud-init-26.2-ready.bin",
        "ok    reports/cloud-init-26.2-driver.json#failure-tricky",
    ] {
        assert!(
            out.stdout.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            out.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_altered_expectation_fails_exactly_that_vector() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&vectors(), dir.path());
    let altered = "http/afterburn-5.11.0/18-attributes-imds-proxy.json";
    edit_json(&dir.path().join(altered), |v| {
        v["expected"]["api_version"] = "2099-01-01".into();
    });
    let out = vectors_check(dir.path()).await.unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS, "{}", out.stdout);
    assert_eq!(
        fail_lines(&out.stdout),
        [format!(
            "FAIL  {altered}: api_version: expected \"2099-01-01\", got \"2017-08-01\""
        )],
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.ends_with("149 checked: 148 ok, 1 FAIL\n"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altered_kvp_report_and_health_vectors_fail() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&vectors(), dir.path());
    edit_json(&dir.path().join("kvp/cloud-init-22.4.2-split.json"), |v| {
        v["split_events"][0]["message"] = "not what the pool says".into();
    });
    edit_json(
        &dir.path().join("reports/azure-init-main-basic.json"),
        |v| {
            v[1]["fields"][1][1] = "operation did not time out".into();
        },
    );
    edit_json(
        &dir.path()
            .join("http/cloud-init-22.4.2/02-ready-health.json"),
        |v| {
            v["expected"]["state"] = "NotReady".into();
        },
    );
    edit_json(&dir.path().join("http/platform/throttled-403.json"), |v| {
        v["headers"][1][1] = "nginx".into();
    });
    let out = vectors_check(dir.path()).await.unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS);
    let fails = fail_lines(&out.stdout);
    assert_eq!(fails.len(), 4, "{}", out.stdout);
    assert!(fails[0].starts_with("FAIL  http/cloud-init-22.4.2/02-ready-health.json: state: expected \"NotReady\", got \"Ready\""), "{}", out.stdout);
    assert!(fails[1].starts_with("FAIL  http/platform/throttled-403.json: header Server: expected \"nginx\", got \"Microsoft-IIS/10.0\""), "{}", out.stdout);
    assert!(
        fails[2].starts_with("FAIL  kvp/cloud-init-22.4.2-split.bin: split event "),
        "{}",
        out.stdout
    );
    assert!(
        fails[2].contains(" message: expected \"not what the pool says\""),
        "{}",
        out.stdout
    );
    assert!(
        fails[3].starts_with(
            "FAIL  reports/azure-init-main-basic.json#timeout: strict fields: expected "
        ),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_with_other_fixed_values_fails() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&vectors(), dir.path());
    let readme = dir.path().join("README.md");
    let text = std::fs::read_to_string(&readme)
        .unwrap()
        .replace("`Incarnation` `7`", "`Incarnation` `8`");
    std::fs::write(&readme, text).unwrap();
    let out = vectors_check(dir.path()).await.unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS);
    assert_eq!(
        fail_lines(&out.stdout),
        [
            "FAIL  README.md (fixed fake values): Incarnation: the fake serves `Incarnation` `7` but the README's section does not say so"
        ]
    );
}

#[tokio::test]
async fn not_a_vectors_folder_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = vectors_check(dir.path()).await.unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT);
    let message = err.to_string();
    assert!(
        message.starts_with(&dir.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("no vectors found"), "{message}");

    let missing = dir.path().join("nope");
    let err = vectors_check(&missing).await.unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT);
    assert!(
        err.to_string().contains("nope") && err.to_string().contains("No such file"),
        "{err}"
    );

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let err = vectors_check(&file).await.unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_vector_files_fail_by_name_and_the_rest_still_run() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&vectors(), dir.path());
    std::fs::write(dir.path().join("reports/broken.json"), "{ not json").unwrap();
    std::fs::remove_file(dir.path().join("kvp/cloud-init-22.4.2-events.bin")).unwrap();
    let out = vectors_check(dir.path()).await.unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS);
    let fails = fail_lines(&out.stdout);
    assert_eq!(fails.len(), 2, "{}", out.stdout);
    assert!(
        fails[0]
            .starts_with("FAIL  kvp/cloud-init-22.4.2-events.json: sidecar without its pool file"),
        "{}",
        out.stdout
    );
    assert!(
        fails[1].starts_with("FAIL  reports/broken.json: not valid JSON"),
        "{}",
        out.stdout
    );
}
