//! Shared by the `reliability_*` tests: running workspace binaries with a hard stop, the
//! fake-wireserver binary as a child process, reading a KVP pool with the oracle, and memory
//! from /proc.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use wirecheck_oracle::kvp::{PoolView, decode_pool};
use wirecheck_test_support::binaries::workspace_binary;
use wirecheck_test_support::http::{Response, exchange_blocking, response};

pub fn provision_report() -> PathBuf {
    workspace_binary("provision-report")
}

pub fn wirecheck() -> PathBuf {
    workspace_binary("wirecheck")
}

/// A multi-threaded runtime for in-process fakes (the tests themselves are synchronous: they
/// spawn processes and wait).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// How a process run ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub elapsed: Duration,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Runs `cmd` to completion, capturing its output; kills it (and fails the test) when it is
/// still running after `hard_stop`, so a hang can never hang the test suite.
pub fn run_with_hard_stop(cmd: &mut Command, hard_stop: Duration) -> Finished {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break status;
        }
        if started.elapsed() > hard_stop {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} was still running after {hard_stop:?}; killed.\nstderr so far:\n{}",
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    Finished {
        status,
        elapsed,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Decodes the pool file as the host would.
pub fn read_pool(path: &Path) -> PoolView {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("reading pool {}: {e}", path.display()));
    decode_pool(&bytes)
}

/// VmRSS of `pid` in KiB.
pub fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line in kB")
}

/// The addresses from the fake binary's ready line.
#[derive(Debug, Clone)]
pub struct FakeAddrs {
    pub wireserver: SocketAddr,
    pub imds: SocketAddr,
    pub proxy: Option<SocketAddr>,
    pub admin: SocketAddr,
    /// The ready line's `admin_token` (every admin request needs it).
    pub admin_token: String,
}

impl FakeAddrs {
    /// `GET path` on the admin listener as its clients send it: its own Host and the token.
    pub fn admin_get(&self, path: &str) -> Response {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            self.admin, self.admin_token
        );
        response(exchange_blocking(
            self.admin,
            request.as_bytes(),
            EXCHANGE_TIMEOUT,
        ))
    }
}

/// The fake-wireserver binary as a child: killed on drop; its stderr goes to a file so a panic
/// message can be looked for afterwards.
pub struct FakeProcess {
    child: Child,
    pub addrs: FakeAddrs,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeProcess {
    pub fn start(extra_args: &[&str]) -> FakeProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr_path = dir.path().join("fake.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut child = Command::new(wirecheck_e2e::fake_binary())
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("starting fake-wireserver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("reading the ready line");
        let ready: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("ready line {line:?} is not JSON: {e}"));
        let addr = |k: &str| -> Option<SocketAddr> {
            ready[k]
                .as_str()
                .map(|s| s.parse().expect("IP:PORT in the ready line"))
        };
        let addrs = FakeAddrs {
            wireserver: addr("wireserver").expect("wireserver address"),
            imds: addr("imds").expect("imds address"),
            proxy: addr("proxy"),
            admin: addr("admin").expect("admin address"),
            admin_token: ready["admin_token"]
                .as_str()
                .expect("admin_token in the ready line")
                .to_owned(),
        };
        FakeProcess {
            child,
            addrs,
            stderr_path,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `None` while it runs.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for FakeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long one raw exchange with the fake may take.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// A normal IMDS request and a goal state request both get 200.
pub fn assert_still_serving(addrs: &FakeAddrs) {
    let imds = response(exchange_blocking(
        addrs.imds,
        b"GET /metadata/instance?api-version=2021-08-01 HTTP/1.1\r\nHost: 169.254.169.254\r\n\
          Metadata: true\r\nConnection: close\r\n\r\n",
        EXCHANGE_TIMEOUT,
    ));
    assert_eq!(imds.status, 200, "IMDS answer: {}", imds.raw_text());
    let goalstate = response(exchange_blocking(
        addrs.wireserver,
        b"GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\n\
          x-ms-version: 2012-11-30\r\nConnection: close\r\n\r\n",
        EXCHANGE_TIMEOUT,
    ));
    assert_eq!(
        goalstate.status,
        200,
        "goal state answer: {}",
        goalstate.raw_text()
    );
}
