//! `[install]`: where a real agent comes from. The bundled profiles are the registry of real
//! agents: `scripts/install-agents.sh` reads this table (with python3's `tomllib`, before
//! anything is built) to fetch each one, the bench's matrix and the committed agent snapshots
//! list the profiles, so a new agent is one profile, not three hand-kept lists. The folder
//! under `target/agents/` is the one the profile's commands and environment name.

use serde::Deserialize;
use toml::Spanned;

use crate::diag::FileError;

/// How a real agent is installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    /// A package of the machine's own Debian archive (its suite swapped), unpacked, never
    /// installed (install scripts start services), into `target/agents/<folder>`.
    DebianUnpacked {
        suite: String,
        package: String,
        version: String,
        folder: String,
    },
    /// A package of the machine's own suite, installed with apt-get (its files live in the
    /// system's paths).
    Debian { package: String },
    /// A crate from crates.io, built with its own Cargo.lock into `target/agents/<folder>`.
    Cargo {
        package: String,
        version: String,
        folder: String,
    },
    /// A crate of this workspace, built with it.
    Workspace { package: String },
}

impl Install {
    /// The folder under `target/agents/` it lands in, when it has one of its own.
    pub fn folder(&self) -> Option<&str> {
        match self {
            Install::DebianUnpacked { folder, .. } | Install::Cargo { folder, .. } => Some(folder),
            Install::Debian { .. } | Install::Workspace { .. } => None,
        }
    }
}

/// The table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InstallFile {
    from: Spanned<String>,
    package: Spanned<String>,
    suite: Option<Spanned<String>>,
    version: Option<Spanned<String>>,
    folder: Option<Spanned<String>>,
}

type At<'a> = &'a dyn Fn(std::ops::Range<usize>, &str, String) -> FileError;

/// A word of a package name, suite, version or folder: what a shell and a path can carry as
/// is (no separators; a letter or digit first, so neither `.`, `..` nor an option).
fn plain(raw: &Spanned<String>, field: &str, at: At) -> Result<String, FileError> {
    let word = raw.get_ref();
    let ok = word.len() <= 64
        && word
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+' | b'~'));
    if ok {
        Ok(word.clone())
    } else {
        Err(at(
            raw.span(),
            field,
            format!(
                "{word:?}: expected 1 to 64 of letters, digits and . - _ + ~, a letter or digit first"
            ),
        ))
    }
}

impl InstallFile {
    pub(super) fn install(&self, at: At) -> Result<Install, FileError> {
        let package = plain(&self.package, "install.package", at)?;
        let need = |raw: &Option<Spanned<String>>, field: &str| match raw {
            Some(raw) => plain(raw, field, at),
            None => Err(at(
                self.from.span(),
                field,
                format!("install.from = {:?} needs {field}", self.from.get_ref()),
            )),
        };
        let refuse = |raw: &Option<Spanned<String>>, field: &str| match raw {
            Some(raw) => Err(at(
                raw.span(),
                field,
                format!("install.from = {:?} takes no {field}", self.from.get_ref()),
            )),
            None => Ok(()),
        };
        match self.from.get_ref().as_str() {
            "debian-unpacked" => Ok(Install::DebianUnpacked {
                suite: need(&self.suite, "install.suite")?,
                version: need(&self.version, "install.version")?,
                folder: need(&self.folder, "install.folder")?,
                package,
            }),
            "debian" | "workspace" => {
                refuse(&self.suite, "install.suite")?;
                refuse(&self.version, "install.version")?;
                refuse(&self.folder, "install.folder")?;
                Ok(if self.from.get_ref() == "debian" {
                    Install::Debian { package }
                } else {
                    Install::Workspace { package }
                })
            }
            "cargo" => {
                refuse(&self.suite, "install.suite")?;
                Ok(Install::Cargo {
                    version: need(&self.version, "install.version")?,
                    folder: need(&self.folder, "install.folder")?,
                    package,
                })
            }
            other => Err(at(
                self.from.span(),
                "install.from",
                format!(
                    "{other:?}: expected \"debian-unpacked\", \"debian\", \"cargo\" or \"workspace\""
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::agent::{AgentProfile, list_profiles};

    const BASE: &str = "name = \"t\"\ndescription = \"t\"\ncapabilities = [\"json\"]\n[commands]\nready = [\"true\"]\n";

    fn load(table: &str) -> Result<Option<Install>, String> {
        AgentProfile::from_toml_str(&format!("{BASE}[install]\n{table}"), Path::new("t.toml"))
            .map(|p| p.install)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn each_origin_takes_its_fields_and_names_what_is_wrong() {
        assert_eq!(
            load(
                "from = \"debian-unpacked\"\nsuite = \"trixie\"\npackage = \"waagent\"\nversion = \"2.12.0.2\"\nfolder = \"walinuxagent-2.12\"\n"
            ),
            Ok(Some(Install::DebianUnpacked {
                suite: "trixie".into(),
                package: "waagent".into(),
                version: "2.12.0.2".into(),
                folder: "walinuxagent-2.12".into(),
            }))
        );
        assert_eq!(
            load("from = \"debian\"\npackage = \"cloud-init\"\n"),
            Ok(Some(Install::Debian {
                package: "cloud-init".into()
            }))
        );
        let missing =
            load("from = \"cargo\"\npackage = \"afterburn\"\nversion = \"5.11.0\"\n").unwrap_err();
        assert!(
            missing.contains("install.folder") && missing.contains("needs"),
            "{missing}"
        );
        let stray =
            load("from = \"workspace\"\npackage = \"a\"\nsuite = \"trixie\"\n").unwrap_err();
        assert!(stray.contains("takes no install.suite"), "{stray}");
        let escape =
            load("from = \"cargo\"\npackage = \"a\"\nversion = \"1\"\nfolder = \"../../etc\"\n")
                .unwrap_err();
        assert!(
            escape.contains("install.folder") && escape.contains("../../etc"),
            "{escape}"
        );
        let shell = load("from = \"debian\"\npackage = \"a; rm -rf /\"\n").unwrap_err();
        assert!(shell.contains("install.package"), "{shell}");
        let option =
            load("from = \"debian\"\npackage = \"--allow-unauthenticated\"\n").unwrap_err();
        assert!(option.contains("a letter or digit first"), "{option}");
        let here = load("from = \"cargo\"\npackage = \"a\"\nversion = \"1\"\nfolder = \".\"\n")
            .unwrap_err();
        assert!(here.contains("install.folder"), "{here}");
        let unknown = load("from = \"pip\"\npackage = \"a\"\n").unwrap_err();
        assert!(
            unknown.contains("\"pip\"") && unknown.contains("debian-unpacked"),
            "{unknown}"
        );
    }

    /// The registry is what the tools use: every bundled real agent says where it comes from
    /// and which cases are pinned; one unpacked or built into a folder of its own runs from that
    /// folder (a typo in either would install one place and run another), and profiles that
    /// share a folder name the same package (the installer unpacks a folder once).
    #[test]
    fn every_bundled_profile_is_in_the_registry_and_runs_from_its_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
        let names = list_profiles(&dir).unwrap();
        assert!(names.len() >= 10, "{names:?}");
        let mut folders: std::collections::BTreeMap<String, Install> = Default::default();
        for name in names {
            let path = dir.join(format!("{name}.toml"));
            let profile = AgentProfile::load(&path).unwrap();
            assert!(
                profile.snapshot.cases.is_some(),
                "{name}: no [snapshot] cases"
            );
            if name == "provision-report" {
                continue;
            }
            let install = profile
                .install
                .unwrap_or_else(|| panic!("{name}: no [install]"));
            let Some(folder) = install.folder() else {
                continue;
            };
            // In a command or environment value, where the runner resolves `{bin_dir}`.
            let runs_from = format!("\"{{bin_dir}}/../agents/{folder}");
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                text.lines()
                    .filter(|l| !l.trim_start().starts_with('#'))
                    .any(|l| l.contains(&runs_from)),
                "{name}: installed into target/agents/{folder}, but no command or env value runs it from {runs_from}/"
            );
            if let Some(other) = folders.insert(folder.to_owned(), install.clone()) {
                assert_eq!(
                    other, install,
                    "{name}: target/agents/{folder} holds another package"
                );
            }
        }
    }
}
