//! Support for the end-to-end tests in `tests/tests/`: locating the binaries and the real
//! agents, running an agent against the fake-wireserver binary in a private network namespace
//! (or in `fake-wireserver sandbox`), and normalising what was received for snapshots.
//!
//! Every agent run happens inside a network namespace created for it (`unshare --net`, or the
//! sandbox's own); nothing is ever sent to 168.63.129.16 or 169.254.169.254 outside one.
//! A missing agent or privilege is a test failure with instructions, never a skip.

pub mod kill_loop;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fake_wireserver::EndpointId;
use fake_wireserver::journal::Entry;

/// The repository root (this crate lives in `<root>/tests`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

pub use wirecheck_test_support::binaries::workspace_binary;

/// The fake-wireserver binary under test.
pub fn fake_binary() -> PathBuf {
    workspace_binary("fake-wireserver")
}

/// The agents need namespaces, which need root here; without it the tests fail (not skip).
pub fn require_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the end-to-end agent tests create network namespaces and must run as root"
    );
}

fn install_hint() -> String {
    format!(
        "run `sudo bash {}` to install the real agents",
        repo_root().join("scripts/install-agents.sh").display()
    )
}

/// Debian's python3 with cloud-init 22.4.2 importable.
pub fn cloud_init_python() -> PathBuf {
    let python = PathBuf::from("/usr/bin/python3");
    let probe = Command::new(&python)
        .args([
            "-c",
            "import cloudinit.version as v; print(v.version_string())",
        ])
        .output();
    let version = match probe {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Ok(out) => panic!(
            "cloud-init is not installed (/usr/bin/python3 cannot import cloudinit: {}): {}",
            String::from_utf8_lossy(&out.stderr).trim(),
            install_hint()
        ),
        Err(e) => panic!(
            "/usr/bin/python3 not found ({e}); cloud-init is not installed: {}",
            install_hint()
        ),
    };
    assert_eq!(
        version,
        "22.4.2",
        "these tests pin cloud-init 22.4.2 (Debian 12's package); found {version}: {}",
        install_hint()
    );
    python
}

/// The driver calling cloud-init's own fabric functions.
pub fn cloud_init_driver() -> PathBuf {
    repo_root().join("conformance/agents/cloud-init-driver.py")
}

/// `PYTHONPATH` for cloud-init 25.1.4 as unpacked by scripts/install-agents.sh (Debian 13's
/// package, never installed), checked to import as 25.1.4 with /usr/bin/python3.
pub fn cloud_init_25_pythonpath() -> PathBuf {
    cloud_init_pythonpath("cloud-init-25.1.4", "25.1.4")
}

/// `PYTHONPATH` for cloud-init 26.2 as unpacked by scripts/install-agents.sh (Debian
/// unstable's package, never installed), checked to import as 26.2 with /usr/bin/python3.
pub fn cloud_init_26_pythonpath() -> PathBuf {
    cloud_init_pythonpath("cloud-init-26.2", "26.2")
}

/// `target/agents/<dir>/usr/lib/python3/dist-packages`, checked to import as `version`.
fn cloud_init_pythonpath(dir: &str, version: &str) -> PathBuf {
    let path = repo_root()
        .join("target/agents")
        .join(dir)
        .join("usr/lib/python3/dist-packages");
    let probe = Command::new("/usr/bin/python3")
        .env("PYTHONPATH", &path)
        .args([
            "-c",
            "import cloudinit.version as v; print(v.version_string())",
        ])
        .output();
    let found = match probe {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Ok(out) => panic!(
            "cloud-init {version} is not unpacked in {} ({}): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim(),
            install_hint()
        ),
        Err(e) => panic!("/usr/bin/python3 not found ({e}): {}", install_hint()),
    };
    assert_eq!(
        found,
        version,
        "{} holds cloud-init {found}, these tests pin {version}: {}",
        path.display(),
        install_hint()
    );
    path
}

/// The driver calling cloud-init 25.1's own DataSourceAzure sequence.
pub fn cloud_init_25_driver() -> PathBuf {
    repo_root().join("conformance/agents/cloud-init-25-driver.py")
}

/// The driver calling cloud-init 26's own DataSourceAzure sequence (the VM id passed in).
pub fn cloud_init_26_driver() -> PathBuf {
    repo_root().join("conformance/agents/cloud-init-26-driver.py")
}

/// afterburn 5.11.0 as built by scripts/install-agents.sh.
pub fn afterburn_binary() -> PathBuf {
    let path = repo_root().join("target/agents/afterburn/bin/afterburn");
    assert!(
        path.is_file(),
        "afterburn is not built ({} is missing): {}",
        path.display(),
        install_hint()
    );
    let out = Command::new(&path)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}: {}", path.display(), install_hint()));
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.contains("5.11.0"),
        "expected afterburn 5.11.0 at {}, got {version:?}: {}",
        path.display(),
        install_hint()
    );
    path
}

/// WALinuxAgent as unpacked by scripts/install-agents.sh: `target/agents/walinuxagent-<dir>/`
/// holding `usr/sbin/waagent` of package version `version` (e.g. `2.7.3.0`).
pub fn walinuxagent_root(dir: &str, version: &str) -> PathBuf {
    let root = repo_root()
        .join("target/agents")
        .join(format!("walinuxagent-{dir}"));
    let version_py = root.join("usr/lib/python3/dist-packages/azurelinuxagent/common/version.py");
    let text = std::fs::read_to_string(&version_py).unwrap_or_else(|e| {
        panic!(
            "WALinuxAgent {version} is not unpacked ({}: {e}): {}",
            version_py.display(),
            install_hint()
        )
    });
    assert!(
        text.contains(&format!("AGENT_VERSION = '{version}'")),
        "expected WALinuxAgent {version} in {}: {}",
        root.display(),
        install_hint()
    );
    assert!(
        root.join("usr/sbin/waagent").is_file(),
        "{}",
        install_hint()
    );
    root
}

/// What one agent run left behind.
#[derive(Debug)]
pub struct AgentRun {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub journal: Vec<Entry>,
    /// The run's folder (journal, fake output, pool files the test placed there).
    pub dir: PathBuf,
}

impl AgentRun {
    fn from_output(output: Output, journal: Vec<Entry>, dir: &Path) -> Self {
        AgentRun {
            status: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            journal,
            dir: dir.to_path_buf(),
        }
    }

    /// Panics with the agent's output unless it exited 0.
    pub fn assert_success(&self) -> &Self {
        assert_eq!(
            self.status,
            Some(0),
            "agent failed\n--- stdout\n{}\n--- stderr\n{}\n--- journal\n{:#?}",
            self.stdout,
            self.stderr,
            self.journal
                .iter()
                .map(|e| format!("{} {} -> {:?}", e.method, e.target, e.answer.status))
                .collect::<Vec<_>>()
        );
        self
    }

    /// The entries for one endpoint id, in order.
    pub fn entries(&self, endpoint: EndpointId) -> Vec<&Entry> {
        self.journal
            .iter()
            .filter(|e| e.endpoint == endpoint)
            .collect()
    }

    /// The one health report of the run (panics unless there is exactly one).
    pub fn single(&self, endpoint: EndpointId) -> &Entry {
        let entries = self.entries(endpoint);
        assert_eq!(
            entries.len(),
            1,
            "expected exactly one {endpoint} request, journal: {:#?}",
            self.journal
                .iter()
                .map(|e| format!("{} {} [{}]", e.method, e.target, e.endpoint))
                .collect::<Vec<_>>()
        );
        entries[0]
    }
}

/// How the agent reaches the fake inside its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// The fake on 127.0.0.1 ports; the agent gets `{wireserver}` / `{imds}` substituted.
    Url,
    /// The fake's proxy listener in `http_proxy`/`HTTP_PROXY`; the agent uses the real
    /// addresses, which exist nowhere in the namespace.
    Proxy,
}

/// One agent run under `unshare --net [--mount]` with `e2e-netns-run`.
pub struct NetnsRun {
    harness: PathBuf,
    dir: PathBuf,
    attach: Attach,
    tmpfs: Vec<String>,
    lease: Option<String>,
    fake_args: Vec<String>,
}

impl NetnsRun {
    /// `harness` is `env!("CARGO_BIN_EXE_e2e-netns-run")`; `dir` the run's folder.
    pub fn new(harness: &str, dir: &Path, attach: Attach) -> Self {
        require_root();
        NetnsRun {
            harness: PathBuf::from(harness),
            dir: dir.to_path_buf(),
            attach,
            tmpfs: Vec::new(),
            lease: None,
            fake_args: Vec::new(),
        }
    }

    /// A private tmpfs on this folder inside the run's mount namespace.
    pub fn tmpfs(mut self, dir: &str) -> Self {
        self.tmpfs.push(dir.to_owned());
        self
    }

    /// A networkd lease for `lo` with `OPTION_245=hex` (implies a private `/run`).
    pub fn lease(mut self, hex: &str) -> Self {
        if !self.tmpfs.iter().any(|d| d == "/run") {
            self.tmpfs.push("/run".to_owned());
        }
        self.lease = Some(hex.to_owned());
        self
    }

    pub fn fake_arg(mut self, arg: &str) -> Self {
        self.fake_args.push(arg.to_owned());
        self
    }

    /// Runs the agent (`{wireserver}`, `{imds}`, `{proxy}` in its arguments are replaced by
    /// the fake's addresses) and collects the journal.
    pub fn run(self, agent: &[&str]) -> AgentRun {
        let mut cmd = Command::new("unshare");
        cmd.arg("--net");
        if !self.tmpfs.is_empty() {
            cmd.args(["--mount", "--propagation", "private"]);
        }
        cmd.arg("--").arg(&self.harness);
        cmd.arg("--fake").arg(fake_binary());
        cmd.arg("--out").arg(&self.dir);
        if self.attach == Attach::Proxy {
            cmd.arg("--proxy-env");
        }
        for dir in &self.tmpfs {
            cmd.arg("--tmpfs").arg(dir);
        }
        if let Some(hex) = &self.lease {
            cmd.arg("--lease").arg(hex);
        }
        for arg in &self.fake_args {
            cmd.arg(format!("--fake-arg={arg}"));
        }
        cmd.arg("--").args(agent);
        let output = cmd.output().expect("cannot run unshare (util-linux)");
        let journal_path = self.dir.join("journal.json");
        let journal = match std::fs::read_to_string(&journal_path) {
            Ok(text) => serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not a journal: {e}", journal_path.display())),
            Err(e) => panic!(
                "no journal at {} ({e}); harness output:\n{}\n{}\nfake stderr:\n{}",
                journal_path.display(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                std::fs::read_to_string(self.dir.join("fake.stderr")).unwrap_or_default()
            ),
        };
        AgentRun::from_output(output, journal, &self.dir)
    }
}

/// What `fake-wireserver sandbox` left in `--out`.
#[derive(Debug)]
pub struct SandboxRun {
    pub run: AgentRun,
    /// The copied `.kvp_pool_*` files by name.
    pub pools: Vec<(String, Vec<u8>)>,
    /// `sandbox.json`.
    pub summary: serde_json::Value,
}

/// Runs `fake-wireserver sandbox --out DIR [extra...] -- command...` and reads its artifacts.
pub fn run_sandbox(out: &Path, extra: &[&str], command: &[&str]) -> SandboxRun {
    use wirecheck_test_support::sandbox;
    require_root();
    let output = sandbox::run(&fake_binary(), out, extra, command);
    assert!(
        out.join("journal.jsonl").is_file(),
        "no journal in {}; {}",
        out.display(),
        sandbox::describe(&output)
    );
    let journal = sandbox::journal(out);
    let summary = if out.join("sandbox.json").is_file() {
        sandbox::summary(out)
    } else {
        serde_json::Value::Null
    };
    SandboxRun {
        run: AgentRun::from_output(output, journal, out),
        pools: sandbox::pools(out),
        summary,
    }
}

/// A request vector from `testdata/vectors/http/`.
pub fn vector(path: &str) -> serde_json::Value {
    let full = repo_root().join("testdata/vectors/http").join(path);
    let text = std::fs::read_to_string(&full)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", full.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Header names of a vector, in order (`Host` and `Content-Length` values vary with the
/// served ids and the attach mode; the names and their order are the agent's fingerprint).
pub fn vector_header_names(vector: &serde_json::Value) -> Vec<String> {
    vector["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .map(|h| h[0].as_str().expect("header name").to_owned())
        .collect()
}

pub fn header_names(entry: &Entry) -> Vec<String> {
    entry.headers.iter().map(|(n, _)| n.clone()).collect()
}

/// A verdict as a whole-suite verdict snapshot records it. A timing check (`behaviour.interval`,
/// `.budget`, `.timeout`, `.rate`) that passed, one the machine's stalls left unjudged
/// (`informational`, every attempt stalled) and one failed within a declared deviation
/// (`non-strict`: cloud-init's last IMDS attempt lands up to 1 s past its deadline, inside or
/// outside the runner's measured lag) are recorded alike: which of them a loaded machine gives
/// is the machine's, not the agent's, and a snapshot must not record the load. A `fail` is
/// never recorded (the tests assert there is none), every other verdict as it is.
pub fn snapshot_verdict(id: &str, verdict: &str) -> String {
    let timing = [
        ".behaviour.interval",
        ".behaviour.budget",
        ".behaviour.timeout",
        ".behaviour.rate",
    ]
    .iter()
    .any(|check| id.ends_with(check));
    match verdict {
        "pass" | "informational" | "non-strict" if timing => {
            "pass, declared or unjudged (timing)".to_owned()
        }
        other => other.to_owned(),
    }
}

/// `wirecheck run --quiet --out OUT ARGS...` from the checkout, with none of the caller's
/// `WIRECHECK_*` selection or speed variables leaking in.
pub fn wirecheck_run(out: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(workspace_binary("wirecheck"))
        .current_dir(repo_root())
        .args(["run", "--quiet", "--out"])
        .arg(out)
        .args(args)
        .env_remove("WIRECHECK_CASES")
        .env_remove("WIRECHECK_EXCLUDE")
        .env_remove("WIRECHECK_PARTITION")
        .env_remove("WIRECHECK_TIME_SCALE")
        .output()
        .expect("run wirecheck")
}
