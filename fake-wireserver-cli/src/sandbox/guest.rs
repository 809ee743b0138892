//! `--guest FILE`: the simulated VM (its contract is `fake_wireserver::guest`). Set up inside
//! the new namespaces after the private `/run`, in this order: the private `/etc` and
//! [`PRIVATE_DIRS`], their files handed to the guest namespace's ids (`guest_host_id`: the
//! host's root's are the guest's root's, nobody on the host); DMI and the firmware; a private
//! `/dev` without the host's Azure disk links; the media;
//! the primary NIC (a veth end, shown in `/sys` as the namespace sees it); the stand-ins, each bound over its tool (the real one stays reachable
//! under [`STATE_DIR`]). The stand-in is this binary, called by a tool's name
//! ([`stand_in_if_called_as_tool`]). Everything made here is on a private tmpfs or in the
//! private mount namespace: the host keeps none of it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::setup::{self, make_dirs, mount_tmpfs, tool};
use fake_wireserver::contain::userns::{OUTSIDE_GID, OUTSIDE_UID, guest_host_id};
use fake_wireserver::guest::{
    AZURE_CHASSIS_ASSET_TAG, CALLS_FILE_MAX, Generation, Guest, MAX_RECORDED_ARGV_BYTES,
    MEDIA_DEVICE, MEDIA_MOUNT, PRIMARY_ADDRESS, PRIMARY_MAC, PRIMARY_NIC, Tool, ToolCall,
    ToolFault,
};

/// The guest's own files, on the private `/run`: the scripted faults, the recorded calls, the
/// real tools and the copies of `/etc` and the DMI folder.
pub(crate) const STATE_DIR: &str = "/run/fake-wireserver-guest";
const FAULTS_FILE: &str = "faults.json";
const CALLS_FILE: &str = "calls.jsonl";
/// Folders a provisioning agent writes that the guest makes private (when the host has them).
const PRIVATE_DIRS: [&str; 5] = ["/home", "/root", "/mnt", "/var/mail", "/var/log"];
/// Where the host keeps the tools the stand-ins replace.
const TOOL_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];
/// The private `/etc` and the media are bounded like the KVP folder.
const ETC_TMPFS_SIZE: u64 = 256 << 20;
const MEDIA_TMPFS_SIZE: u64 = 4 << 20;

fn state(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(name)
}

/// Sets the guest up (see the module header); `exe` is this binary, the stand-in.
pub(crate) fn prepare(guest: &Guest, exe: &Path) -> anyhow::Result<()> {
    make_dirs(Path::new(STATE_DIR))?;
    // Kept reachable first: the private folders may hide where this binary lives.
    let stand_in = state("stand-in");
    bind_file(exe, &stand_in)?;
    private_etc().context("making the guest's private /etc")?;
    for dir in PRIVATE_DIRS {
        private_dir(dir).with_context(|| format!("making the guest's private {dir}"))?;
    }
    dmi(guest).context("giving the guest its DMI")?;
    firmware(guest.generation).context("giving the guest its firmware")?;
    private_dev().context("giving the guest its own /dev")?;
    if let Some(ovf) = &guest.ovf_env {
        media(ovf).context("inserting the guest's provisioning media")?;
    }
    primary_nic().context("giving the guest its primary NIC")?;
    own_network_in_sys().context("showing the guest its own network in /sys")?;
    stand_ins(&guest.fail, &stand_in).context("putting the stand-in tools in place")
}

/// A copy of the host's `/etc` on a tmpfs, bound over it.
fn private_etc() -> anyhow::Result<()> {
    let copy = state("etc");
    make_dirs(&copy)?;
    let meta = fs::metadata("/etc").context("cannot stat /etc")?;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    mount_tmpfs(
        setup::path_str(&copy)?,
        meta.permissions().mode() & 0o7777,
        guest_uid(meta.uid()),
        guest_uid(meta.gid()),
        Some(ETC_TMPFS_SIZE),
    )?;
    tool("cp", &["-a", "/etc/.", setup::path_str(&copy)?])?;
    hand_to_guest(&copy)?;
    setup::bind_mount(&copy, Path::new("/etc"))?;
    Ok(())
}

/// The host id that is host id `id` in the guest's namespace: the host's root is the guest's
/// root (nobody on the host); ids it cannot map stay nobody's.
fn guest_uid(id: u32) -> u32 {
    guest_host_id(id).unwrap_or(OUTSIDE_UID)
}

/// Every entry below `dir` (a private copy) handed to the guest's ids as its host owners were:
/// the guest's root may then edit `/etc/passwd`, and `shadow` stays its group's.
fn hand_to_guest(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path)
            .with_context(|| format!("cannot stat {}", path.display()))?;
        let (uid, gid) = (guest_uid(meta.uid()), guest_uid(meta.gid()));
        std::os::unix::fs::lchown(&path, Some(uid), Some(gid))
            .with_context(|| format!("cannot hand {} to the guest", path.display()))?;
        if meta.is_dir() {
            let listing = || format!("cannot list {}", path.display());
            for entry in fs::read_dir(&path).with_context(listing)? {
                stack.push(entry.with_context(listing)?.path());
            }
        }
    }
    Ok(())
}

/// An empty tmpfs with the folder's own mode and owner over `dir`, when the host has it.
fn private_dir(dir: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let Ok(meta) = fs::metadata(dir) else {
        return Ok(());
    };
    if !meta.is_dir() {
        return Ok(());
    }
    mount_tmpfs(
        dir,
        meta.permissions().mode() & 0o7777,
        guest_uid(meta.uid()),
        guest_uid(meta.gid()),
        None,
    )
}

/// `/sys/class/dmi/id` as on Azure: the vendor, product, asset tag and (with a VM id) the
/// `product_uuid` in the generation's byte order.
fn dmi(guest: &Guest) -> anyhow::Result<()> {
    let dir = state("dmi-id");
    make_dirs(&dir)?;
    let mut files = vec![
        ("sys_vendor", "Microsoft Corporation".to_owned()),
        ("product_name", "Virtual Machine".to_owned()),
        ("chassis_asset_tag", AZURE_CHASSIS_ASSET_TAG.to_owned()),
        ("chassis_vendor", "Microsoft Corporation".to_owned()),
    ];
    if let Some(uuid) = guest.dmi_product_uuid() {
        files.push(("product_uuid", uuid));
    }
    for (name, value) in files {
        let path = dir.join(name);
        fs::write(&path, format!("{value}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let id = Path::new("/sys/class/dmi/id");
    if let Ok(real) = id.canonicalize() {
        return setup::bind_mount(&dir, &real);
    }
    // No DMI on this machine: `/sys/class` is rebuilt with a `dmi/id` of the guest's.
    setup::rebuild_dir(Path::new("/sys/class"), Some("dmi"), None)?;
    make_dirs(id)?;
    setup::bind_mount(&dir, id)
}

/// The file `source` bound over a new empty file `target` (its mount point).
fn bind_file(source: &Path, target: &Path) -> anyhow::Result<()> {
    fs::File::create(target)
        .with_context(|| format!("cannot create the mount point {}", target.display()))?;
    setup::bind_mount(source, target)
}

/// Generation 2 boots UEFI (`/sys/firmware/efi` exists); generation 1 does not.
fn firmware(generation: Generation) -> anyhow::Result<()> {
    let firmware = Path::new("/sys/firmware");
    let has_efi = firmware.join("efi").exists();
    match (generation, has_efi) {
        (Generation::Gen2, false) => setup::rebuild_dir(firmware, Some("efi"), None),
        (Generation::Gen1, true) => setup::rebuild_dir(firmware, None, Some("efi")),
        _ => Ok(()),
    }
}

/// Links to a host's Azure disks (udev's 66-azure-ephemeral.rules): the guest has none of them,
/// so an agent that formats the resource disk it finds there (cloud-init's `disk_setup`) finds
/// nothing, whatever host the tests run on.
const HOST_DISK_LINKS: [&str; 2] = ["/dev/disk/cloud", "/dev/disk/azure"];

/// A private overlay of `/dev`, without the host's Azure disk links ([`HOST_DISK_LINKS`], hidden
/// by the overlay's whiteouts, never opened).
fn private_dev() -> anyhow::Result<()> {
    let host_dev = state("host-dev");
    let (upper, work) = (state("dev-upper"), state("dev-work"));
    for dir in [&host_dev, &upper, &work] {
        make_dirs(dir)?;
    }
    tool(
        "mount",
        &["-n", "--rbind", "/dev", setup::path_str(&host_dev)?],
    )?;
    let options = format!(
        "lowerdir=/dev,upperdir={},workdir={}",
        setup::path_str(&upper)?,
        setup::path_str(&work)?
    );
    tool(
        "mount",
        &["-n", "-t", "overlay", "-o", &options, "overlay", "/dev"],
    )?;
    // The overlay shows no mounts below the host's /dev: the ones agents use come back.
    for sub in ["pts", "shm", "mqueue"] {
        let (from, to) = (host_dev.join(sub), Path::new("/dev").join(sub));
        if from.is_dir() && to.is_dir() {
            tool(
                "mount",
                &[
                    "-n",
                    "--rbind",
                    setup::path_str(&from)?,
                    setup::path_str(&to)?,
                ],
            )?;
        }
    }
    tool("umount", &["-n", "--lazy", setup::path_str(&host_dev)?])?;
    for link in HOST_DISK_LINKS {
        if let Err(e) = fs::remove_dir_all(link)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(e).with_context(|| format!("cannot hide the host's {link}"));
        }
    }
    Ok(())
}

/// A `/dev/sr0` entry (on the private overlay of `/dev`) and a tmpfs mounted from it on
/// [`MEDIA_MOUNT`] holding `ovf-env.xml`.
fn media(ovf_env: &str) -> anyhow::Result<()> {
    // A host with a drive of its own: only the overlay's whiteout hides it, never opened.
    if let Err(e) = fs::remove_file(MEDIA_DEVICE)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(e).with_context(|| format!("cannot hide the host's {MEDIA_DEVICE}"));
    }
    fs::File::create_new(MEDIA_DEVICE).with_context(|| format!("cannot create {MEDIA_DEVICE}"))?;
    // Below the private /mnt only: without one it would be made on the host.
    if !Path::new("/mnt").is_dir() {
        bail!("the host has no /mnt, so the guest has no private one for its media");
    }
    let mount = Path::new(MEDIA_MOUNT);
    make_dirs(mount)?;
    let options = format!("ro,size={MEDIA_TMPFS_SIZE},mode=0755");
    // Written before it is made read-only: a tmpfs cannot be filled once mounted `ro`.
    tool(
        "mount",
        &[
            "-n",
            "-t",
            "tmpfs",
            "-o",
            &options.replacen("ro,", "", 1),
            MEDIA_DEVICE,
            MEDIA_MOUNT,
        ],
    )?;
    let file = mount.join("ovf-env.xml");
    fs::write(&file, ovf_env).with_context(|| format!("cannot write {}", file.display()))?;
    tool("mount", &["-n", "-o", "remount,ro", MEDIA_MOUNT])?;
    Ok(())
}

/// The far end of [`PRIMARY_NIC`]'s pair: `veth*` names are not a VM's NIC to cloud-init
/// (net/__init__.py `find_candidate_nics`).
const PRIMARY_NIC_PEER: &str = "veth-platform";
/// Its MAC: fixed (a locally administered one), so what agents log of it is the same each run.
const PRIMARY_NIC_PEER_MAC: &str = "02:00:00:00:00:01";

/// `eth0` with [`PRIMARY_ADDRESS`]/24, up with a carrier: one end of a veth pair (this kernel
/// may lack `dummy`; a bridge is no VM NIC to cloud-init, which skips bridges when it looks
/// for the one to take its DHCP lease on).
fn primary_nic() -> anyhow::Result<()> {
    tool(
        "ip",
        &[
            "link",
            "add",
            PRIMARY_NIC,
            "address",
            PRIMARY_MAC,
            "type",
            "veth",
            "peer",
            "name",
            PRIMARY_NIC_PEER,
            "address",
            PRIMARY_NIC_PEER_MAC,
        ],
    )?;
    tool("ip", &["link", "set", "dev", PRIMARY_NIC_PEER, "up"])?;
    tool(
        "ip",
        &[
            "addr",
            "add",
            &format!("{PRIMARY_ADDRESS}/24"),
            "dev",
            PRIMARY_NIC,
        ],
    )?;
    tool("ip", &["link", "set", "dev", PRIMARY_NIC, "up"]).map(drop)
}

/// `/sys/class/net` and `/sys/devices/virtual/net` as the sandbox's network namespace sees
/// them (a sysfs mounted here, in it), over the host's: an agent looking for its NIC there
/// (cloud-init: carrier, operstate, MAC) finds the guest's `eth0`, not the host's devices.
fn own_network_in_sys() -> anyhow::Result<()> {
    let sysfs = state("sysfs");
    make_dirs(&sysfs)?;
    tool(
        "mount",
        &["-n", "-t", "sysfs", "sysfs", setup::path_str(&sysfs)?],
    )?;
    for dir in ["class/net", "devices/virtual/net"] {
        setup::bind_mount(&sysfs.join(dir), &Path::new("/sys").join(dir))?;
    }
    // The binds keep what they show; the staging mount goes.
    tool("umount", &["-n", "--lazy", setup::path_str(&sysfs)?]).map(drop)
}

/// Each [`Tool`] the host has is bound over by `exe` (this binary), the real one kept at
/// `STATE_DIR/real/<name>`; the faults are written for the stand-ins to read. A tool the host
/// lacks stays missing: the guest is the host's image.
fn stand_ins(faults: &BTreeMap<Tool, ToolFault>, exe: &Path) -> anyhow::Result<()> {
    let real_dir = state("real");
    make_dirs(&real_dir)?;
    let faults_json = serde_json::to_vec(faults).context("cannot serialise the faults")?;
    fs::write(state(FAULTS_FILE), faults_json).context("cannot write the guest's faults")?;
    // The stand-ins run as the guest's root: theirs to append to.
    fs::write(state(CALLS_FILE), b"").context("cannot create the guest's call record")?;
    std::os::unix::fs::chown(state(CALLS_FILE), Some(OUTSIDE_UID), Some(OUTSIDE_GID))
        .context("cannot hand the guest's call record to it")?;
    for t in Tool::ALL {
        let mut places: Vec<PathBuf> = TOOL_DIRS
            .iter()
            .map(|d| Path::new(d).join(t.name()))
            .filter(|p| p.is_file())
            .filter_map(|p| p.canonicalize().ok())
            // Only a file of the tool's own name: a multi-call binary (busybox) serves others.
            .filter(|p| p.file_name().and_then(|n| n.to_str()) == Some(t.name()))
            .collect();
        places.sort();
        places.dedup();
        let Some(first) = places.first() else {
            continue;
        };
        bind_file(first, &real_dir.join(t.name()))?;
        for place in &places {
            setup::bind_mount(exe, place)?;
        }
    }
    Ok(())
}

/// The largest `/etc/passwd` read for its users.
const PASSWD_MAX: u64 = 4 << 20;
/// Users listed at most in the summary.
const USERS_MAX: usize = 1000;

/// The user names of a passwd file's text.
fn user_names(passwd: &[u8]) -> std::collections::BTreeSet<String> {
    String::from_utf8_lossy(passwd)
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// After the run: the users the guest's `/etc/passwd` has that the host's (`host_passwd`, read
/// before the guest was made) had not, at most [`USERS_MAX`]; None when the agent left it
/// anything but a bounded regular file.
pub(crate) fn users_added(host_passwd: &[u8]) -> Option<Vec<String>> {
    let guest = super::artifacts::read_agent_file(Path::new("/etc/passwd"), PASSWD_MAX).ok()?;
    let host = user_names(host_passwd);
    Some(
        user_names(&guest)
            .into_iter()
            .filter(|u| !host.contains(u))
            .take(USERS_MAX)
            .collect(),
    )
}

/// The recorded calls, to copy to `--out`.
pub(crate) fn calls_file() -> PathBuf {
    state(CALLS_FILE)
}

/// When this binary was called by a [`Tool`]'s name inside a guest: record the call, then fail
/// as scripted or run the real tool. Returns the exit status; None when it is not a stand-in.
pub(crate) fn stand_in_if_called_as_tool() -> Option<u8> {
    let mut argv = std::env::args_os();
    let argv0 = PathBuf::from(argv.next()?);
    let tool = Tool::from_name(argv0.file_name()?.to_str()?)?;
    let faults = fs::read(state(FAULTS_FILE)).ok()?;
    let args: Vec<OsString> = argv.collect();
    Some(stand_in(tool, &faults, args))
}

fn stand_in(tool: Tool, faults: &[u8], args: Vec<OsString>) -> u8 {
    let faults: BTreeMap<Tool, ToolFault> = match serde_json::from_slice(faults) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{}: the guest's faults cannot be read: {e}", tool.name());
            return 125;
        }
    };
    let fault = faults.get(&tool);
    record(tool, &args, fault.map(|f| f.exit));
    if let Some(f) = fault {
        eprint!("{}", f.stderr);
        return f.exit;
    }
    use std::os::unix::process::CommandExt as _;
    let e = std::process::Command::new(state("real").join(tool.name()))
        .arg0(tool.name())
        .args(args)
        .exec();
    eprintln!("{}: cannot run the real tool: {e}", tool.name());
    127
}

/// Appends the call to the record, one line in one write; past [`CALLS_FILE_MAX`] bytes it
/// records nothing more.
fn record(tool: Tool, args: &[OsString], failed_with: Option<u8>) {
    let mut kept = Vec::new();
    let mut bytes = 0;
    let mut args_cut = false;
    for a in args {
        let a = a.to_string_lossy();
        if bytes + a.len() > MAX_RECORDED_ARGV_BYTES {
            args_cut = true;
            break;
        }
        bytes += a.len();
        kept.push(a.into_owned());
    }
    let call = ToolCall {
        tool,
        args: kept,
        args_cut,
        failed_with,
    };
    let Ok(mut line) = serde_json::to_vec(&call) else {
        return;
    };
    line.push(b'\n');
    let path = state(CALLS_FILE);
    let full = fs::metadata(&path).is_ok_and(|m| m.len() + line.len() as u64 > CALLS_FILE_MAX);
    if full {
        return;
    }
    if let Ok(mut f) = fs::OpenOptions::new()
        .append(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
    {
        let _ = f.write_all(&line);
    }
}

/// Which of the guest's private folders (`/etc` and [`PRIVATE_DIRS`]) hides `path`, if one
/// does.
pub(crate) fn hides(path: &Path) -> Option<&'static str> {
    std::iter::once("/etc")
        .chain(PRIVATE_DIRS)
        .find(|dir| path.starts_with(dir))
}
