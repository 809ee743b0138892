//! Run results: the model and its writers (JSON, JUnit, HTML).
//!
//! The runner builds a [`RunResults`] and hands it to the writers; each
//! writes one file into the `--out` folder, atomically (a temporary file in
//! the same folder, then a rename), so a crash never leaves half a report.
//!
//! The versioned contract (`schema/results.schema.json`) that `wirecheck merge` and other
//! tools read back: this crate depends on neither the runner (`conformance`) nor the command
//! line (`wirecheck`). Code map: [`model`] (what results.json holds), [`reason`] and
//! [`case_id`] (the wording of reasons and the shape of case ids, as read back), [`outcome`]
//! (how a run ends, from its results), the writers [`json`], [`junit`], [`html`],
//! [`summary`] (Markdown) and [`matrix`], [`problems`] (failures grouped by cause),
//! [`merge`], [`folder`] (claiming the results folder), [`text`] and [`markdown`] (someone
//! else's text, escaped).

pub mod case_id;
pub mod folder;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod matrix;
pub mod merge;
pub mod model;
pub mod outcome;
mod output;
pub mod problems;
pub mod reason;
pub mod summary;
pub mod text;

pub use model::{
    AgentResults, AnswerClass, Attempts, CaseResult, Evidence, NeverStartedAgent, NotJudged,
    NotOffered, PartInfo, RunEnd, RunInfo, RunResults, SCHEMA_VERSION, Timeline, TimelineEvent,
    UnclaimedFlow, Unsteady, Verdict, VerdictCounts,
};
pub use output::ResultsError;

use std::path::{Path, PathBuf};

/// Paths of the three files [`write_all`] produced.
#[derive(Debug, Clone)]
pub struct Written {
    pub json: PathBuf,
    pub junit: PathBuf,
    pub html: PathBuf,
}

/// Writes `results.json`, `junit.xml` and `report.html` into `dir` (created if missing).
pub fn write_all(dir: impl AsRef<Path>, results: &RunResults) -> Result<Written, ResultsError> {
    let dir = dir.as_ref();
    Ok(Written {
        json: json::write(dir, results)?,
        junit: junit::write(dir, results)?,
        html: html::write(dir, results)?,
    })
}
