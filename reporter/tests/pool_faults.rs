//! The KVP pool under faults: whatever happens to the pool, the wireserver report goes out and
//! the exit status says what became of the KVP record (0 written, 3 not). A huge sparse pool
//! under a memory limit, a lock nobody lets go of, a file size limit, a symlink, a directory
//! or a FIFO at the pool path (the machine's state at boot, not the user's input).

use crate::support;

use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

const GIB: u64 = 1 << 30;

/// Applies a resource limit to the child before it runs.
fn limit(cmd: &mut Command, resource: rustix::process::Resource, bytes: u64) {
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let limit = rustix::process::Rlimit {
                current: Some(bytes),
                maximum: Some(bytes),
            };
            rustix::process::setrlimit(resource, limit).map_err(std::io::Error::from)
        });
    }
}

fn args_for(server: &Server, scratch: &Scratch, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--wireserver",
        &server.url(),
        "--imds",
        &server.url(),
        "--kvp-pool",
        &scratch.pool().display().to_string(),
        "--sysroot",
        &scratch.sysroot().display().to_string(),
        "--timeout",
        "10",
        "--retry-interval",
        "0.2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn server_accepting() -> Server {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    server
}

#[test]
fn an_8_gib_sparse_pool_under_a_memory_limit_is_reported_and_compacted() {
    // A 2 GB VM: the reporter may use a quarter of it. The pool is 8 GiB of holes with a few
    // records at each end and an earlier report near the end.
    let server = server_accepting();
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    let file = std::fs::File::create(scratch.pool()).unwrap();
    let slots = 8 * GIB / 2560;
    for i in 0..3u64 {
        file.write_all_at(&raw_record(&format!("first_{i}"), "at the start"), i * 2560)
            .unwrap();
    }
    let tail: Vec<(String, &str)> = vec![
        ("last_0".into(), "near the end"),
        (
            "PROVISIONING_REPORT".into(),
            "result=error|reason=an earlier run",
        ),
        ("last_1".into(), "at the end"),
    ];
    for (n, (key, value)) in tail.iter().enumerate() {
        let slot = slots - tail.len() as u64 + n as u64;
        file.write_all_at(&raw_record(key, value), slot * 2560)
            .unwrap();
    }
    assert_eq!(file.metadata().unwrap().len(), slots * 2560);
    drop(file);

    let started = Instant::now();
    let run = run_raw_with(&args_for(&server, &scratch, &["ready"]), &[], |cmd| {
        limit(cmd, rustix::process::Resource::As, GIB / 2)
    });
    let elapsed = started.elapsed();
    eprintln!("8 GiB sparse pool: exit {} in {elapsed:.2?}", run.code);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    let posts = server.requests_to("POST", "/provisioning/health");
    assert_eq!(posts.len(), 1, "{:?}", server.targets());
    let records = pool_records(&scratch.pool());
    let keys: Vec<&str> = records.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "first_0",
            "first_1",
            "first_2",
            "last_0",
            "last_1",
            "PROVISIONING_REPORT"
        ],
        "the holes are dropped, the others kept in order, the earlier report replaced"
    );
    assert_eq!(records[3].1, "near the end");
    let report = parse_encoded(&records[5].1);
    assert_eq!(value(&report, "result"), Some("success"));
}

#[test]
fn a_pool_lock_held_past_the_timeout_still_leaves_the_wireserver_report() {
    use rustix::fs::FlockOperation;
    for lock in ["flock", "fcntl"] {
        let server = server_accepting();
        let scratch = Scratch::new();
        std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
        let other = raw_record("OTHER", "value");
        std::fs::write(scratch.pool(), &other).unwrap();
        let holder = std::fs::File::options()
            .read(true)
            .write(true)
            .open(scratch.pool())
            .unwrap();
        match lock {
            "fcntl" => rustix::fs::fcntl_lock(&holder, FlockOperation::LockExclusive).unwrap(),
            _ => rustix::fs::flock(&holder, FlockOperation::LockExclusive).unwrap(),
        }
        // Let go after 4 s, so that a reporter that waits for ever still ends (and fails).
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(4));
            drop(holder);
        });
        let started = Instant::now();
        let run = run_raw(
            &args_for(
                &server,
                &scratch,
                &[
                    "--kvp-lock-timeout",
                    "1",
                    "failure",
                    "--reason",
                    "locked out",
                ],
            ),
            &[],
        );
        let elapsed = started.elapsed();
        release.join().unwrap();
        assert_eq!(run.code, 3, "{lock}: {}", run.stderr);
        assert!(elapsed < Duration::from_secs(3), "{lock}: took {elapsed:?}");
        assert!(
            run.stderr.contains(&format!("held the {lock}")),
            "{lock}: the log names the lock:\n{}",
            run.stderr
        );
        assert!(run.stderr.contains("KVP NOT written"), "{}", run.stderr);
        let posts = server.requests_to("POST", "/provisioning/health");
        assert_eq!(posts.len(), 1, "{lock}: {:?}", server.targets());
        assert!(
            posts[0].body.contains("reason=locked out"),
            "{:?}",
            posts[0]
        );
        assert_eq!(std::fs::read(scratch.pool()).unwrap(), other, "{lock}");
    }
}

#[test]
fn a_pool_that_cannot_be_written_still_leaves_the_wireserver_report() {
    // A file size limit at the pool's current size: growing it fails (EFBIG, as a full disk
    // fails with ENOSPC) instead of SIGXFSZ killing the reporter.
    let server = server_accepting();
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    let mut before = raw_record("OTHER", "value");
    before.extend(raw_record("ANOTHER", "value"));
    std::fs::write(scratch.pool(), &before).unwrap();
    let run = run_raw_with(
        &args_for(&server, &scratch, &["failure", "--reason", "disk full"]),
        &[],
        |cmd| limit(cmd, rustix::process::Resource::Fsize, before.len() as u64),
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("KVP NOT written"), "{}", run.stderr);
    let posts = server.requests_to("POST", "/provisioning/health");
    assert_eq!(posts.len(), 1, "{:?}", server.targets());
    assert!(posts[0].body.contains("reason=disk full"), "{:?}", posts[0]);
    assert_eq!(
        std::fs::read(scratch.pool()).unwrap(),
        before,
        "the pool is left as it was"
    );
}

/// Runs a `failure` report against whatever sits at the pool path; the KVP part must fail
/// (exit 3, the log says why), the report must still go out, promptly.
fn report_despite(what: &str, server: &Server, scratch: &Scratch, why: &str) {
    let started = Instant::now();
    let run = run_raw(
        &args_for(server, scratch, &["failure", "--reason", "odd pool"]),
        &[],
    );
    let elapsed = started.elapsed();
    assert_eq!(run.code, 3, "{what}: {}", run.stderr);
    assert!(elapsed < Duration::from_secs(5), "{what}: took {elapsed:?}");
    assert!(
        run.stderr.contains("KVP NOT written"),
        "{what}: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains(why),
        "{what}: the log says why:\n{}",
        run.stderr
    );
    let posts = server.requests_to("POST", "/provisioning/health");
    assert_eq!(posts.len(), 1, "{what}: {:?}", server.targets());
    assert!(
        posts[0].body.contains("reason=odd pool"),
        "{what}: {:?}",
        posts[0]
    );
}

#[test]
fn a_symlink_at_the_pool_path_still_leaves_the_wireserver_report_and_is_not_followed() {
    let server = server_accepting();
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    let target = scratch.dir.path().join("elsewhere");
    std::fs::write(&target, b"untouched").unwrap();
    std::os::unix::fs::symlink(&target, scratch.pool()).unwrap();
    report_despite("symlink", &server, &scratch, "symbolic link");
    assert_eq!(std::fs::read(&target).unwrap(), b"untouched");
    assert!(
        std::fs::symlink_metadata(scratch.pool())
            .unwrap()
            .is_symlink()
    );

    // A dangling link: nothing is created where it points.
    let server = server_accepting();
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    let missing = scratch.dir.path().join("missing");
    std::os::unix::fs::symlink(&missing, scratch.pool()).unwrap();
    report_despite("dangling symlink", &server, &scratch, "symbolic link");
    assert!(!missing.exists());
}

#[test]
fn a_directory_at_the_pool_path_still_leaves_the_wireserver_report() {
    let server = server_accepting();
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool()).unwrap();
    report_despite("directory", &server, &scratch, "is a directory");
    assert!(std::fs::metadata(scratch.pool()).unwrap().is_dir());
}

#[test]
fn a_fifo_at_the_pool_path_still_leaves_the_wireserver_report() {
    let server = server_accepting();
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        scratch.pool(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    report_despite("FIFO", &server, &scratch, "not a regular file");
}

/// Kills and reaps a child when dropped, so a failed assertion leaves no process behind.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_reporter_that_gave_up_on_the_fcntl_lock_lets_go_of_flock_while_it_retries() {
    use std::io::{BufRead, BufReader};
    // The wireserver refuses for ever: the reporter keeps retrying its report for 10 s.
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(500)]);
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    let other = raw_record("OTHER", "value");
    std::fs::write(scratch.pool(), &other).unwrap();
    // Another process holds the whole-file fcntl write lock (hv_kvp_daemon's kind, a classic
    // POSIX lock) for 30 s: longer than the reporter waits for it.
    let mut holder = Command::new("/usr/bin/python3");
    holder
        .args([
            "-c",
            "import fcntl, sys, time\n\
             f = open(sys.argv[1], 'r+b')\n\
             fcntl.lockf(f, fcntl.LOCK_EX)\n\
             print('locked', flush=True)\n\
             time.sleep(30)\n",
        ])
        .arg(scratch.pool())
        .stdout(std::process::Stdio::piped());
    let mut holder = Reaped(holder.spawn().unwrap());
    let mut line = String::new();
    BufReader::new(holder.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");

    let started = Instant::now();
    let mut reporter = Command::new(env!("CARGO_BIN_EXE_provision-report"));
    reporter
        .env_clear()
        .args(args_for(
            &server,
            &scratch,
            &["--kvp-lock-timeout", "1", "ready"],
        ))
        .stderr(std::process::Stdio::null());
    let mut reporter = Reaped(reporter.spawn().unwrap());

    // flock (what cloud-init and azure-init take) must be free again about a second after
    // the reporter's lock timeout, not when the fcntl holder lets go 30 s later.
    let probe = std::fs::File::open(scratch.pool()).unwrap();
    let mut free_after = None;
    while started.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(100));
        if started.elapsed() < Duration::from_millis(1200) {
            continue;
        }
        if rustix::fs::flock(&probe, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            free_after = Some(started.elapsed());
            break;
        }
    }
    let still_retrying = reporter.0.try_wait().unwrap().is_none();
    let free_after = free_after.expect("flock still held by the reporter 7 s after it gave up");
    // The lock timeout plus process start-up and IMDS on a loaded machine.
    assert!(
        free_after < Duration::from_secs(4),
        "flock free only after {free_after:?}"
    );
    assert!(
        still_retrying,
        "the reporter should still be retrying its report (the wireserver answers 500)"
    );
    assert!(
        !server
            .requests_to("POST", "/provisioning/health")
            .is_empty(),
        "the report is being sent despite the lock"
    );
    drop(probe);
    drop(reporter);
    drop(holder);
    assert_eq!(std::fs::read(scratch.pool()).unwrap(), other);
}
