//! Preparing the namespaces: loopback addresses, the private `/run` with its DHCP lease, a
//! private `/dev/shm`, the private `/var/lib/hyperv`. Everything here runs inside the new namespaces only.

use std::fs;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use super::{IMDS_ADDR, NamespaceIds, WIRESERVER_ADDR};

/// Where the lease for `lo` goes (systemd-networkd's layout; afterburn reads it).
pub(crate) const LEASE_DIR: &str = "/run/systemd/netif/leases";
/// The folder agents write KVP pool files to.
pub(crate) const HYPERV_DIR: &str = "/var/lib/hyperv";

pub(crate) fn find_in_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
}

/// Refuses to go on when this process shares a namespace with the host: everything below would
/// then change the host (this guards the hidden `--inside-namespaces` flag).
pub(crate) fn verify_new_namespaces(host: NamespaceIds) -> anyhow::Result<()> {
    let here = NamespaceIds::of_self().context("cannot read /proc/self/ns")?;
    if here.net == host.net || here.mnt == host.mnt {
        bail!(
            "refusing to set up: this process is still in the host's network or mount namespace \
             (--inside-namespaces is internal; run `fake-wireserver sandbox` without it)"
        );
    }
    Ok(())
}

/// Runs a setup tool, failing with its command line and stderr.
pub(crate) fn tool(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run `{program}`"))?;
    if !output.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Brings `lo` up with the two platform addresses; returns the interface index of `lo`.
pub(crate) fn configure_loopback() -> anyhow::Result<u32> {
    tool("ip", &["link", "set", "dev", "lo", "up"])?;
    for addr in [WIRESERVER_ADDR, IMDS_ADDR] {
        tool("ip", &["addr", "add", &format!("{addr}/32"), "dev", "lo"])?;
    }
    // `ip addr add` only makes a local-table route; WALA looks for the wireserver in the main
    // table (/proc/net/route) and runs DHCP without one (docs/protocol.md §9).
    tool(
        "ip",
        &[
            "route",
            "add",
            &format!("{WIRESERVER_ADDR}/32"),
            "dev",
            "lo",
        ],
    )?;
    let link = tool("ip", &["-o", "link", "show", "dev", "lo"])?;
    parse_ifindex(&link)
        .with_context(|| format!("unexpected `ip -o link show dev lo` output: {link:?}"))
}

/// `ip -o link` lines start with `<ifindex>: <name>:`.
fn parse_ifindex(line: &str) -> Option<u32> {
    line.split_once(':')?.0.trim().parse().ok()
}

/// The lease file content: networkd's header and option 245 as 8 hex digits (docs/protocol.md §9:
/// the line must start exactly with `OPTION_245=`).
pub(crate) fn lease_file_content() -> String {
    format!(
        "# This is private data. Do not parse.\n\
         # Written by fake-wireserver sandbox: DHCP option 245 names the wireserver ({WIRESERVER_ADDR}).\n\
         OPTION_245={:08X}\n",
        u32::from(WIRESERVER_ADDR)
    )
}

/// `mount`/`umount` always with `-n`: without it libmount records the mount in
/// `/run/mount/utab`, and before the private `/run` exists that would be the host's `/run`.
pub(crate) fn mount_tmpfs(
    target: &str,
    mode: u32,
    uid: u32,
    gid: u32,
    size: Option<u64>,
) -> anyhow::Result<()> {
    let mut options = format!("mode={mode:04o},uid={uid},gid={gid},nosuid,nodev");
    if let Some(size) = size {
        options.push_str(&format!(",size={size}"));
    }
    tool(
        "mount",
        &["-n", "-t", "tmpfs", "-o", &options, "tmpfs", target],
    )?;
    Ok(())
}

pub(crate) fn make_dirs(path: &Path) -> anyhow::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

/// A private tmpfs on `/run` holding only the lease file for `lo`.
pub(crate) fn mount_private_run(lo_ifindex: u32) -> anyhow::Result<()> {
    let meta = fs::metadata("/run").context("cannot stat /run")?;
    mount_tmpfs(
        "/run",
        meta.permissions().mode() & 0o7777,
        meta.uid(),
        meta.gid(),
        None,
    )?;
    let leases = Path::new(LEASE_DIR);
    make_dirs(leases)?;
    let lease = leases.join(lo_ifindex.to_string());
    fs::write(&lease, lease_file_content())
        .with_context(|| format!("cannot write {}", lease.display()))?;
    Ok(())
}

/// Bytes of POSIX shared memory a sandbox may hold: what an agent's libraries keep there
/// (libfaketime's clock, a few KiB) with room to spare.
const SHM_TMPFS_SIZE: u64 = 64 << 20;

/// A private, empty tmpfs on `/dev/shm` (mode 1777, as the host's): POSIX shared memory is
/// named by the process, and processes in two sandboxes' PID namespaces have the same PIDs, so
/// on the host's `/dev/shm` one sandbox's agent could open, or be refused, another's object
/// (libfaketime's `/faketime_shm_<pid>`: "shm_open failed: File exists", and the agent never
/// starts). Nothing is made when the host has no `/dev/shm` (no mount point on the host).
pub(crate) fn mount_private_shm() -> anyhow::Result<()> {
    if !Path::new("/dev/shm").is_dir() {
        return Ok(());
    }
    mount_tmpfs("/dev/shm", 0o1777, 0, 0, Some(SHM_TMPFS_SIZE))
}

/// Whether `path` lies below `/run` (which the sandbox replaces with a tmpfs of its own), with
/// no `..` that could lead out of it.
pub(crate) fn below_private_run(path: &Path) -> bool {
    path.starts_with("/run")
        && path != Path::new("/run")
        && path
            .components()
            .all(|c| !matches!(c, std::path::Component::ParentDir))
}

/// `--bind SRC:DST`: SRC over DST, in this (private) mount namespace only. A DST below the
/// private `/run` is made when missing.
pub(crate) fn bind_mount(source: &Path, target: &Path) -> anyhow::Result<()> {
    if below_private_run(target) && !target.exists() {
        make_dirs(target)?;
    }
    tool(
        "mount",
        &["-n", "--bind", path_str(source)?, path_str(target)?],
    )?;
    Ok(())
}

/// How many pool files hv_kvp_daemon keeps (`KVP_POOL_COUNT`, `.kvp_pool_0` to `.kvp_pool_4`).
pub(crate) const POOL_COUNT: usize = 5;

/// A private tmpfs on `/var/lib/hyperv` holding the empty pool files a VM has before any agent
/// runs.
///
/// When the host has no `/var/lib/hyperv`, there is no mount point, and creating one would
/// change the host's file system. Then `/var/lib` itself is replaced by a tmpfs in which every
/// host entry is bind-mounted back (symlinks are copied), plus the new `hyperv` folder.
/// `owner`: the uid and gid it and the pools belong to (the agent's: nobody, with
/// `--unprivileged`).
pub(crate) fn mount_private_hyperv(owner: (u32, u32)) -> anyhow::Result<()> {
    let hyperv = Path::new(HYPERV_DIR);
    if !hyperv.is_dir() {
        rebuild_var_lib_with_hyperv()?;
    }
    // Bounded: the agent may fill it (sparse files cost nothing, written ones do).
    mount_tmpfs(
        HYPERV_DIR,
        0o755,
        owner.0,
        owner.1,
        Some(super::HYPERV_TMPFS_SIZE),
    )?;
    create_pools(hyperv, owner)
}

/// The empty `.kvp_pool_0` to `.kvp_pool_4` in `dir`, as hv_kvp_daemon creates them at boot
/// (`kvp_file_init`: `open(fname, O_RDWR | O_CREAT | O_CLOEXEC, 0644)`): without them an agent
/// that writes no KVP would look as if it had removed its pool.
fn create_pools(dir: &Path, owner: (u32, u32)) -> anyhow::Result<()> {
    for i in 0..POOL_COUNT {
        let pool = dir.join(format!("{}{i}", super::artifacts::POOL_PREFIX));
        fs::File::create_new(&pool).with_context(|| format!("cannot create {}", pool.display()))?;
        // Set after creation: the umask must not narrow it.
        fs::set_permissions(&pool, fs::Permissions::from_mode(0o644))
            .with_context(|| format!("cannot set the mode of {}", pool.display()))?;
        std::os::unix::fs::chown(&pool, Some(owner.0), Some(owner.1))
            .with_context(|| format!("cannot hand {} to its owner", pool.display()))?;
    }
    Ok(())
}

fn rebuild_var_lib_with_hyperv() -> anyhow::Result<()> {
    if fs::symlink_metadata(HYPERV_DIR).is_ok() {
        bail!("{HYPERV_DIR} exists but is not a folder; cannot mount a private KVP folder on it");
    }
    rebuild_dir(Path::new("/var/lib"), Some("hyperv"), None)
}

/// Replaces `dir` by a tmpfs of its mode and owner in which every host entry is bind-mounted
/// back (symlinks are copied) but `leave_out`, plus the new empty folder `add`: how the
/// sandbox adds or hides an entry where creating or removing it would change the host.
pub(crate) fn rebuild_dir(
    dir: &Path,
    add: Option<&str>,
    leave_out: Option<&str>,
) -> anyhow::Result<()> {
    let meta = fs::metadata(dir).with_context(|| format!("cannot stat {}", dir.display()))?;
    // The host's folder stays reachable here (on the private /run tmpfs) while the new one
    // is assembled; it is detached afterwards.
    let staging = PathBuf::from(format!(
        "/run/.fake-wireserver-host{}",
        path_str(dir)?.replace('/', "-")
    ));
    make_dirs(&staging)?;
    let (dir_str, staging_str) = (path_str(dir)?, path_str(&staging)?);
    tool("mount", &["-n", "--rbind", dir_str, staging_str])?;
    mount_tmpfs(
        dir_str,
        meta.permissions().mode() & 0o7777,
        meta.uid(),
        meta.gid(),
        None,
    )?;
    let listing = || format!("cannot list the host's {}", dir.display());
    for entry in fs::read_dir(&staging).with_context(listing)? {
        let entry = entry.with_context(listing)?;
        if leave_out.is_some_and(|name| entry.file_name() == name) {
            continue;
        }
        bind_back(&entry, &dir.join(entry.file_name()))?;
    }
    tool("umount", &["-n", "--lazy", staging_str])?;
    fs::remove_dir(&staging).with_context(|| format!("cannot remove {}", staging.display()))?;
    match add {
        Some(name) => make_dirs(&dir.join(name)),
        None => Ok(()),
    }
}

/// One host entry of a rebuilt folder at `target`: a symlink copied, anything else bound.
fn bind_back(entry: &fs::DirEntry, target: &Path) -> anyhow::Result<()> {
    let source = entry.path();
    let kind = entry
        .file_type()
        .with_context(|| format!("cannot stat {}", source.display()))?;
    if kind.is_symlink() {
        let link = fs::read_link(&source)
            .with_context(|| format!("cannot read link {}", source.display()))?;
        return std::os::unix::fs::symlink(&link, target)
            .with_context(|| format!("cannot create link {}", target.display()));
    }
    if kind.is_dir() {
        fs::create_dir(target)
    } else {
        fs::File::create(target).map(drop)
    }
    .with_context(|| format!("cannot create mount point {}", target.display()))?;
    tool(
        "mount",
        &["-n", "--rbind", path_str(&source)?, path_str(target)?],
    )?;
    Ok(())
}

pub(crate) fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not valid UTF-8", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_lease_names_the_wireserver_in_option_245() {
        let lease = lease_file_content();
        let option = lease
            .lines()
            .find(|l| l.starts_with("OPTION_245="))
            .expect("option line");
        assert_eq!(option, "OPTION_245=A83F8110");
    }

    #[test]
    fn sandbox_parses_the_loopback_ifindex() {
        let line = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN\\    link/loopback 00:00:00:00:00:00";
        assert_eq!(parse_ifindex(line), Some(1));
        assert_eq!(parse_ifindex("lo: nothing"), None);
    }
}
