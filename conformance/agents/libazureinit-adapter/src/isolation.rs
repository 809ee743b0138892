//! Where the adapter may run. libazureinit 0.1.1 sends to the real 168.63.129.16 and
//! 169.254.169.254, so the library is only called in a network namespace whose only interface
//! is `lo`: there a connection to those addresses either reaches a fake on loopback (the
//! sandbox), goes through the loopback proxy in `HTTP_PROXY`, or fails with "network
//! unreachable". It can never leave the machine.
//!
//! Started in a namespace with other interfaces, the adapter re-executes itself under
//! `unshare --net` and relays only to the loopback proxy named in `HTTP_PROXY` (what
//! `wirecheck run` gives `attach = "proxy"` agents); without such a proxy it refuses.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, anyhow, bail};

use crate::relay;

/// Set for the re-executed child: the Unix socket that leads to the parent's proxy.
const BRIDGE_ENV: &str = "LIBAZUREINIT_ADAPTER_BRIDGE";

/// Environment that would change where reqwest 0.11 sends requests; the child sets its own.
const PROXY_ENV: [&str; 9] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
    // reqwest ignores HTTP_PROXY in CGI programs.
    "REQUEST_METHOD",
];

pub enum Placement {
    /// Isolated: call the library in this process.
    Here,
    /// The flow ran in a child in a new network namespace; its exit status.
    Child(u8),
}

/// Decides where the library runs (see the module docs).
pub fn ensure_isolated() -> Result<Placement> {
    if let Some(socket) = std::env::var_os(BRIDGE_ENV) {
        enter_bridge(PathBuf::from(socket))?;
        return Ok(Placement::Here);
    }
    let foreign = non_loopback_interfaces()?;
    if foreign.is_empty() {
        return Ok(Placement::Here);
    }
    let Some(proxy) = loopback_proxy()? else {
        bail!(
            "refusing to run: this network namespace has interfaces other than lo ({}), and \
             libazureinit 0.1.1 sends to the real 168.63.129.16 and 169.254.169.254. Run it in \
             `fake-wireserver sandbox -- ...`, under `unshare --net`, or set HTTP_PROXY to the \
             fake's loopback proxy listener (http://127.0.0.1:PORT)",
            foreign.join(", ")
        );
    };
    run_in_new_namespace(proxy).map(Placement::Child)
}

/// Interface names of this process's network namespace other than `lo`.
/// (`/proc/self/net/dev` follows the namespace; `/sys/class/net` follows sysfs's mounter.)
pub fn non_loopback_interfaces() -> Result<Vec<String>> {
    let path = "/proc/self/net/dev";
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    Ok(parse_net_dev(&text)
        .into_iter()
        .filter(|name| name != "lo")
        .collect())
}

fn parse_net_dev(text: &str) -> Vec<String> {
    text.lines()
        .skip(2)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The proxy reqwest would use for http:// (HTTP_PROXY, then http_proxy), when it is a
/// loopback `http://HOST:PORT`. Any other proxy is an error: the relay would carry requests
/// off the machine.
fn loopback_proxy() -> Result<Option<SocketAddr>> {
    let Some((name, value)) = ["HTTP_PROXY", "http_proxy"]
        .into_iter()
        .find_map(|name| Some((name, std::env::var(name).ok()?)))
        .filter(|(_, value)| !value.is_empty())
    else {
        return Ok(None);
    };
    let addr = parse_loopback_proxy(&value).ok_or_else(|| {
        anyhow!("{name}={value:?}: expected a loopback proxy http://127.0.0.1:PORT")
    })?;
    Ok(Some(addr))
}

fn parse_loopback_proxy(value: &str) -> Option<SocketAddr> {
    let rest = value.strip_prefix("http://")?;
    let host_port = rest.strip_suffix('/').unwrap_or(rest);
    if host_port.contains(['/', '@']) {
        return None;
    }
    let addr = host_port.to_socket_addrs().ok()?.next()?;
    addr.ip().is_loopback().then_some(addr)
}

/// Parent: a Unix socket relayed to the proxy, then this program again in a new network
/// namespace (a user namespace too when not root).
fn run_in_new_namespace(proxy: SocketAddr) -> Result<u8> {
    let dir = tempfile::Builder::new()
        .prefix("libazureinit-adapter-")
        .tempdir()
        .context("cannot create a folder for the relay socket")?;
    let socket = dir.path().join("proxy.sock");
    let listener =
        UnixListener::bind(&socket).with_context(|| format!("cannot bind {}", socket.display()))?;
    relay::spawn_unix_to_tcp(listener, proxy);

    let exe = std::env::current_exe().context("cannot find this program")?;
    let unshare = || {
        let mut cmd = Command::new("unshare");
        if !rustix::process::geteuid().is_root() {
            cmd.args(["--user", "--map-root-user"]);
        }
        cmd.arg("--net").arg("--");
        cmd
    };
    // unshare's own failure exits 1 like "not reported"; find out first, so it is a refusal.
    let probe = unshare()
        .arg("true")
        .output()
        .context("cannot run unshare (util-linux) to create a network namespace")?;
    if !probe.status.success() {
        bail!(
            "cannot create a network namespace (root, or unprivileged user namespaces, needed): {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
    }
    let mut cmd = unshare();
    cmd.arg(exe);
    cmd.args(std::env::args_os().skip(1));
    cmd.env(BRIDGE_ENV, &socket);
    eprintln!(
        "libazureinit-adapter: not isolated; running in a new network namespace, relaying to \
         the proxy {proxy}"
    );
    let status = cmd
        .status()
        .context("cannot run unshare (util-linux) to create a network namespace")?;
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => 128u8.saturating_add(u8::try_from(signal).unwrap_or(0)),
        (None, None) => 1,
    })
}

/// Child, inside the new namespace: lo up, verify isolation, a loopback listener relayed to
/// the parent's socket, and HTTP_PROXY pointing at it.
fn enter_bridge(socket: PathBuf) -> Result<()> {
    let up = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .context("cannot run ip (iproute2)")?;
    if !up.success() {
        bail!("`ip link set lo up` failed in the new network namespace ({up})");
    }
    let foreign = non_loopback_interfaces()?;
    if !foreign.is_empty() {
        bail!(
            "refusing to run: {BRIDGE_ENV} is set but this namespace has interfaces other than \
             lo ({})",
            foreign.join(", ")
        );
    }
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot bind 127.0.0.1:0")?;
    let proxy = format!("http://{}", listener.local_addr()?);
    // SAFETY: no other thread exists yet in this process (the relay starts below), so nothing
    // reads the environment concurrently.
    unsafe {
        for name in PROXY_ENV {
            std::env::remove_var(name);
        }
        std::env::remove_var(BRIDGE_ENV);
        std::env::set_var("HTTP_PROXY", &proxy);
        std::env::set_var("http_proxy", OsString::from(&proxy));
    }
    relay::spawn_tcp_to_unix(listener, socket);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_names() {
        let text = "Inter-|   Receive\n face |bytes\n    lo: 1 2 3\n  eth0: 4 5 6\nveth-x@if3: 0\n";
        assert_eq!(parse_net_dev(text), ["lo", "eth0", "veth-x@if3"]);
    }

    #[test]
    fn only_loopback_proxies_are_relayed() {
        assert_eq!(
            parse_loopback_proxy("http://127.0.0.1:3128"),
            Some("127.0.0.1:3128".parse().unwrap())
        );
        assert_eq!(
            parse_loopback_proxy("http://127.0.0.1:3128/"),
            Some("127.0.0.1:3128".parse().unwrap())
        );
        assert_eq!(
            parse_loopback_proxy("http://[::1]:8080"),
            Some("[::1]:8080".parse().unwrap())
        );
        assert_eq!(parse_loopback_proxy("http://10.0.0.1:3128"), None);
        assert_eq!(parse_loopback_proxy("https://127.0.0.1:3128"), None);
        assert_eq!(parse_loopback_proxy("http://user@127.0.0.1:3128"), None);
        assert_eq!(parse_loopback_proxy("127.0.0.1:3128"), None);
        assert_eq!(parse_loopback_proxy("http://127.0.0.1"), None);
    }
}
