//! Writing a scenario back as a scenario file (`--print-config`, `wirecheck scenarios export`):
//! the same format the parser reads, defaults filled in.

use std::path::Path;

use serde::Serialize;

use super::action::StepToml;
use super::*;

impl Scenario {
    /// The scenario as TOML, in the file format (effective configuration dumps).
    pub fn to_toml_string(&self) -> String {
        toml::to_string(&ScenarioToml::from(self)).unwrap_or_default()
    }

    /// The scenario as a TOML file that needs nothing of where it came from, for a scenario
    /// file written to `dir`: every file it loaded (`body_file`, `imds.instance_file`) is
    /// written again, as loaded, to `dir/files/`, and named relative to `dir`, inside the
    /// folder the file may load from.
    pub fn to_self_contained_toml(&self, dir: &Path) -> std::io::Result<String> {
        let files = dir.join(SELF_CONTAINED_FILES);
        let mut copy = self.clone();
        let mut n = 0usize;
        let mut write = |contents: &[u8]| -> std::io::Result<String> {
            std::fs::create_dir_all(&files)?;
            n += 1;
            let name = format!("{SELF_CONTAINED_FILES}/file-{n}");
            std::fs::write(dir.join(&name), contents)?;
            Ok(name)
        };
        for plan in &mut copy.endpoints {
            for step in &mut plan.steps {
                if let Some(Reply {
                    body: Some(Body::File { path, contents }),
                    ..
                }) = step.action.scripted_reply_mut()
                {
                    *path = write(contents)?;
                }
            }
        }
        if let (Some(file), Some(document)) = (
            copy.imds.instance_file.as_mut(),
            copy.imds.instance_document.as_ref(),
        ) {
            *file = write(document.to_string().as_bytes())?;
        }
        Ok(copy.to_toml_string())
    }
}

/// The folder, beside a self-contained scenario file, of the files it loads.
const SELF_CONTAINED_FILES: &str = "files";

// Serialization back to the file format (print-config)

/// Serializes a scenario in the file format (for embedding in other documents).
pub(crate) fn serialize_scenario<S: serde::Serializer>(
    scenario: &Scenario,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    ScenarioToml::from(scenario).serialize(serializer)
}

#[derive(Serialize)]
struct ScenarioToml<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    goalstate: &'a GoalStateOverrides,
    imds: &'a ImdsOverrides,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<&'a RateLimit>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    trigger: &'a Vec<Trigger>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    endpoint: Vec<EndpointToml<'a>>,
}

#[derive(Serialize)]
struct EndpointToml<'a> {
    id: &'a str,
    end: EndPolicy,
    step: Vec<StepToml<'a>>,
}

impl<'a> From<&'a Scenario> for ScenarioToml<'a> {
    fn from(s: &'a Scenario) -> Self {
        ScenarioToml {
            name: s.name.as_deref(),
            seed: s.seed,
            goalstate: &s.goalstate,
            imds: &s.imds,
            rate_limit: s.rate_limit.as_ref(),
            trigger: &s.triggers,
            endpoint: s
                .endpoints
                .iter()
                .map(|ep| EndpointToml {
                    id: &ep.id,
                    end: ep.end,
                    step: ep.steps.iter().map(StepToml::from).collect(),
                })
                .collect(),
        }
    }
}
