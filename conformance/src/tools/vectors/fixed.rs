//! The "Fixed fake values" the published vectors were recorded against
//! (testdata/vectors/README.md): the fake is configured with them before
//! request vectors are replayed.

use std::path::Path;

use super::VectorOutcome;

/// Values the recording fake served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedValues {
    pub incarnation: &'static str,
    pub container_id: &'static str,
    pub instance_id: &'static str,
    pub vm_id: &'static str,
    pub name: &'static str,
    pub vm_size: &'static str,
    pub admin_username: &'static str,
}

/// The published set's values (README "Fixed fake values").
pub const FIXED: FixedValues = FixedValues {
    incarnation: "7",
    container_id: "c0ffee00-1111-2222-3333-444444444444",
    instance_id: "11111111222233334444555555555555.vector-vm",
    vm_id: "11111111-2222-3333-4444-555555555555",
    name: "vector-vm",
    vm_size: "Standard_D2s_v3",
    admin_username: "azureuser",
};

impl FixedValues {
    /// The fake's scenario (§3 TOML): goal state and IMDS overrides, no
    /// `Certificates` in the goal state, every endpoint answering normally. IMDS's per-VM rate
    /// limit is off: the vectors, recorded over many runs, are replayed back to back, and a
    /// 429 would be an answer to the replay's pace, not to the request.
    pub fn scenario_toml(&self) -> String {
        format!(
            "name = \"vectors: fixed fake values\"\n\
             [goalstate]\nincarnation = \"{}\"\ncontainer_id = \"{}\"\ninstance_id = \"{}\"\ncertificates = false\n\
             [imds]\nvm_id = \"{}\"\nname = \"{}\"\nvm_size = \"{}\"\nadmin_username = \"{}\"\n\
             rate_limit = false\n",
            self.incarnation,
            self.container_id,
            self.instance_id,
            self.vm_id,
            self.name,
            self.vm_size,
            self.admin_username
        )
    }

    /// `(label, value as the README writes it)`.
    fn readme_spellings(&self) -> [(&'static str, String); 7] {
        [
            (
                "Incarnation",
                format!("`Incarnation` `{}`", self.incarnation),
            ),
            (
                "ContainerId",
                format!("`ContainerId` `{}`", self.container_id),
            ),
            ("InstanceId", format!("`InstanceId` `{}`", self.instance_id)),
            ("compute.vmId", format!("`compute.vmId` = `{}`", self.vm_id)),
            ("name", format!("`computerName` `{}`", self.name)),
            ("vmSize", format!("`vmSize` `{}`", self.vm_size)),
            (
                "adminUsername",
                format!("`adminUsername` `{}`", self.admin_username),
            ),
        ]
    }
}

/// The folder's README must state the values the fake is configured with,
/// so a vectors set recorded against other values is not judged wrongly.
pub(super) fn check_readme(dir: &Path) -> VectorOutcome {
    let name = "README.md (fixed fake values)";
    let text = match std::fs::read_to_string(dir.join("README.md")) {
        Ok(text) => text,
        Err(e) => {
            return VectorOutcome::new(
                name,
                vec![format!(
                    "cannot read README.md ({e}); it states the values the fake must serve"
                )],
            );
        }
    };
    let Some(start) = text.find("## Fixed fake values") else {
        return VectorOutcome::new(name, vec!["no \"## Fixed fake values\" section".into()]);
    };
    let section = &text[start..];
    let section = section[3..]
        .find("\n## ")
        .map_or(section, |end| &section[..end + 3]);
    let mismatches = FIXED
        .readme_spellings()
        .into_iter()
        .filter(|(_, spelled)| !section.contains(spelled.as_str()))
        .map(|(label, spelled)| {
            format!("{label}: the fake serves {spelled} but the README's section does not say so")
        })
        .collect();
    VectorOutcome::new(name, mismatches)
}
