//! The guest: the simulated Azure VM an agent provisions inside `fake-wireserver sandbox
//! --guest FILE` (issue 26). This is its contract, the file's format and what the sandbox
//! makes of it; the set-up itself is the binary's (`fake-wireserver-cli/src/sandbox/guest.rs`).
//!
//! With a guest, COMMAND runs as root of a guest namespace of its own
//! (`contain::userns::UnprivilegedRoot::new_guest`): nobody on the host, as with
//! `--unprivileged`, but with ids 1 to 65535 of its own for the users it creates, its
//! capabilities held in that namespace only, its own host name, under the agent system-call
//! filter. The sandbox also gives it:
//!
//! * a private, writable `/etc` (a copy of the host's, on a tmpfs, its files the guest's root's
//!   and users' as they were the host's), `/home`, `/root`, `/mnt`, `/var/mail` and `/var/log`,
//!   all discarded after: `useradd` and friends change only the guest;
//! * DMI: `/sys/class/dmi/id` with `product_uuid` (the VM id in the byte order of the
//!   [`Generation`]), `sys_vendor`, `product_name` and `chassis_asset_tag` as on Azure, and
//!   `/sys/firmware/efi` present on generation 2 only;
//! * the provisioning media: a `/dev/sr0` entry and a tmpfs mounted from `/dev/sr0` on
//!   [`MEDIA_MOUNT`] holding `ovf-env.xml` (agents that find the device already mounted read it
//!   there; the kernel here may have no iso9660 or udf);
//! * a primary NIC, `eth0` at [`PRIMARY_ADDRESS`] with IMDS's MAC, for agents that wait for one;
//! * stand-ins for the provisioning tools ([`Tool`]): each call is recorded (a line of
//!   [`GUEST_CALLS_FILE`] in `--out`: [`ToolCall`]), then fails as the guest file says, or
//!   runs the real tool on the private `/etc` and `/home`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where the provisioning media is mounted (WALinuxAgent's default `DVD.MountPoint`).
pub const MEDIA_MOUNT: &str = "/mnt/cdrom/secure";
/// The media's device name, as `mount` lists it.
pub const MEDIA_DEVICE: &str = "/dev/sr0";
/// The guest's primary NIC.
pub const PRIMARY_NIC: &str = "eth0";
/// The primary NIC's address (a /24).
pub const PRIMARY_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 4);
/// The primary NIC's MAC: the one the default IMDS instance document gives its interface
/// (`network.interface[0].macAddress`), as on Azure, where agents match the two (cloud-init).
pub const PRIMARY_MAC: &str = "60:45:bd:a7:a1:b2";
/// The stand-ins' calls, one JSON line each ([`ToolCall`]), in `--out`.
pub const GUEST_CALLS_FILE: &str = "guest-calls.jsonl";
/// Calls recorded at most (in bytes: [`CALLS_FILE_MAX`]); later calls are not recorded.
pub const MAX_RECORDED_CALLS: usize = 10_000;
/// Bytes of one call's arguments recorded at most (the rest is cut, and the record says so).
pub const MAX_RECORDED_ARGV_BYTES: usize = 16 << 10;
/// The call record's largest size: what a stand-in stops recording at, and what is copied.
pub const CALLS_FILE_MAX: u64 = (MAX_RECORDED_CALLS * (MAX_RECORDED_ARGV_BYTES + 256)) as u64;
/// The largest `ovf-env.xml` or scripted stderr a guest file may hold.
pub const MAX_TEXT_BYTES: usize = 256 << 10;
/// The largest guest file: its texts, one per tool and the media's, and their keys.
pub const MAX_FILE_BYTES: u64 = ((Tool::ALL.len() + 2) * MAX_TEXT_BYTES) as u64;
/// Azure's chassis asset tag (cloud-init's platform check reads it).
pub const AZURE_CHASSIS_ASSET_TAG: &str = "7783-7084-3265-9085-8269-3286-77";

/// A tool the guest replaces with a recording stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    /// `useradd`: the agent creates the admin user.
    Useradd,
    /// `usermod`: its password or groups.
    Usermod,
    /// `chpasswd`: its password, from stdin.
    Chpasswd,
    /// `passwd`: its password, or the root password's removal.
    Passwd,
    /// `hostname`: the host name, at once.
    Hostname,
    /// `hostnamectl`: the host name, through systemd.
    Hostnamectl,
    /// `ssh-keygen`: host keys and their fingerprints.
    SshKeygen,
}

impl Tool {
    /// Every tool, in declaration order.
    pub const ALL: [Tool; 7] = [
        Tool::Useradd,
        Tool::Usermod,
        Tool::Chpasswd,
        Tool::Passwd,
        Tool::Hostname,
        Tool::Hostnamectl,
        Tool::SshKeygen,
    ];

    /// The command's name, as agents call it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Useradd => "useradd",
            Tool::Usermod => "usermod",
            Tool::Chpasswd => "chpasswd",
            Tool::Passwd => "passwd",
            Tool::Hostname => "hostname",
            Tool::Hostnamectl => "hostnamectl",
            Tool::SshKeygen => "ssh-keygen",
        }
    }

    /// The tool called `name`, if the guest replaces it.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The VM generation: it decides the DMI id's byte order and whether the firmware is UEFI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub enum Generation {
    /// BIOS: SMBIOS stores the id's first three fields little-endian, so `product_uuid`
    /// shows them byte-swapped against IMDS's `vmId`.
    #[default]
    Gen1,
    /// UEFI: `product_uuid` is the `vmId` as is, and `/sys/firmware/efi` exists.
    Gen2,
}

impl TryFrom<u8> for Generation {
    type Error = String;
    fn try_from(n: u8) -> Result<Self, String> {
        match n {
            1 => Ok(Generation::Gen1),
            2 => Ok(Generation::Gen2),
            _ => Err(format!("generation: expected 1 or 2, got {n}")),
        }
    }
}

impl From<Generation> for u8 {
    fn from(g: Generation) -> u8 {
        match g {
            Generation::Gen1 => 1,
            Generation::Gen2 => 2,
        }
    }
}

/// What a stand-in does after recording the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFault {
    /// Its exit status (1 to 255).
    pub exit: u8,
    /// What it writes to stderr first.
    #[serde(default)]
    pub stderr: String,
}

/// The guest file (`--guest FILE`, TOML).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guest {
    /// The VM id as IMDS's `vmId` spells it; DMI shows it in the generation's byte order.
    /// None: the guest has no DMI id at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_id: Option<String>,
    #[serde(default)]
    /// The VM generation (1 by default, as most images).
    pub generation: Generation,
    /// The provisioning media's `ovf-env.xml`, byte for byte; None: no media.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovf_env: Option<String>,
    /// Tools that fail; every other [`Tool`] records the call and runs the real one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fail: BTreeMap<Tool, ToolFault>,
}

impl Guest {
    /// Reads and checks a guest file; errors name the file and the field.
    pub fn from_file(path: &Path) -> Result<Guest, String> {
        let text = crate::files::read_regular_text(path, MAX_FILE_BYTES)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Guest::from_toml_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses and checks a guest file's text.
    pub fn from_toml_str(text: &str) -> Result<Guest, String> {
        let guest: Guest = toml::from_str(text).map_err(|e| e.to_string())?;
        guest.validate()?;
        Ok(guest)
    }

    /// The guest as a file.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a guest serializes")
    }

    /// The bounds a file must keep: a well-formed id, bounded texts, real exit statuses.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(id) = &self.vm_id {
            parse_uuid(id).ok_or_else(|| {
                format!("vm_id: expected a UUID (8-4-4-4-12 hex digits), got {id:?}")
            })?;
        }
        if self
            .ovf_env
            .as_ref()
            .is_some_and(|x| x.len() > MAX_TEXT_BYTES)
        {
            return Err(format!("ovf_env: longer than {MAX_TEXT_BYTES} bytes"));
        }
        for (tool, fault) in &self.fail {
            if fault.exit == 0 {
                return Err(format!(
                    "fail.{}.exit: expected a failing status (1 to 255), got 0",
                    tool.name()
                ));
            }
            if fault.stderr.len() > MAX_TEXT_BYTES {
                return Err(format!(
                    "fail.{}.stderr: longer than {MAX_TEXT_BYTES} bytes",
                    tool.name()
                ));
            }
        }
        Ok(())
    }

    /// `product_uuid` as DMI shows it (lower case), or None without a VM id.
    pub fn dmi_product_uuid(&self) -> Option<String> {
        let bytes = parse_uuid(self.vm_id.as_deref()?)?;
        let b = match self.generation {
            Generation::Gen2 => bytes,
            Generation::Gen1 => gen1_swapped(bytes),
        };
        Some(format_uuid(&b))
    }
}

/// The first three fields byte-swapped (SMBIOS's little-endian encoding of them).
fn gen1_swapped(b: [u8; 16]) -> [u8; 16] {
    let mut s = b;
    s[0..4].reverse();
    s[4..6].reverse();
    s[6..8].reverse();
    s
}

fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = s.split('-').collect();
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lens != [8, 4, 4, 4, 12] {
        return None;
    }
    let hex: String = groups.concat();
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn format_uuid(b: &[u8; 16]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// One call a stand-in recorded (a line of [`GUEST_CALLS_FILE`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool called.
    pub tool: Tool,
    /// Its arguments after the command name, lossily UTF-8.
    pub args: Vec<String>,
    /// True when the arguments were cut at [`MAX_RECORDED_ARGV_BYTES`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub args_cut: bool,
    /// What the stand-in did: the scripted failure's status, or None when it ran the real
    /// tool (whose own status the agent saw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_with: Option<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guest's NIC is the one IMDS describes: an agent matching them finds its NIC.
    #[test]
    fn the_primary_mac_is_the_default_instance_documents() {
        let doc: serde_json::Value = serde_json::from_str(crate::documents::INSTANCE_JSON).unwrap();
        let mac = doc["network"]["interface"][0]["macAddress"]
            .as_str()
            .unwrap();
        assert_eq!(PRIMARY_MAC.replace(':', "").to_uppercase(), mac);
    }

    #[test]
    fn gen1_shows_the_vm_id_byte_swapped_and_gen2_as_is() {
        let id = "12345678-9abc-def0-1122-334455667788";
        let mut g = Guest {
            vm_id: Some(id.into()),
            ..Guest::default()
        };
        assert_eq!(
            g.dmi_product_uuid().unwrap(),
            "78563412-bc9a-f0de-1122-334455667788"
        );
        g.generation = Generation::Gen2;
        assert_eq!(g.dmi_product_uuid().unwrap(), id);
    }

    #[test]
    fn a_guest_file_names_the_field_it_rejects() {
        let e = Guest::from_toml_str("vm_id = \"nope\"").unwrap_err();
        assert!(e.contains("vm_id: expected a UUID"), "{e}");
        let e =
            Guest::from_toml_str("vm_id = \"+2345678-9abc-def0-1122-334455667788\"").unwrap_err();
        assert!(e.contains("vm_id: expected a UUID"), "{e}");
        let e = Guest::from_toml_str("generation = 3").unwrap_err();
        assert!(e.contains("expected 1 or 2"), "{e}");
        let e = Guest::from_toml_str("[fail.useradd]\nexit = 0").unwrap_err();
        assert!(e.contains("fail.useradd.exit"), "{e}");
        let e = Guest::from_toml_str("[fail.rm]\nexit = 1").unwrap_err();
        assert!(e.contains("unknown variant `rm`"), "{e}");
        let e = Guest::from_toml_str("colour = 1").unwrap_err();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn a_guest_round_trips_through_its_file() {
        let mut g = Guest {
            vm_id: Some("12345678-9abc-def0-1122-334455667788".into()),
            generation: Generation::Gen2,
            ovf_env: Some("<Environment/>".into()),
            ..Guest::default()
        };
        g.fail.insert(
            Tool::Useradd,
            ToolFault {
                exit: 9,
                stderr: "useradd: user 'x' already exists\n".into(),
            },
        );
        assert_eq!(Guest::from_toml_str(&g.to_toml()).unwrap(), g);
    }
}
