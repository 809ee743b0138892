//! Everything the reporter writes, as pure functions of their inputs.
//!
//! No I/O and no clock reads happen below this module: the timestamp, vm id and goal-state ids
//! are passed in, so the same inputs always give the same bytes (and snapshots need no
//! redaction).

pub mod encoded;
pub mod json;
pub mod xml;

/// The platform caps a health description at 4096 bytes (docs/protocol.md §4.2).
///
/// The limit is applied to the UTF-8 bytes of the *unescaped* text, which is what the
/// platform stores once it has parsed the XML or JSON: §4.2 notes that agents trim before
/// escaping and accepts that the escaped text is longer. WALinuxAgent keeps 10 % below the cap
/// (3686) because Python counts characters, not bytes; counting bytes makes that margin
/// unnecessary. §5 gives no separate limit for the JSON endpoint, which feeds the same store,
/// so both flows use this one.
pub const DESCRIPTION_MAX_BYTES: usize = 4096;

/// The longest prefix of `text` that is at most `max` bytes and ends on a character boundary.
pub fn cut_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A description as the platform will accept it: at most [`DESCRIPTION_MAX_BYTES`] bytes.
pub fn trim_description(description: &str) -> &str {
    cut_at_char_boundary(description, DESCRIPTION_MAX_BYTES)
}

/// The `subStatus` / `SubStatus` of a NotReady report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubStatus {
    /// Provisioning failed for good.
    ProvisioningFailed,
    /// Provisioning is still running.
    Provisioning,
}

impl SubStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubStatus::ProvisioningFailed => "ProvisioningFailed",
            SubStatus::Provisioning => "Provisioning",
        }
    }
}

/// What the reporter tells the wireserver, independent of the wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthState {
    Ready,
    NotReady {
        substatus: SubStatus,
        /// Already trimmed to [`DESCRIPTION_MAX_BYTES`] by the constructors.
        description: String,
    },
}

impl HealthState {
    /// NotReady + ProvisioningFailed with the (encoded) description, trimmed to the platform cap.
    pub fn failed(description: &str) -> Self {
        HealthState::NotReady {
            substatus: SubStatus::ProvisioningFailed,
            description: trim_description(description).to_owned(),
        }
    }

    /// NotReady + Provisioning with the description, trimmed to the platform cap.
    pub fn in_progress(description: &str) -> Self {
        HealthState::NotReady {
            substatus: SubStatus::Provisioning,
            description: trim_description(description).to_owned(),
        }
    }

    /// The default in-progress description, worded as azure-init's `report_in_progress`.
    pub fn default_in_progress_description(vm_id: &str) -> String {
        format!("Provisioning is still in progress for vm_id={vm_id}.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_never_splits_a_character() {
        // "é" is two bytes: a cut at 3 would land inside the second one.
        assert_eq!(cut_at_char_boundary("aéé", 4), "aé");
        assert_eq!(cut_at_char_boundary("aéé", 3), "aé");
        assert_eq!(cut_at_char_boundary("aéé", 2), "a");
        assert_eq!(cut_at_char_boundary("abc", 10), "abc");
        assert_eq!(cut_at_char_boundary("€", 2), "");
    }

    #[test]
    fn failed_description_is_trimmed_to_the_platform_cap() {
        let long = "€".repeat(2000); // 6000 bytes
        let HealthState::NotReady { description, .. } = HealthState::failed(&long) else {
            panic!("failed() must be NotReady");
        };
        assert_eq!(description.len(), 4095); // 1365 whole euro signs
        assert!(long.starts_with(&description));
    }
}
