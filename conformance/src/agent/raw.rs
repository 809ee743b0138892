//! A profile as written: the serde model of its TOML, values spanned so that an error can
//! name the line; unknown keys are errors. [`super::validate`] turns it into the model.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProfileFile {
    pub(super) name: Spanned<String>,
    pub(super) description: String,
    #[serde(default)]
    pub(super) attach: Attach,
    pub(super) commands: CommandsFile,
    #[serde(default)]
    pub(super) env: BTreeMap<String, Spanned<String>>,
    pub(super) capabilities: Vec<Capability>,
    pub(super) reactions: Option<ReactionsFile>,
    #[serde(default)]
    pub(super) exit: ExitCodes,
    pub(super) done: Option<Spanned<Done>>,
    pub(super) done_grace: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) sandbox: SandboxFile,
    pub(super) in_progress_continues_to_ready: Option<Spanned<bool>>,
    #[serde(default)]
    pub(super) failure_description: FailureDescription,
    pub(super) health_report: Option<Spanned<HealthReporting>>,
    #[serde(default)]
    pub(super) clock: clock::ClockKind,
    pub(super) fastest_clock: Option<Spanned<u32>>,
    #[serde(default, rename = "deviation")]
    pub(super) deviations: Vec<DeviationFile>,
    #[serde(default, rename = "limitation")]
    pub(super) limitations: Vec<LimitationFile>,
    pub(super) encoded: Option<Spanned<EncodedFile>>,
    #[serde(default)]
    pub(super) snapshot: SnapshotFile,
    #[serde(default)]
    pub(super) limits: LimitsFile,
    pub(super) install: Option<install::InstallFile>,
    pub(super) guest: Option<Spanned<GuestFile>>,
}

/// `[guest]`: `only`, and `[guest.reasons]` by scenario id.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GuestFile {
    #[serde(default)]
    pub(super) only: bool,
    #[serde(default)]
    pub(super) reasons: BTreeMap<String, Spanned<String>>,
}

/// `[limits]`: each a whole number in the unit its name says (`Limits::RANGES`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub(super) processes: Option<Spanned<i64>>,
    pub(super) memory_mib: Option<Spanned<i64>>,
    pub(super) file_size_mib: Option<Spanned<i64>>,
    pub(super) open_files: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SnapshotFile {
    pub(super) cases: Option<Spanned<String>>,
    pub(super) headers: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) redact: Vec<Spanned<RedactFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RedactFile {
    pub(super) field: Option<String>,
    pub(super) pattern: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EncodedFile {
    pub(super) quote: Spanned<String>,
    pub(super) order: Spanned<String>,
    pub(super) timestamp: TimestampStyle,
    pub(super) description_trim: Option<Spanned<usize>>,
    pub(super) kvp_cut: Option<Spanned<usize>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SandboxFile {
    #[serde(default)]
    pub(super) private_dirs: Option<Spanned<Vec<PathBuf>>>,
    pub(super) startup: Option<Spanned<f64>>,
}

/// Only the `name` of a profile, for its span.
#[derive(Debug, Deserialize)]
pub(super) struct NameOnly {
    pub(super) name: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommandsFile {
    pub(super) ready: Option<Spanned<Vec<RawArg>>>,
    pub(super) failure: Option<Spanned<Vec<RawArg>>>,
    #[serde(rename = "in-progress")]
    pub(super) in_progress: Option<Spanned<Vec<RawArg>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReactionsFile {
    pub(super) retryable: Spanned<Vec<u16>>,
    pub(super) transport_errors: Reaction,
    pub(super) status_403: Forbidden,
    #[serde(default)]
    pub(super) refresh_goal_state_on_410: bool,
    pub(super) retry_interval_min: Option<Spanned<f64>>,
    pub(super) retry_interval_max: Option<Spanned<f64>>,
    pub(super) budget: Option<Spanned<f64>>,
    pub(super) request_timeout: Option<Spanned<f64>>,
    pub(super) max_rate: Option<Spanned<f64>>,
    pub(super) imds_retryable: Option<Spanned<Vec<u16>>>,
    pub(super) imds_status_403: Option<Forbidden>,
    pub(super) imds_retry_interval_min: Option<Spanned<f64>>,
    pub(super) imds_budget: Option<Spanned<f64>>,
    #[serde(default = "retry")]
    pub(super) imds_unusable_body: Reaction,
    pub(super) retry_interval_503: Option<Spanned<f64>>,
    pub(super) retry_interval_throttled: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) budget_scope: BudgetScope,
    pub(super) honours_retry_after: Option<Spanned<Vec<u16>>>,
    pub(super) never_gives_up_on: Option<Spanned<Vec<u16>>>,
    pub(super) gives_up: Option<Spanned<bool>>,
    pub(super) tries: Option<Spanned<u32>>,
    pub(super) sequence_tries: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitationFile {
    pub(super) property: Spanned<String>,
    pub(super) input: InputClass,
    #[serde(default)]
    pub(super) endpoint: Target,
    pub(super) checks: Spanned<String>,
    pub(super) verdict: DeviationVerdict,
    pub(super) reason: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeviationFile {
    pub(super) cases: Spanned<String>,
    pub(super) verdict: DeviationVerdict,
    pub(super) reason: Spanned<String>,
}
