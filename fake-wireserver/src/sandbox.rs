//! The contract of `fake-wireserver sandbox [OPTIONS] -- COMMAND [ARGS...]` (the binary's
//! subcommand, `fake-wireserver-cli/src/sandbox.rs`): the addresses, files, limits and exit
//! statuses its users rely on. The sandbox runs an unmodified agent where the fake answers on
//! the platform's real addresses.
//!
//! The sandbox makes new network, mount, UTS and PID namespaces (util-linux `unshare`, then this
//! binary re-executes itself inside them), and in there:
//!
//! * brings `lo` up and adds `168.63.129.16/32` and `169.254.169.254/32` to it; the fake's
//!   wireserver and IMDS listeners bind port 80 of those addresses;
//! * with `--refuse wireserver` / `--refuse imds` ([`PlatformHost`]), serves nothing on that
//!   host: its address stays on `lo`, no listener is bound, so a connection is refused (the
//!   kernel answers the SYN with a RST) exactly as a closed loopback port refuses it;
//!   `sandbox.json` lists what was refused (`refused`, `refused_addresses`) and each attempt
//!   the agent made on it, when its SYN came on the journal's clock (`refused_attempts`, with
//!   `refused_attempts_lost` counting any the watch could not keep);
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
//! * with `--guest FILE`, makes COMMAND's world a simulated Azure VM ([`crate::guest`]);
//! * runs COMMAND, then writes the journal (`journal.jsonl`, JSON Lines) and copies of
//!   `/var/lib/hyperv/.kvp_pool_*` into `--out DIR`: regular files of at most
//!   [`POOL_COPY_MAX`] bytes only, never followed through a link; the others are listed in
//!   `sandbox.json` (`pools_not_copied`, with the reason). `sandbox.json` also counts the
//!   journal's lines (`journal_entries`) and the requests its memory window dropped before it
//!   was written (`journal_evicted`): a journal that is not whole says so.
//!
//! The exit status is COMMAND's (128 + N when a signal N ended it, 124 after `--timeout`,
//! 126/127 when it cannot be started, 125 when the sandbox itself failed, 2 for bad usage and
//! when not run as root). Mount propagation is private, so the host's network, `/run` and
//! `/var/lib/hyperv` are never touched; when the PID namespace's first process (the sandbox)
//! exits, the kernel ends whatever COMMAND left behind.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::str::FromStr;

use crate::endpoint::HOSTPLUGIN_PORT;

/// The wireserver address the sandbox puts on its loopback.
pub const WIRESERVER_ADDR: Ipv4Addr = Ipv4Addr::new(168, 63, 129, 16);
/// The IMDS address the sandbox puts on its loopback.
pub const IMDS_ADDR: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
/// Name of the journal file written to `--out`.
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// The most of one pool file that is copied: 26,000 records, far beyond any agent's (the cap
/// conformance reads an in-process agent's pool with). A larger pool is not copied.
pub const POOL_COPY_MAX: u64 = 64 << 20;
/// Memory the private `/var/lib/hyperv` tmpfs may use (`size=`): twice [`POOL_COPY_MAX`], so
/// a pool over the cap can exist (and be reported as such), not fill the host's memory.
pub const HYPERV_TMPFS_SIZE: u64 = 2 * POOL_COPY_MAX;

/// Exit status for bad usage and for a missing privilege.
pub const EXIT_USAGE: i32 = 2;
/// Exit status when `--timeout` ended COMMAND (as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit status when the sandbox itself failed (as `env(1)` / `timeout(1)`).
pub const EXIT_SANDBOX_FAILED: i32 = 125;

/// A platform host the sandbox can refuse (`--refuse NAME`): its address stays configured
/// inside the sandbox, nothing listens on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PlatformHost {
    /// `168.63.129.16`: the wireserver (port 80) and the HostGAPlugin (port 32526). They are
    /// one host, so a wireserver that cannot be reached takes the plugin with it (an agent
    /// cannot fall back to the plugin on a host that does not answer).
    Wireserver,
    /// `169.254.169.254:80`.
    Imds,
}

impl PlatformHost {
    /// Both hosts, in the order `sandbox.json` lists them.
    pub const ALL: [PlatformHost; 2] = [PlatformHost::Wireserver, PlatformHost::Imds];

    /// The `--refuse` value, and the name in `sandbox.json`'s `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlatformHost::Wireserver => "wireserver",
            PlatformHost::Imds => "imds",
        }
    }

    /// Every address the sandbox serves for this host (and leaves unserved when refused).
    pub fn addresses(self) -> Vec<SocketAddrV4> {
        match self {
            PlatformHost::Wireserver => vec![
                SocketAddrV4::new(WIRESERVER_ADDR, 80),
                SocketAddrV4::new(WIRESERVER_ADDR, HOSTPLUGIN_PORT),
            ],
            PlatformHost::Imds => vec![SocketAddrV4::new(IMDS_ADDR, 80)],
        }
    }
}

impl std::fmt::Display for PlatformHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PlatformHost {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        PlatformHost::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or_else(|| format!("expected `wireserver` or `imds`, got {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_hosts_round_trip_and_the_wireserver_takes_the_plugin_with_it() {
        for host in PlatformHost::ALL {
            assert_eq!(host.as_str().parse::<PlatformHost>(), Ok(host));
        }
        assert!(
            "IMDS"
                .parse::<PlatformHost>()
                .unwrap_err()
                .contains("`imds`")
        );
        let wireserver: Vec<String> = PlatformHost::Wireserver
            .addresses()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(wireserver, ["168.63.129.16:80", "168.63.129.16:32526"]);
    }
}
