//! Where scenarios and agent profiles are read from: `--scenarios` folders (`@builtin` the suite
//! built into the binary), `--agents-dir`, else the checkout the binary was built in (files on
//! disk win, so an edit shows without a rebuild), else the built-in copies.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use conformance::agent::{self, AgentProfile};
use conformance::scenario::{self, Scenario};

use crate::cli::Sources;
use crate::status::usage;

/// `--scenarios @builtin`: the suite built into the binary.
pub const BUILTIN: &str = "@builtin";

/// Where profiles are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentsSource {
    Dir(PathBuf),
    Builtin,
}

impl AgentsSource {
    /// Profile `name` (or a path to a .toml file, read as such).
    pub fn find(&self, name: &str) -> Result<AgentProfile, conformance::diag::FileError> {
        let path_like = name.ends_with(".toml") || name.contains('/');
        match self {
            AgentsSource::Dir(dir) => agent::find_profile(dir, name),
            AgentsSource::Builtin if path_like => agent::find_profile(Path::new("."), name),
            AgentsSource::Builtin => conformance::embedded::profile(name).unwrap_or_else(|| {
                Err(conformance::diag::FileError::whole(
                    Path::new(conformance::embedded::ORIGIN),
                    format!(
                        "no agent profile named {name:?} (built in: {}; --agents-dir DIR reads a folder of them)",
                        conformance::embedded::profile_names().join(", ")
                    ),
                ))
            }),
        }
    }
}

/// The folder of the running executable (bundled agents live beside it).
pub fn bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The wirecheck checkout the executable was built in (`target/<profile>/wirecheck` →
/// `../..`), recognized by its `conformance/Cargo.toml`: there the files on disk win over the
/// built-in copies, so an edit shows without a rebuild. An installed binary has none (an
/// install folder's `../..` is someone's home, never taken for a checkout).
fn checkout() -> Option<PathBuf> {
    let root = bin_dir().join("../..").canonicalize().ok()?;
    (root.join("conformance/Cargo.toml").is_file()
        && root.join("scenarios").is_dir()
        && root.join("conformance/agents").is_dir())
    .then_some(root)
}

impl Sources {
    /// The scenario folders, `None` standing for the built-in suite.
    pub fn scenario_sources(&self) -> Vec<Option<PathBuf>> {
        if self.scenarios.is_empty() {
            return vec![checkout().map(|c| c.join("scenarios"))];
        }
        self.scenarios
            .iter()
            .map(|p| (p.as_os_str() != BUILTIN).then(|| p.clone()))
            .collect()
    }

    pub fn agents_source(&self) -> AgentsSource {
        agents_source(self.agents_dir.as_ref())
    }
}

/// `--agents-dir DIR`, else the checkout's `conformance/agents/`, else the built-in profiles.
pub fn agents_source(agents_dir: Option<&PathBuf>) -> AgentsSource {
    match (agents_dir, checkout()) {
        (Some(dir), _) => AgentsSource::Dir(dir.clone()),
        (None, Some(root)) => AgentsSource::Dir(root.join("conformance/agents")),
        (None, None) => AgentsSource::Builtin,
    }
}

/// Every scenario of every source, ids unique across them (the error names both files).
pub fn load_scenarios(sources: &Sources) -> Result<Vec<Arc<Scenario>>, u8> {
    let mut all: Vec<Arc<Scenario>> = Vec::new();
    for source in sources.scenario_sources() {
        let loaded = match &source {
            Some(dir) => scenario::load_dir(dir),
            None => conformance::embedded::scenarios(),
        }
        .map_err(usage)?;
        for s in loaded {
            if let Some(other) = all.iter().find(|o| o.id == s.id) {
                return Err(usage(format!(
                    "{}: field `id`: {:?} is already used by {}; case ids must be unique across --scenarios folders and files",
                    s.file.display(),
                    s.id,
                    other.file.display()
                )));
            }
            all.push(Arc::new(s));
        }
    }
    Ok(all)
}
