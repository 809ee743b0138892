//! Writing a scenario back as a scenario file (`--print-config`, `wirecheck scenarios export`):
//! the same format the parser reads, defaults filled in.

use std::path::Path;

use serde::Serialize;

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
                let reply = match &mut step.action {
                    Action::Respond(r) => Some(r),
                    Action::Delay { reply, .. }
                    | Action::Partial { reply, .. }
                    | Action::Slow { reply, .. } => reply.as_mut(),
                    Action::Hang | Action::Reset | Action::Close | Action::Malformed { .. } => None,
                };
                if let Some(Reply {
                    body: Some(Body::File { path, contents }),
                    ..
                }) = reply
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

#[derive(Serialize, Default)]
struct StepToml<'a> {
    kind: &'static str,
    times: u32,
    probability: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preset: Option<Preset>,
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<&'a Vec<(String, String)>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_sent: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chunk: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    then: Option<TriggerAction>,
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

impl<'a> From<&'a Step> for StepToml<'a> {
    fn from(step: &'a Step) -> Self {
        let mut out = StepToml {
            kind: step.action.kind().as_str(),
            times: step.times,
            probability: step.probability,
            then: step.then,
            ..StepToml::default()
        };
        let reply = match &step.action {
            Action::Respond(r) => Some(r),
            Action::Delay { seconds, reply } => {
                out.seconds = Some(*seconds);
                reply.as_ref()
            }
            Action::Hang | Action::Reset | Action::Close => None,
            Action::Malformed { bytes } => {
                out.bytes = Some(bytes);
                None
            }
            Action::Partial { bytes_sent, reply } => {
                out.bytes_sent = Some(*bytes_sent);
                reply.as_ref()
            }
            Action::Slow {
                chunk,
                interval,
                reply,
            } => {
                out.chunk = Some(*chunk);
                out.interval = Some(*interval);
                reply.as_ref()
            }
        };
        if let Some(r) = reply {
            out.status = r.status;
            out.preset = r.preset;
            out.headers = (!r.headers.is_empty()).then_some(&r.headers);
            match &r.body {
                Some(Body::Inline(s)) => out.body = Some(s),
                Some(Body::File { path, .. }) => out.body_file = Some(path),
                None => {}
            }
        }
        out
    }
}
