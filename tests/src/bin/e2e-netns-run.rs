//! `e2e-netns-run`: runs one agent against the fake-wireserver binary, both inside the private
//! network (and optionally mount) namespace this process was started in.
//!
//! The end-to-end tests start it as `unshare --net [--mount --propagation private] --
//! e2e-netns-run ...`. It refuses to run in the host's namespaces, so nothing it starts can
//! reach the network, let alone 168.63.129.16 or 169.254.169.254.
//!
//! 1. brings `lo` up; mounts each `--tmpfs` folder; writes a networkd lease with `--lease`;
//! 2. starts `--fake` on ephemeral 127.0.0.1 ports (plus `--proxy` with `--proxy-env`) and
//!    reads its ready line;
//! 3. runs AGENT with `{wireserver}` / `{imds}` / `{proxy}` in its arguments replaced by the
//!    fake's `host:port`, all proxy variables removed from its environment, and with
//!    `--proxy-env` `http_proxy`/`HTTP_PROXY` pointing to the fake's proxy listener;
//! 4. writes the fake's journal (admin API, once every request is answered) to
//!    `--out/journal.json` and the ready line to `--out/fake.json`, stops the fake and exits
//!    with the agent's status (128 + N for a signal).

use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use serde::Deserialize;

#[derive(Debug, Parser)]
#[command(about = "Run an agent against the fake inside this private network namespace")]
struct Args {
    /// The fake-wireserver binary.
    #[arg(long)]
    fake: PathBuf,
    /// Folder for journal.json, fake.json and fake.stderr.
    #[arg(long)]
    out: PathBuf,
    /// Start the fake's proxy listener and point http_proxy/HTTP_PROXY at it.
    #[arg(long)]
    proxy_env: bool,
    /// Mount a private tmpfs on this folder (needs a private mount namespace).
    #[arg(long, value_name = "DIR")]
    tmpfs: Vec<PathBuf>,
    /// Write /run/systemd/netif/leases/<ifindex of lo> with OPTION_245=HEX (needs --tmpfs /run).
    #[arg(long, value_name = "HEX")]
    lease: Option<String>,
    /// Extra argument for the fake (repeatable), e.g. --fake-arg=--scenario --fake-arg=FILE.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    fake_arg: Vec<String>,
    /// The agent and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    agent: Vec<String>,
}

/// The fake's ready line (contract §5).
#[derive(Debug, Deserialize)]
struct Ready {
    wireserver: String,
    imds: String,
    proxy: Option<String>,
    admin: String,
    admin_token: String,
}

const PROXY_VARIABLES: [&str; 8] = fake_wireserver::proxy::CLIENT_VARIABLES;

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("e2e-netns-run: error: {e:#}");
            ExitCode::from(125)
        }
    }
}

fn namespace_inode(pid: &str, kind: &str) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/ns/{kind}");
    Ok(std::fs::metadata(&path)
        .with_context(|| format!("cannot stat {path}"))?
        .ino())
}

fn tool(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed: {status}", args.join(" "));
    }
    Ok(())
}

fn run(args: Args) -> anyhow::Result<u8> {
    // Never touch the host: the network namespace must be a new one, and so must the mount
    // namespace when anything is mounted. `unshare` (without --fork) execs this program, so the
    // parent is the process that started `unshare`, still in the host's namespaces.
    let parent = rustix::process::getppid()
        .map(|p| p.as_raw_nonzero().to_string())
        .context("no parent process")?;
    if namespace_inode("self", "net")? == namespace_inode(&parent, "net")? {
        bail!("not inside a private network namespace: start me under `unshare --net`");
    }
    if !args.tmpfs.is_empty() && namespace_inode("self", "mnt")? == namespace_inode(&parent, "mnt")?
    {
        bail!("--tmpfs needs a private mount namespace: start me under `unshare --net --mount`");
    }
    tool("ip", &["link", "set", "dev", "lo", "up"])?;
    for dir in &args.tmpfs {
        let dir = dir.to_str().context("--tmpfs path is not UTF-8")?;
        // -n: no /run/mount/utab entry, which would land in the host's /run.
        tool(
            "mount",
            &["-n", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", dir],
        )?;
    }
    if let Some(hex) = &args.lease {
        write_lease(hex, &args.tmpfs)?;
    }

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let (mut fake, ready) = start_fake(&args)?;
    let result = run_agent(&args, &ready);
    let journal = fetch_settled_journal(&ready.admin, &ready.admin_token);
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_child(&fake),
        rustix::process::Signal::TERM,
    );
    let _ = fake.wait();
    std::fs::write(args.out.join("journal.json"), journal?).context("cannot write journal.json")?;
    result
}

fn write_lease(hex: &str, tmpfs: &[PathBuf]) -> anyhow::Result<()> {
    if !tmpfs.iter().any(|d| d == Path::new("/run")) {
        bail!("--lease needs --tmpfs /run (the host's /run is never written)");
    }
    if hex.len() != 8 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("--lease {hex:?}: expected 8 hex digits (e.g. A83F8110 for 168.63.129.16)");
    }
    // `lo` is interface 1 in every network namespace; read it anyway.
    let ifindex = std::fs::read_to_string("/sys/class/net/lo/ifindex")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1);
    let dir = Path::new("/run/systemd/netif/leases");
    std::fs::create_dir_all(dir).context("cannot create the lease folder")?;
    std::fs::write(
        dir.join(ifindex.to_string()),
        format!("# This is private data. Do not parse.\nOPTION_245={hex}\n"),
    )
    .context("cannot write the lease file")
}

fn start_fake(args: &Args) -> anyhow::Result<(Child, Ready)> {
    let stderr =
        std::fs::File::create(args.out.join("fake.stderr")).context("cannot create fake.stderr")?;
    let mut cmd = Command::new(&args.fake);
    cmd.args(["--wireserver", "127.0.0.1:0", "--imds", "127.0.0.1:0"]);
    cmd.args(["--admin", "127.0.0.1:0"]);
    if args.proxy_env {
        cmd.args(["--proxy", "127.0.0.1:0"]);
    }
    cmd.args(&args.fake_arg);
    let mut fake = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {}", args.fake.display()))?;
    let mut line = String::new();
    BufReader::new(fake.stdout.take().expect("piped"))
        .read_line(&mut line)
        .context("cannot read the fake's ready line")?;
    if line.trim().is_empty() {
        let status = fake.wait()?;
        bail!(
            "the fake exited ({status}) without a ready line; see {}",
            args.out.join("fake.stderr").display()
        );
    }
    std::fs::write(args.out.join("fake.json"), &line).context("cannot write fake.json")?;
    let ready: Ready = serde_json::from_str(&line)
        .with_context(|| format!("unexpected ready line from the fake: {line:?}"))?;
    if args.proxy_env && ready.proxy.is_none() {
        bail!("the fake reported no proxy listener although --proxy was given");
    }
    Ok((fake, ready))
}

fn run_agent(args: &Args, ready: &Ready) -> anyhow::Result<u8> {
    let substitute = |arg: &String| {
        arg.replace("{wireserver}", &ready.wireserver)
            .replace("{imds}", &ready.imds)
            .replace("{proxy}", ready.proxy.as_deref().unwrap_or(""))
    };
    let agent: Vec<String> = args.agent.iter().map(substitute).collect();
    let mut cmd = Command::new(&agent[0]);
    cmd.args(&agent[1..]);
    for var in PROXY_VARIABLES {
        cmd.env_remove(var);
    }
    if let Some(proxy) = ready.proxy.as_deref().filter(|_| args.proxy_env) {
        let url = format!("http://{proxy}");
        cmd.env("http_proxy", &url).env("HTTP_PROXY", &url);
    }
    let status = cmd
        .status()
        .with_context(|| format!("cannot run the agent {}", agent[0]))?;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(255),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 255,
    })
}

/// The journal once every entry is answered (`done_ms` set), or as it is after 5 s.
fn fetch_settled_journal(admin: &str, token: &str) -> anyhow::Result<String> {
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .context("cannot build the admin client")?;
    let url = format!("http://{admin}/__admin/journal");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let body = client
            .get(&url)
            .bearer_auth(token)
            .send()
            .and_then(|r| r.error_for_status())
            .and_then(|r| r.text())
            .with_context(|| format!("GET {url}"))?;
        let entries: Vec<serde_json::Value> =
            serde_json::from_str(&body).with_context(|| format!("GET {url}: not a JSON array"))?;
        let settled = entries.iter().all(|e| !e["done_ms"].is_null());
        if settled || Instant::now() >= deadline {
            return Ok(body);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
