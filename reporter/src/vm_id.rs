//! Where the vm id comes from: the command line, IMDS, the DMI system UUID, or nothing; and
//! which ids are accepted from the command line and IMDS ([`check_vm_id`]).

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Used when no source gave a vm id.
pub const ZERO_GUID: &str = "00000000-0000-0000-0000-000000000000";

/// The longest vm id accepted from `--vm-id` or IMDS (a vm id is a 36-byte GUID).
pub const VM_ID_MAX_BYTES: usize = 254;

/// Why a vm id from `--vm-id` or IMDS is refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum VmIdError {
    #[error("the vm id is empty")]
    Empty,
    #[error("the vm id contains whitespace or a control character")]
    WhitespaceOrControl,
    #[error("the vm id is {0} bytes; expected at most {VM_ID_MAX_BYTES}")]
    TooLong(usize),
}

/// A vm id fit for the report and the log: not empty, no whitespace or control character (it
/// is a field of the encoded report and of log lines), at most [`VM_ID_MAX_BYTES`] (so that a
/// hostile IMDS cannot crowd the timestamp out of the 4096-byte description).
pub fn check_vm_id(id: &str) -> Result<(), VmIdError> {
    if id.is_empty() {
        Err(VmIdError::Empty)
    } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(VmIdError::WhitespaceOrControl)
    } else if id.len() > VM_ID_MAX_BYTES {
        Err(VmIdError::TooLong(id.len()))
    } else {
        Ok(())
    }
}

/// The source of the vm id in a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmIdSource {
    /// `--vm-id` / the library caller.
    Given,
    /// IMDS `compute.vmId`.
    Imds,
    /// `/sys/class/dmi/id/product_uuid` (byte-swapped on Generation 1 VMs).
    Dmi,
    /// None of the above: the zero GUID.
    Zero,
}

impl VmIdSource {
    pub fn as_str(self) -> &'static str {
        match self {
            VmIdSource::Given => "given",
            VmIdSource::Imds => "imds",
            VmIdSource::Dmi => "dmi",
            VmIdSource::Zero => "none",
        }
    }

    /// Whether the id can be trusted to be the Azure vm id (given, or from IMDS).
    pub fn is_authoritative(self) -> bool {
        matches!(self, VmIdSource::Given | VmIdSource::Imds)
    }
}

impl fmt::Display for VmIdSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the DMI UUID could not be used.
#[derive(Debug, Error)]
pub enum DmiError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {value:?} is not a UUID", path.display())]
    NotUuid { path: PathBuf, value: String },
}

/// The DMI facts below a root directory (`/` on a real system).
#[derive(Debug, Clone)]
pub struct Dmi {
    root: PathBuf,
}

impl Default for Dmi {
    fn default() -> Self {
        Dmi::new("/")
    }
}

impl Dmi {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Dmi { root: root.into() }
    }

    fn path(&self, absolute: &str) -> PathBuf {
        self.root.join(absolute.trim_start_matches('/'))
    }

    /// The vm id as cloud-init 25.2+ and azure-init derive it: the DMI system UUID, lower-cased,
    /// with the first three groups byte-swapped on Generation 1 (BIOS) VMs.
    pub fn vm_id(&self) -> Result<String, DmiError> {
        let path = self.path("/sys/class/dmi/id/product_uuid");
        let raw = std::fs::read_to_string(&path).map_err(|source| DmiError::Read {
            path: path.clone(),
            source,
        })?;
        let uuid = raw.trim().to_ascii_lowercase();
        if !is_uuid(&uuid) {
            return Err(DmiError::NotUuid { path, value: uuid });
        }
        Ok(if self.is_generation_1() {
            byte_swap_uuid(&uuid)
        } else {
            uuid
        })
    }

    /// Generation 1 VMs boot with BIOS: neither `/sys/firmware/efi` nor `/dev/efi` exists.
    pub fn is_generation_1(&self) -> bool {
        !exists(&self.path("/sys/firmware/efi")) && !exists(&self.path("/dev/efi"))
    }
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// `8-4-4-4-12` hexadecimal digits.
pub fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Reverses the byte order of the first three groups (the little-endian fields SMBIOS stores
/// on Generation 1 VMs): `12345678-abcd-ef01-…` → `78563412-cdab-01ef-…`.
pub fn byte_swap_uuid(uuid: &str) -> String {
    let swap = |group: &str| -> String {
        let bytes: Vec<&str> = (0..group.len())
            .step_by(2)
            .map(|i| &group[i..i + 2])
            .collect();
        bytes.into_iter().rev().collect()
    };
    let groups: Vec<&str> = uuid.split('-').collect();
    format!(
        "{}-{}-{}-{}-{}",
        swap(groups[0]),
        swap(groups[1]),
        swap(groups[2]),
        groups[3],
        groups[4]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_swap_matches_the_agents() {
        assert_eq!(
            byte_swap_uuid("12345678-abcd-ef01-2345-6789abcdef01"),
            "78563412-cdab-01ef-2345-6789abcdef01"
        );
    }

    #[test]
    fn reads_dmi_and_swaps_only_on_generation_1() {
        let root = tempfile::tempdir().unwrap();
        let dmi_dir = root.path().join("sys/class/dmi/id");
        std::fs::create_dir_all(&dmi_dir).unwrap();
        std::fs::write(
            dmi_dir.join("product_uuid"),
            "12345678-ABCD-EF01-2345-6789ABCDEF01\n",
        )
        .unwrap();
        let dmi = Dmi::new(root.path());
        assert!(dmi.is_generation_1());
        assert_eq!(dmi.vm_id().unwrap(), "78563412-cdab-01ef-2345-6789abcdef01");
        std::fs::create_dir_all(root.path().join("sys/firmware/efi")).unwrap();
        assert_eq!(dmi.vm_id().unwrap(), "12345678-abcd-ef01-2345-6789abcdef01");
    }

    #[test]
    fn garbage_is_not_a_vm_id() {
        let root = tempfile::tempdir().unwrap();
        let dmi_dir = root.path().join("sys/class/dmi/id");
        std::fs::create_dir_all(&dmi_dir).unwrap();
        std::fs::write(dmi_dir.join("product_uuid"), "Not Settable\n").unwrap();
        assert!(matches!(
            Dmi::new(root.path()).vm_id(),
            Err(DmiError::NotUuid { .. })
        ));
        assert!(matches!(
            Dmi::new(root.path().join("missing")).vm_id(),
            Err(DmiError::Read { .. })
        ));
    }
}
