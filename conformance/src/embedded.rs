//! The default suite and the agent profiles, built into the binary (`build.rs`), so
//! `cargo install --path cli` (or `--git`) gives a `wirecheck` that works with nothing
//! beside it. A checkout next to the executable (`target/<profile>/wirecheck`) wins, so edits
//! show without a rebuild; `--scenarios` and `--agents-dir` override both; `wirecheck
//! scenarios export DIR` writes editable copies.

use std::path::{Path, PathBuf};

use crate::agent::AgentProfile;
use crate::diag::FileError;
use crate::scenario::Scenario;

mod files {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// Where built-in files say they are, in messages and in `Scenario::file`.
pub const ORIGIN: &str = "(built in)";

/// The built-in scenario files: (file name, text), sorted by file name.
pub fn scenario_files() -> &'static [(&'static str, &'static str)] {
    files::SCENARIOS
}

/// The built-in agent profiles: (file name, text), sorted by file name.
pub fn profile_files() -> &'static [(&'static str, &'static str)] {
    files::PROFILES
}

fn origin(file_name: &str) -> PathBuf {
    Path::new(ORIGIN).join(file_name)
}

/// The built-in suite, parsed like a folder (`scenario::load_dir`): ids unique.
pub fn scenarios() -> Result<Vec<Scenario>, FileError> {
    let mut out: Vec<Scenario> = Vec::new();
    for (name, text) in scenario_files() {
        for s in Scenario::from_toml_str(text, &origin(name))? {
            crate::scenario::push_unique(&mut out, s)?;
        }
    }
    Ok(out)
}

/// The names of the built-in profiles (file stems), sorted.
pub fn profile_names() -> Vec<String> {
    profile_files()
        .iter()
        .map(|(n, _)| n.trim_end_matches(".toml").to_owned())
        .collect()
}

/// The built-in profile `name` (`None`: there is none).
pub fn profile(name: &str) -> Option<Result<AgentProfile, FileError>> {
    let file = format!("{name}.toml");
    profile_files()
        .iter()
        .find(|(n, _)| *n == file)
        .map(|(n, text)| AgentProfile::from_toml_str(text, &origin(n)))
}

/// Writes the built-in scenarios into `dir` (and the profiles into `agents`, when given);
/// refuses to overwrite a file. Returns the paths written.
pub fn export(dir: &Path, agents: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    let mut planned: Vec<(PathBuf, &str)> = scenario_files()
        .iter()
        .map(|(n, t)| (dir.join(n), *t))
        .collect();
    if let Some(agents) = agents {
        planned.extend(profile_files().iter().map(|(n, t)| (agents.join(n), *t)));
    }
    // All or nothing: an existing file stops the export before anything is written.
    if let Some((path, _)) = planned.iter().find(|(p, _)| p.symlink_metadata().is_ok()) {
        return Err(format!(
            "{}: exists already; export into an empty folder (or remove it)",
            path.display()
        ));
    }
    let mut written = Vec::new();
    for (path, text) in planned {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("{}: cannot create the folder: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_suite_is_the_checkout_suite() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let from_folder = crate::scenario::load_dir(&dir).unwrap();
        let built_in = scenarios().unwrap();
        let ids = |v: &[Scenario]| v.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&built_in), ids(&from_folder));
        assert!(built_in.len() > 30, "{}", built_in.len());
        for name in profile_names() {
            let p = profile(&name).unwrap().unwrap();
            assert_eq!(p.name, name);
        }
        assert!(profile_names().contains(&"provision-report".to_owned()));
        assert!(profile("nope").is_none());
    }
}
