//! `--refuse`: when the agent tried a refused host. The fake never sees those attempts (nothing
//! listens there), so the sandbox watches its `lo` for their SYNs
//! ([`fake_wireserver::syn_watch`]) from before COMMAND starts until it is gone; `sandbox.json`
//! lists them (`refused_attempts`, each with its host) and how many the watch lost
//! (`refused_attempts_lost`).

use std::net::Ipv4Addr;

use anyhow::Context as _;
use fake_wireserver::clock::AgentClock;
use fake_wireserver::syn_watch::{self, SynWatch};
use serde::Serialize;

use super::{IMDS_ADDR, PlatformHost, WIRESERVER_ADDR};

/// One connection attempt to a refused host, as `sandbox.json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RefusedAttempt {
    /// When its SYN arrived, on the fake's clock (the journal's `at_ms`).
    pub(crate) at_ms: u64,
    /// The refused host it was for (`wireserver`, `imds`).
    pub(crate) host: &'static str,
    /// The address and port it was for.
    pub(crate) address: String,
}

/// What the watch recorded.
#[derive(Debug, Default)]
pub(crate) struct Attempts {
    pub(crate) attempts: Vec<RefusedAttempt>,
    /// Attempts not recorded (the socket dropped them, or past the watch's cap).
    pub(crate) lost: u64,
}

/// The running watch.
pub(crate) struct RefusedWatch(SynWatch);

impl RefusedWatch {
    /// Starts watching `lo` (interface index `lo`) for SYNs to the `refused` hosts, timed on
    /// `clock`.
    pub(crate) fn start(
        lo: u32,
        refused: &[PlatformHost],
        clock: AgentClock,
    ) -> anyhow::Result<Self> {
        let addresses: Vec<Ipv4Addr> = refused.iter().map(|h| host_ip(*h)).collect();
        let socket = syn_watch::syn_socket(lo, &addresses, &[])
            .context("cannot watch for connections to the refused hosts (a packet socket on lo)")?;
        let watch =
            SynWatch::start(socket, clock).context("cannot start the refused-host watcher")?;
        Ok(RefusedWatch(watch))
    }

    /// How many attempts it has seen so far.
    pub(crate) fn seen(&self) -> u64 {
        self.0.seen()
    }

    /// Stops watching (after the agent is gone) and returns the attempts, in order.
    pub(crate) fn stop(self) -> Attempts {
        let seen = self.0.stop();
        let attempts = seen
            .attempts
            .iter()
            .map(|a| {
                let host = PlatformHost::ALL
                    .into_iter()
                    .find(|h| host_ip(*h) == *a.to.ip());
                RefusedAttempt {
                    at_ms: a.at_ms,
                    host: host.map_or("other", PlatformHost::as_str),
                    address: a.to.to_string(),
                }
            })
            .collect();
        Attempts {
            attempts,
            lost: seen.lost,
        }
    }
}

/// The one address a platform host has (its ports aside).
fn host_ip(host: PlatformHost) -> Ipv4Addr {
    match host {
        PlatformHost::Wireserver => WIRESERVER_ADDR,
        PlatformHost::Imds => IMDS_ADDR,
    }
}
