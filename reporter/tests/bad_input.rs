//! Bad input: a clear error naming the argument, exit status 2, and nothing written to the
//! pool or sent to the network.

use crate::support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use support::*;

/// Runs with `args` after the common ones; asserts exit 2, the message, and no side effects.
fn assert_rejected(args: &[&str], env: &[(&str, &OsStr)], expected_in_message: &[&str]) {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let pool = scratch.pool().display().to_string();
    let url = server.url();
    let mut full = vec![
        "--wireserver",
        url.as_str(),
        "--imds",
        url.as_str(),
        "--kvp-pool",
        pool.as_str(),
    ];
    full.extend_from_slice(args);
    let run = run_raw(&full, env);
    assert_eq!(run.code, 2, "args {args:?}: {}", run.stderr);
    for expected in expected_in_message {
        assert!(
            run.stderr.contains(expected),
            "args {args:?}: expected {expected:?} in {}",
            run.stderr
        );
    }
    assert_eq!(
        server.requests().len(),
        0,
        "args {args:?}: sent {:?}",
        server.targets()
    );
    assert!(
        !scratch.pool().exists(),
        "args {args:?}: the pool was created"
    );
}

#[test]
fn data_without_equals() {
    assert_rejected(
        &["failure", "--reason", "boom", "--data", "justakey"],
        &[],
        &["--data", "justakey", "KEY=VALUE"],
    );
}

#[test]
fn data_key_over_the_limit() {
    let pair = format!("{}=v", "k".repeat(255));
    assert_rejected(
        &["failure", "--reason", "boom", "--data", &pair],
        &[],
        &["--data", "255 bytes", "at most 254"],
    );
}

#[test]
fn data_key_that_is_not_an_identifier_or_is_reserved() {
    assert_rejected(
        &["failure", "--reason", "boom", "--data", "'quoted=v"],
        &[],
        &["--data", "not an identifier"],
    );
    assert_rejected(
        &["failure", "--reason", "boom", "--data", "vm_id=x"],
        &[],
        &["--data", "reserved"],
    );
}

#[test]
fn kvp_key_over_the_limit() {
    let key = "K".repeat(255);
    assert_rejected(&["--kvp-key", &key, "ready"], &[], &["--kvp-key", "254"]);
}

#[test]
fn empty_reason() {
    assert_rejected(&["failure", "--reason", ""], &[], &["--reason", "empty"]);
}

#[test]
fn non_utf8_argument_is_named() {
    let server = Server::start();
    let scratch = Scratch::new();
    let pool = scratch.pool();
    let url = server.url();
    let args: Vec<&OsStr> = vec![
        OsStr::new("--wireserver"),
        OsStr::new(&url),
        OsStr::new("--imds"),
        OsStr::new(&url),
        OsStr::new("--kvp-pool"),
        pool.as_os_str(),
        OsStr::new("failure"),
        OsStr::new("--reason"),
        OsStr::from_bytes(b"bad \xff byte"),
    ];
    let run = run_raw(&args, &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--reason"), "{}", run.stderr);
    assert!(run.stderr.contains("UTF-8"), "{}", run.stderr);
    assert!(server.requests().is_empty());
    assert!(!pool.exists());
}

#[test]
fn non_utf8_environment_value_is_named() {
    assert_rejected(
        &["ready"],
        &[("PROVISION_REPORT_VM_ID", OsStr::from_bytes(b"\xfe\xff"))],
        &["--vm-id", "UTF-8"],
    );
}

#[test]
fn bad_durations() {
    assert_rejected(
        &["--timeout", "soon", "ready"],
        &[],
        &["--timeout", "seconds"],
    );
    assert_rejected(&["--timeout", "0", "ready"], &[], &["--timeout"]);
    assert_rejected(
        &["--retry-interval=-1", "ready"],
        &[],
        &["--retry-interval"],
    );
    assert_rejected(
        &["--kvp-lock-timeout", "0", "ready"],
        &[],
        &["--kvp-lock-timeout"],
    );
}

#[test]
fn bad_urls() {
    let server = Server::start();
    let scratch = Scratch::new();
    let pool = scratch.pool().display().to_string();
    let run = run_raw(
        &[
            "--wireserver",
            "ftp://example",
            "--kvp-pool",
            &pool,
            "ready",
        ],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--wireserver"), "{}", run.stderr);
    drop(server);
}

#[test]
fn unreadable_or_invalid_config() {
    let scratch = Scratch::new();
    let missing = scratch.dir.path().join("missing.toml");
    assert_rejected(
        &["--config", missing.to_str().unwrap(), "ready"],
        &[],
        &["--config", "missing.toml", "cannot read"],
    );
    let bad = scratch.dir.path().join("bad.toml");
    std::fs::write(&bad, "timeout = 5\nwireserverr = \"http://x\"\n").unwrap();
    assert_rejected(
        &["--config", bad.to_str().unwrap(), "ready"],
        &[],
        &["--config", "bad.toml", "line 2", "wireserverr"],
    );
    let negative = scratch.dir.path().join("negative.toml");
    std::fs::write(&negative, "retry_interval = -2\n").unwrap();
    assert_rejected(
        &["--config", negative.to_str().unwrap(), "ready"],
        &[],
        &["`retry_interval` in --config", "negative.toml"],
    );
}

#[test]
fn config_file_values_apply_and_flags_win() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let config = scratch.dir.path().join("provision-report.toml");
    std::fs::write(
        &config,
        format!(
            "wireserver = \"http://127.0.0.1:9\"\nimds = \"{}\"\nvm_id = \"from-config\"\nkvp_pool = \"{}\"\n",
            server.url(),
            scratch.pool().display()
        ),
    )
    .unwrap();
    // The flag's wireserver wins over the config file's unreachable one.
    let run = run_raw(
        &[
            "--config",
            config.to_str().unwrap(),
            "--wireserver",
            &server.url(),
            "ready",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let records = pool_records(&scratch.pool());
    assert_eq!(
        value(&parse_encoded(&records[0].1), "vm_id"),
        Some("from-config")
    );
    // The environment fills in a flag too.
    let run = run_raw(
        &["--config", config.to_str().unwrap(), "ready"],
        &[("PROVISION_REPORT_WIRESERVER", OsStr::new(&server.url()))],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.requests_to("POST", "/provisioning/health").len(), 2);
}

#[test]
fn help_lists_every_environment_variable() {
    let run = run_raw(&["--help"], &[]);
    assert_eq!(run.code, 0);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_provision-report"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    for var in [
        "PROVISION_REPORT_WIRESERVER",
        "PROVISION_REPORT_IMDS",
        "PROVISION_REPORT_NO_IMDS",
        "PROVISION_REPORT_PROTOCOL",
        "PROVISION_REPORT_VM_ID",
        "PROVISION_REPORT_TIMEOUT",
        "PROVISION_REPORT_RETRY_INTERVAL",
        "PROVISION_REPORT_REQUEST_TIMEOUT",
        "PROVISION_REPORT_IMDS_TIMEOUT",
        "PROVISION_REPORT_KVP_POOL",
        "PROVISION_REPORT_KVP_KEY",
        "PROVISION_REPORT_NO_KVP",
        "PROVISION_REPORT_TRUNCATE_STALE",
        "PROVISION_REPORT_KVP_LOCK_TIMEOUT",
        "PROVISION_REPORT_CONFIG",
        "PROVISION_REPORT_LOG_LEVEL",
    ] {
        assert!(help.contains(var), "--help does not show {var}");
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_provision-report"))
        .args(["failure", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("PROVISION_REPORT_REASON"));
    assert!(help.contains("PROVISION_REPORT_DATA"));
}

/// `--print-config`: every value merged and checked, printed as a --config file that reads
/// back to the same configuration; nothing sent, no pool created.
#[test]
fn print_config_shows_the_merged_configuration_and_does_nothing() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let pool = scratch.pool().display().to_string();
    let url = server.url();
    let print = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_provision-report"));
        command.env_clear().args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, text, err) = print(
        &[
            "--print-config",
            "--wireserver",
            &url,
            "--kvp-pool",
            &pool,
            "--timeout",
            "2.5",
            "failure",
            "--reason",
            "boom",
        ],
        &[
            ("PROVISION_REPORT_NO_IMDS", "1"),
            ("PROVISION_REPORT_PROTOCOL", "xml"),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(text.contains("# report: failure"), "{text}");
    // `key = value` lines (the toml crate is not linked here: its AsRef impls would make the
    // support module's byte-string matches ambiguous).
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .to_owned()
    };
    assert_eq!(get("timeout"), "2.5");
    assert_eq!(get("no_imds"), "true");
    assert_eq!(get("protocol"), "\"xml\"");
    assert_eq!(get("kvp_pool"), format!("{pool:?}"));
    assert_eq!(get("retry_interval"), "1.0", "the default");
    assert_eq!(server.requests().len(), 0, "sent {:?}", server.targets());
    assert!(!scratch.pool().exists(), "the pool was created");

    // Saved and given back as --config, it is the same configuration.
    let file = scratch.dir.path().join("effective.toml");
    std::fs::write(&file, &text).unwrap();
    let file = file.display().to_string();
    let (code, again, err) = print(
        &[
            "--config",
            &file,
            "--print-config",
            "failure",
            "--reason",
            "boom",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(again, text);

    // Bad input is still refused first.
    let (code, _, err) = print(&["--print-config", "--timeout", "0", "ready"], &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--timeout"), "{err}");
}
