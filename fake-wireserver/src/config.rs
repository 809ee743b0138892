//! The effective configuration of a fake (`fake-wireserver --print-config`): defaults, the
//! scenario file and flags merged, as TOML. The `[fake]` table has the scenario file format with
//! every default filled in, so it can be copied into a scenario file.

use std::path::Path;

use serde::Serialize;

use crate::documents::{effective_goalstate, effective_imds};
use crate::fake::FakeConfig;
use crate::scenario::Scenario;

/// The merged configuration, serialized by [`EffectiveConfig::to_toml`].
#[derive(Debug, Serialize)]
pub struct EffectiveConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    scenario_file: Option<String>,
    listen: Listen,
    journal: JournalConfig,
    limits: Limits,
    #[serde(serialize_with = "crate::scenario::serialize_scenario")]
    fake: Scenario,
}

#[derive(Debug, Serialize)]
struct Listen {
    #[serde(skip_serializing_if = "Option::is_none")]
    wireserver: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    imds: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hostplugin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    admin: Option<String>,
}

#[derive(Debug, Serialize)]
struct JournalConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    capacity: usize,
    max_bytes: usize,
}

#[derive(Debug, Serialize)]
struct Limits {
    max_body_bytes: usize,
    read_timeout: f64,
    /// `--allow-files` folders (the scenario's own folder is always allowed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allow_files: Vec<String>,
}

impl EffectiveConfig {
    /// The configuration of a fake about to start with `config` (its scenario from `scenario_file`).
    pub fn new(config: &FakeConfig, scenario_file: Option<&Path>) -> Self {
        let mut scenario = config.scenario.clone();
        scenario.seed = Some(scenario.seed.unwrap_or(0));
        scenario.goalstate = effective_goalstate(&scenario.goalstate);
        scenario.imds = effective_imds(&scenario.imds);
        EffectiveConfig {
            scenario_file: scenario_file.map(|p| p.display().to_string()),
            listen: Listen {
                wireserver: config.wireserver.map(|a| a.to_string()),
                imds: config.imds.map(|a| a.to_string()),
                hostplugin: config.hostplugin.map(|a| a.to_string()),
                proxy: config.proxy.map(|a| a.to_string()),
                admin: config.admin.map(|a| a.to_string()),
            },
            journal: JournalConfig {
                file: config
                    .journal_file
                    .as_ref()
                    .map(|p| p.display().to_string()),
                capacity: config.journal_capacity,
                max_bytes: config.journal_max_bytes,
            },
            limits: Limits {
                max_body_bytes: config.max_body_bytes,
                read_timeout: config.read_timeout.as_secs_f64(),
                allow_files: config
                    .allow_files
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect(),
            },
            fake: scenario,
        }
    }

    /// As TOML (what `--print-config` prints).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}
