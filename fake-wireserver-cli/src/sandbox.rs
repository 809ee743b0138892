//! `fake-wireserver sandbox [OPTIONS] -- COMMAND [ARGS...]`: run an unmodified agent where the
//! fake answers on the platform's real addresses. Its contract (addresses, files, limits, exit
//! statuses) is the library's `fake_wireserver::sandbox`.
//!
//! The sandbox makes new network, mount, UTS and PID namespaces (util-linux `unshare`, then this
//! binary re-executes itself inside them), and in there:
//!
//! * brings `lo` up and adds `168.63.129.16/32` and `169.254.169.254/32` to it; the fake's
//!   wireserver and IMDS listeners bind port 80 of those addresses;
//! * with `--refuse wireserver` / `--refuse imds`, serves nothing on that host: the address
//!   stays on `lo` with no listener, so the agent's connection is refused (a RST to its SYN),
//!   as a closed loopback port refuses it; `wireserver` takes the HostGAPlugin (port 32526 of
//!   the same address) with it. `sandbox.json` lists what was refused, and each attempt on
//!   it with the time its SYN came (`sandbox/refused.rs`, `fake_wireserver::syn_watch`);
//! * mounts a tmpfs over `/run` holding a systemd-networkd lease file
//!   `/run/systemd/netif/leases/<ifindex of lo>` with `OPTION_245=A83F8110`, so agents that look
//!   up the wireserver address in DHCP option 245 (afterburn) find it at once (docs/protocol.md §9);
//! * mounts a private tmpfs on `/var/lib/hyperv` for the KVP pool files, bounded to
//!   [`HYPERV_TMPFS_SIZE`] of memory, holding the empty `.kvp_pool_0` to `.kvp_pool_4` (mode
//!   0644, the agent's) that hv_kvp_daemon creates on a VM before any agent runs;
//! * with `--unprivileged`, runs COMMAND as root of a user namespace of its own that is nobody
//!   (65534) on the host, without capabilities, under the agent system-call filter
//!   (`fake_wireserver::contain`), with `/var/lib/hyperv` nobody's (what else it must write,
//!   the caller hands to nobody and binds in; a `--bind` target below `/run` is made);
//! * runs COMMAND (within `--limits`, in a cgroup of its own where the machine allows), then
//!   writes the journal (`journal.jsonl`, JSON Lines) and copies of
//!   `/var/lib/hyperv/.kvp_pool_*` into `--out DIR`: regular files of at most
//!   [`POOL_COPY_MAX`] bytes only, never followed through a link; the others are listed in
//!   `sandbox.json` (`pools_not_copied`, with the reason). `sandbox.json` also counts the
//!   journal's lines (`journal_entries`) and the requests its memory window dropped before it
//!   was written (`journal_evicted`): a journal that is not whole says so.
//!
//! * with `--guest FILE`, makes COMMAND's world a simulated Azure VM (`fake_wireserver::guest`):
//!   private `/etc`, `/home`, `/root`, `/mnt`, `/var/mail`, DMI, provisioning media, `eth0`,
//!   and recording stand-ins for `useradd` and the other provisioning tools;
//! * with `--time-scale FACTOR`, runs COMMAND's clock and the fake's scripted times in agent
//!   time (`fake_wireserver::clock`), FACTOR times faster than the wall clock;
//!
//! The exit status is COMMAND's (128 + N when a signal N ended it, 124 after `--timeout`,
//! 126/127 when it cannot be started, 125 when the sandbox itself failed, 2 for bad usage and
//! when not run as root). Mount propagation is private, so the host's network, `/run` and
//! `/var/lib/hyperv` are never touched; when the PID namespace's first process (the sandbox)
//! exits, the kernel ends whatever COMMAND left behind.

mod artifacts;
pub(crate) mod guest;
mod inside;
mod outside;
mod refused;
mod setup;

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use fake_wireserver::scenario::MAX_SECONDS;

pub use fake_wireserver::sandbox::*;

/// Options of `fake-wireserver sandbox`.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// Scenario file (TOML) for the fake; default behaviour without it.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,

    /// Guest file (TOML, `fake_wireserver::guest`): COMMAND provisions a simulated VM with a
    /// private /etc, /home, /root, /mnt and /var/mail, DMI, the provisioning media with its
    /// ovf-env.xml, a primary NIC, and recording stand-ins for the provisioning tools, which
    /// fail as the file says. Their calls go to guest-calls.jsonl in --out. Not with
    /// --unprivileged.
    #[arg(long, value_name = "FILE")]
    pub guest: Option<PathBuf>,

    /// Folder for journal.jsonl and the copied .kvp_pool_* files (created when missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Stop COMMAND with SIGKILL after this many seconds (exit status 124); artifacts are
    /// still written.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    pub timeout: Option<f64>,

    /// With --timeout: its clock starts at COMMAND's first request to the fake (any listener)
    /// or first connection attempt to a refused host, or SECONDS after COMMAND started when
    /// none came by then. A slow start (a loaded
    /// machine, an interpreter's imports) then does not eat into the time the scenario gives.
    #[arg(long, value_name = "SECONDS", value_parser = parse_grace, requires = "timeout")]
    pub startup: Option<f64>,

    /// Serve nothing on this platform host: `wireserver` (168.63.129.16, ports 80 and the
    /// HostGAPlugin's 32526: one host) or `imds` (169.254.169.254:80). The address stays on
    /// the sandbox's `lo` with no listener, so a connection to it is refused (RST), as a closed
    /// port refuses it. Repeatable; `sandbox.json` lists what was refused.
    #[arg(long, value_name = "HOST", value_parser = parse_refuse)]
    pub refuse: Vec<PlatformHost>,

    /// Bind-mount the host folder SRC over the folder DST inside the sandbox's mount namespace
    /// (e.g. a scratch folder over `/var/log` for agents with a fixed log path). A DST below
    /// `/run` (the sandbox's own tmpfs) is made when missing. Repeatable.
    #[arg(long = "bind", value_name = "SRC:DST", value_parser = parse_bind)]
    pub binds: Vec<Bind>,

    /// Stop COMMAND (SIGTERM to every process of the sandbox, SIGKILL 5 s later) once the
    /// journal holds a terminal health report (Ready, or NotReady other than `Provisioning`)
    /// and SECONDS more have passed: for agents that never exit after reporting (WALinuxAgent
    /// sleeps forever). `sandbox.json` then says `"stopped_when_done": true`.
    #[arg(long, value_name = "SECONDS", value_parser = parse_grace)]
    pub stop_after_report: Option<f64>,

    /// Run COMMAND as root of a user namespace of its own whose root is nobody (65534) on the
    /// host, without capabilities, under the agent system-call filter (no io_uring, keyrings,
    /// Unix sockets, mounts or new namespaces): it reads and writes only what any local user
    /// may, and `/var/lib/hyperv` is nobody's. Folders it must write are the caller's to hand
    /// to nobody (a `--bind` source).
    #[arg(long)]
    pub unprivileged: bool,
    /// Limit what COMMAND's process tree may use (every field optional, the others at their
    /// defaults): `processes=N` (processes and threads), `memory_mib=N`, `file_size_mib=N`
    /// (a write past it gets SIGXFSZ), `open_files=N`. The processes and memory are held by a
    /// cgroup of COMMAND's own where the machine allows (fake_wireserver::limits), else by
    /// rlimits per process; the fake itself is outside them.
    #[arg(long, value_name = "NAME=N,...", value_parser = parse_limits)]
    pub limits: Option<fake_wireserver::limits::Limits>,

    /// Agent time: run COMMAND's clock FACTOR times faster than the wall clock (libfaketime
    /// preloaded with that speed: its sleeps, clocks, poll/epoll and socket timeouts) and the
    /// fake's scripted times and journal at the same speed, so a 20-minute budget takes a
    /// minute at x20. A statically linked COMMAND keeps the wall clock: do not scale it.
    /// `--timeout`, `--startup` and `--stop-after-report` stay wall seconds; `sandbox.json`
    /// says the scale (`time_scale`) and its times are agent milliseconds.
    #[arg(long, value_name = "FACTOR")]
    pub time_scale: Option<fake_wireserver::clock::TimeScale>,

    /// Internal: set when the sandbox re-executes itself inside the new namespaces; the value
    /// names the host's namespaces (`NET_INODE:MNT_INODE`) so the inner half can verify it is
    /// not in them.
    #[arg(long, hide = true, value_name = "NET:MNT")]
    pub inside_namespaces: Option<String>,

    /// Internal: the inner half writes its exit status to this inherited file descriptor.
    #[arg(long, hide = true, value_name = "FD", requires = "inside_namespaces")]
    pub status_fd: Option<i32>,

    /// The command to run in the sandbox, with its arguments.
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// One `--bind SRC:DST`: two absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub source: PathBuf,
    pub target: PathBuf,
}

fn parse_bind(s: &str) -> Result<Bind, String> {
    let Some((source, target)) = s.split_once(':') else {
        return Err(format!("expected SRC:DST (two absolute paths), got {s:?}"));
    };
    let (source, target) = (PathBuf::from(source), PathBuf::from(target));
    if !source.is_absolute() || !target.is_absolute() {
        return Err(format!("expected SRC:DST with absolute paths, got {s:?}"));
    }
    Ok(Bind { source, target })
}

fn parse_refuse(s: &str) -> Result<PlatformHost, String> {
    s.parse()
}

fn parse_limits(s: &str) -> Result<fake_wireserver::limits::Limits, String> {
    fake_wireserver::limits::Limits::parse(s)
}

fn parse_grace(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        // Bounded: `Duration::from_secs_f64` panics past u64::MAX seconds.
        Ok(v) if v.is_finite() && (0.0..=MAX_SECONDS).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a number of seconds from 0 to {MAX_SECONDS}, got {s:?}"
        )),
    }
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_SECONDS => Ok(v),
        _ => Err(format!(
            "expected a positive number of seconds up to {MAX_SECONDS}, got {s:?}"
        )),
    }
}

/// Runs the sandbox. Returns the exit status the process should end with.
///
/// Outside the namespaces this checks privileges and input, then runs
/// `unshare ... -- <this binary> sandbox --inside-namespaces ...` and waits for it. Inside, it
/// sets the namespaces up, runs the fake and COMMAND and writes the artifacts. Errors are
/// reported on stderr and mapped to the exit statuses above, so this returns `Ok` in practice.
pub fn run(args: SandboxArgs) -> anyhow::Result<i32> {
    match args.inside_namespaces.clone() {
        Some(host) => Ok(inside::run(args, &host)),
        None => Ok(outside::run(args)),
    }
}

/// The namespaces a process is in, as the inode numbers of `/proc/self/ns/{net,mnt}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NamespaceIds {
    pub(crate) net: u64,
    pub(crate) mnt: u64,
}

impl NamespaceIds {
    pub(crate) fn of_self() -> std::io::Result<Self> {
        Ok(NamespaceIds {
            net: std::fs::metadata("/proc/self/ns/net")?.ino(),
            mnt: std::fs::metadata("/proc/self/ns/mnt")?.ino(),
        })
    }

    pub(crate) fn encode(self) -> String {
        format!("{}:{}", self.net, self.mnt)
    }

    pub(crate) fn decode(s: &str) -> Option<Self> {
        let (net, mnt) = s.split_once(':')?;
        Some(NamespaceIds {
            net: net.parse().ok()?,
            mnt: mnt.parse().ok()?,
        })
    }
}

fn error(message: impl std::fmt::Display) {
    eprintln!("fake-wireserver sandbox: error: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;
    use std::path::Path;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        sandbox: SandboxArgs,
    }

    #[test]
    fn sandbox_args_take_the_command_after_double_dash() {
        let cli = Cli::try_parse_from([
            "x",
            "--out",
            "o",
            "--timeout",
            "2.5",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .unwrap();
        assert_eq!(cli.sandbox.out, PathBuf::from("o"));
        assert_eq!(cli.sandbox.timeout, Some(2.5));
        assert_eq!(cli.sandbox.command, ["sh", "-c", "exit 3"]);
        assert!(cli.sandbox.inside_namespaces.is_none());
    }

    #[test]
    fn huge_timeouts_are_refused_not_a_panic_later() {
        for flag in ["--timeout", "--stop-after-report"] {
            for bad in ["1e300", "inf", "86401"] {
                let e = Cli::try_parse_from(["x", "--out", "o", flag, bad, "--", "true"])
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("86400"), "{flag} {bad}: {e}");
            }
        }
    }

    #[test]
    fn sandbox_binds_and_stop_after_report_parse() {
        let cli = Cli::try_parse_from([
            "x",
            "--out",
            "o",
            "--bind",
            "/tmp/log:/var/log",
            "--stop-after-report",
            "1.5",
            "--",
            "true",
        ])
        .unwrap();
        assert_eq!(
            cli.sandbox.binds,
            [Bind {
                source: "/tmp/log".into(),
                target: "/var/log".into()
            }]
        );
        assert_eq!(cli.sandbox.stop_after_report, Some(1.5));
        for bad in ["relative:/var/log", "/tmp/log", "/a:b"] {
            let err = Cli::try_parse_from(["x", "--out", "o", "--bind", bad, "--", "true"])
                .unwrap_err()
                .to_string();
            assert!(err.contains("SRC:DST"), "{bad}: {err}");
        }
        assert!(
            Cli::try_parse_from(["x", "--out", "o", "--stop-after-report=-1", "--", "true"])
                .is_err()
        );
    }

    #[test]
    fn sandbox_refuse_takes_the_two_platform_hosts_only() {
        let cli = Cli::try_parse_from([
            "x",
            "--out",
            "o",
            "--refuse",
            "imds",
            "--refuse=wireserver",
            "--",
            "true",
        ])
        .unwrap();
        assert_eq!(
            cli.sandbox.refuse,
            [PlatformHost::Imds, PlatformHost::Wireserver]
        );
        let err = Cli::try_parse_from(["x", "--out", "o", "--refuse", "hostplugin", "--", "true"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected `wireserver` or `imds`"), "{err}");
    }

    #[test]
    fn sandbox_args_require_out_and_command() {
        assert!(Cli::try_parse_from(["x", "--", "true"]).is_err());
        assert!(Cli::try_parse_from(["x", "--out", "o"]).is_err());
    }

    #[test]
    fn sandbox_timeout_must_be_positive() {
        for bad in ["0", "-1", "nan", "soon"] {
            let err =
                Cli::try_parse_from(["x", "--out", "o", &format!("--timeout={bad}"), "--", "true"])
                    .unwrap_err()
                    .to_string();
            assert!(err.contains("positive number of seconds"), "{bad}: {err}");
        }
    }

    #[test]
    fn sandbox_namespace_ids_round_trip() {
        let ids = NamespaceIds {
            net: 4026531833,
            mnt: 4026531841,
        };
        assert_eq!(NamespaceIds::decode(&ids.encode()), Some(ids));
        assert_eq!(NamespaceIds::decode("12"), None);
        assert_eq!(NamespaceIds::decode("a:b"), None);
    }

    #[test]
    fn sandbox_out_dir_must_not_be_hidden_by_the_private_mounts() {
        let err =
            outside::prepare_out_dir(Path::new("/run/wirecheck-sandbox-test-out")).unwrap_err();
        assert!(!Path::new("/run/wirecheck-sandbox-test-out").exists());
        assert!(err.to_string().contains("must not be below /run"), "{err}");
    }
}
