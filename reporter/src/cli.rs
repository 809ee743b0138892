//! Command line, environment and config file → [`ReporterConfig`] + [`Report`].
//!
//! Precedence: command line, then environment (clap merges both), then `--config FILE`, then
//! the built-in defaults. Every value is checked here, before anything is opened or sent; an
//! error names the flag (or config key) and says what is expected.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::{FalseyValueParser, TypedValueParser};
use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand, ValueEnum};
use reporter::kvp::record::validate_key;
use reporter::report::{DEFAULT_IMDS, DEFAULT_WIRESERVER};
use reporter::vm_id::VmIdError;
use reporter::{Dmi, Failure, KvpTarget, Protocol, Report, ReporterConfig, RetryPolicy};
use reqwest::Url;
use serde::{Deserialize, Serialize};
use thiserror::Error;

const AFTER_HELP: &str = "\
Exit status: 0 the wireserver accepted the report; 1 it did not (the KVP record, when written, \
stays); 2 usage or bad input (nothing was written or sent); 3 the wireserver accepted the \
report but the KVP pool could not be opened, locked within --kvp-lock-timeout or written (the \
report is sent whatever happens to the pool).

Order of a run: check every input, open the KVP pool, ask IMDS for the vm id, write the encoded \
report to KVP, then report to the wireserver within --timeout.";

#[derive(Debug, Parser)]
#[command(
    name = "provision-report",
    version = env!("WIRECHECK_BUILD"),
    args_override_self = true,
    about = "Report Azure provisioning health (Ready / failure / in progress) to the wireserver, \
             with the encoded report written to Hyper-V KVP first",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub options: Options,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Provisioning succeeded: report Ready.
    Ready,
    /// Provisioning failed: report NotReady + ProvisioningFailed with an encoded error report.
    Failure {
        /// What went wrong, lower-case, e.g. "failed to provision user".
        #[arg(long, value_name = "TEXT", env = "PROVISION_REPORT_REASON", value_parser = Utf8)]
        reason: String,
        /// Supporting data, in order (repeatable). KEY is a letter or `_` followed by letters,
        /// digits or `_`, at most 254 bytes. The environment variable holds one pair.
        #[arg(long = "data", value_name = "KEY=VALUE", env = "PROVISION_REPORT_DATA", value_parser = Utf8)]
        data: Vec<String>,
    },
    /// Provisioning is still running: report NotReady + Provisioning.
    InProgress {
        /// Description [default: "Provisioning is still in progress for vm_id=<vm id>."]
        #[arg(long, value_name = "TEXT", env = "PROVISION_REPORT_DESCRIPTION", value_parser = Utf8)]
        description: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolArg {
    /// POST /provisioning/health
    Json,
    /// versions, goal state, POST /machine?comp=health
    Xml,
    /// JSON, then XML when the JSON endpoint answers 404 or 405
    Auto,
}

impl From<ProtocolArg> for Protocol {
    fn from(value: ProtocolArg) -> Self {
        match value {
            ProtocolArg::Json => Protocol::Json,
            ProtocolArg::Xml => Protocol::Xml,
            ProtocolArg::Auto => Protocol::Auto,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Debug, Args)]
pub struct Options {
    /// Wireserver base URL [default: http://168.63.129.16]
    #[arg(long, global = true, value_name = "URL", env = "PROVISION_REPORT_WIRESERVER", value_parser = Utf8)]
    pub wireserver: Option<String>,
    /// Report flow [default: json]
    #[arg(long, global = true, value_enum, env = "PROVISION_REPORT_PROTOCOL")]
    pub protocol: Option<ProtocolArg>,
    /// IMDS base URL [default: http://169.254.169.254]
    #[arg(long, global = true, value_name = "URL", env = "PROVISION_REPORT_IMDS", value_parser = Utf8)]
    pub imds: Option<String>,
    /// Do not ask IMDS (vm id from --vm-id, else DMI, else the zero GUID; no pps_type)
    #[arg(long, global = true, env = "PROVISION_REPORT_NO_IMDS", value_parser = FalseyValueParser::new())]
    pub no_imds: bool,
    /// VM id to report instead of IMDS's compute.vmId
    #[arg(long, global = true, value_name = "ID", env = "PROVISION_REPORT_VM_ID", value_parser = Utf8)]
    pub vm_id: Option<String>,
    /// Wall-clock budget for the whole wireserver report, in seconds [default: 1200]
    #[arg(long, global = true, value_name = "SECONDS", env = "PROVISION_REPORT_TIMEOUT", value_parser = PositiveSeconds)]
    pub timeout: Option<Duration>,
    /// Pause between attempts, in seconds [default: 1]
    #[arg(long, global = true, value_name = "SECONDS", env = "PROVISION_REPORT_RETRY_INTERVAL", value_parser = NonNegativeSeconds)]
    pub retry_interval: Option<Duration>,
    /// Longest single HTTP attempt, in seconds (cut to what is left of the budget) [default: 30]
    #[arg(long, global = true, value_name = "SECONDS", env = "PROVISION_REPORT_REQUEST_TIMEOUT", value_parser = PositiveSeconds)]
    pub request_timeout: Option<Duration>,
    /// Wall-clock budget for the IMDS query, in seconds [default: 90]
    #[arg(long, global = true, value_name = "SECONDS", env = "PROVISION_REPORT_IMDS_TIMEOUT", value_parser = PositiveSeconds)]
    pub imds_timeout: Option<Duration>,
    /// KVP guest pool file [default: /var/lib/hyperv/.kvp_pool_1]
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "PROVISION_REPORT_KVP_POOL"
    )]
    pub kvp_pool: Option<PathBuf>,
    /// KVP key of the record, at most 254 bytes [default: PROVISIONING_REPORT]
    #[arg(long, global = true, value_name = "KEY", env = "PROVISION_REPORT_KVP_KEY", value_parser = Utf8)]
    pub kvp_key: Option<String>,
    /// Do not write KVP
    #[arg(long, global = true, env = "PROVISION_REPORT_NO_KVP", value_parser = FalseyValueParser::new())]
    pub no_kvp: bool,
    /// Empty the KVP pool first when it was last written before the current boot
    #[arg(long, global = true, env = "PROVISION_REPORT_TRUNCATE_STALE", value_parser = FalseyValueParser::new())]
    pub truncate_stale: bool,
    /// Longest wait for each KVP pool lock, in seconds; then the KVP record is given up and the
    /// report still sent [default: 10]
    #[arg(long, global = true, value_name = "SECONDS", env = "PROVISION_REPORT_KVP_LOCK_TIMEOUT", value_parser = PositiveSeconds)]
    pub kvp_lock_timeout: Option<Duration>,
    /// Read DMI and EFI facts below this directory instead of / [default: /]
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "PROVISION_REPORT_SYSROOT"
    )]
    pub sysroot: Option<PathBuf>,
    /// Honour http_proxy/HTTPS_PROXY/NO_PROXY (off: the endpoints are link-local)
    #[arg(long, global = true, env = "PROVISION_REPORT_USE_ENV_PROXY", value_parser = FalseyValueParser::new())]
    pub use_env_proxy: bool,
    /// TOML file with any of the settings above (keys in snake_case, durations in seconds)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "PROVISION_REPORT_CONFIG"
    )]
    pub config: Option<PathBuf>,
    /// Log level on stderr; response headers are logged at debug [default: info]
    #[arg(long, global = true, value_enum, env = "PROVISION_REPORT_LOG_LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Print the effective configuration (defaults, --config file, environment and flags
    /// merged, every value checked) as a --config file, then exit without sending or writing
    /// anything
    #[arg(long, global = true)]
    pub print_config: bool,
}

/// The effective configuration, in the --config file's keys (`--print-config`): it can be
/// saved and given back as `--config FILE`.
#[derive(Debug, Serialize)]
pub struct Effective {
    wireserver: String,
    protocol: ProtocolArg,
    imds: String,
    no_imds: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    vm_id: Option<String>,
    timeout: f64,
    retry_interval: f64,
    request_timeout: f64,
    imds_timeout: f64,
    kvp_pool: PathBuf,
    kvp_key: String,
    no_kvp: bool,
    truncate_stale: bool,
    kvp_lock_timeout: f64,
    sysroot: PathBuf,
    use_env_proxy: bool,
    log_level: LogLevel,
}

impl Effective {
    /// `# report: ready` and the TOML.
    pub fn render(&self, report: &Report) -> String {
        let body = toml::to_string(self).expect("plain values serialize");
        format!(
            "# provision-report: the effective configuration (nothing was sent or written)\n# report: {}\n{body}",
            report.name()
        )
    }
}

/// The config file: the global options, under their snake_case names.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    wireserver: Option<String>,
    protocol: Option<ProtocolArg>,
    imds: Option<String>,
    no_imds: Option<bool>,
    vm_id: Option<String>,
    timeout: Option<f64>,
    retry_interval: Option<f64>,
    request_timeout: Option<f64>,
    imds_timeout: Option<f64>,
    kvp_pool: Option<PathBuf>,
    kvp_key: Option<String>,
    no_kvp: Option<bool>,
    truncate_stale: Option<bool>,
    kvp_lock_timeout: Option<f64>,
    sysroot: Option<PathBuf>,
    use_env_proxy: Option<bool>,
    log_level: Option<LogLevel>,
}

/// A bad input: the message names the flag or config key.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn usage(message: impl Into<String>) -> UsageError {
    UsageError(message.into())
}

/// Everything a run needs.
#[derive(Debug)]
pub struct Settings {
    pub config: ReporterConfig,
    pub report: Report,
    pub log_level: LogLevel,
    /// `--print-config`: print [`Settings::effective`] and exit.
    pub print_config: bool,
    pub effective: Effective,
}

impl Cli {
    /// Merges the config file and checks every value.
    pub fn settings(self) -> Result<Settings, UsageError> {
        let file = match &self.options.config {
            Some(path) => load_config(path)?,
            None => FileConfig::default(),
        };
        let sources = Sources {
            cli: &self.options,
            file: &file,
        };
        let endpoints = sources.endpoints()?;
        let timing = sources.timing()?;
        let kvp = sources.kvp(timing.kvp_lock_timeout)?;
        let o = &self.options;
        let sysroot = o
            .sysroot
            .as_ref()
            .or(file.sysroot.as_ref())
            .cloned()
            .unwrap_or_else(|| PathBuf::from("/"));
        let dmi = Dmi::new(sysroot.clone());
        let protocol = o.protocol.or(file.protocol).unwrap_or(ProtocolArg::Json);
        let use_env_proxy = o.use_env_proxy || file.use_env_proxy.unwrap_or(false);
        let log_level = o.log_level.or(file.log_level).unwrap_or(LogLevel::Info);
        let effective = Effective {
            wireserver: endpoints.wireserver.to_string(),
            protocol,
            imds: endpoints.imds.to_string(),
            no_imds: endpoints.no_imds,
            vm_id: endpoints.vm_id.clone(),
            timeout: timing.retry.budget.as_secs_f64(),
            retry_interval: timing.retry.interval.as_secs_f64(),
            request_timeout: timing.retry.request_timeout.as_secs_f64(),
            imds_timeout: timing.imds_retry.budget.as_secs_f64(),
            kvp_pool: kvp.pool,
            kvp_key: kvp.key,
            no_kvp: kvp.no_kvp,
            truncate_stale: kvp.truncate_stale,
            kvp_lock_timeout: timing.kvp_lock_timeout.as_secs_f64(),
            sysroot,
            use_env_proxy,
            log_level,
        };
        let report = self.command.into_report()?;
        Ok(Settings {
            config: ReporterConfig {
                wireserver: endpoints.wireserver,
                protocol: protocol.into(),
                retry: timing.retry,
                imds: (!endpoints.no_imds).then_some(endpoints.imds),
                imds_retry: timing.imds_retry,
                vm_id: endpoints.vm_id,
                dmi,
                kvp: kvp.target,
                use_env_proxy,
            },
            report,
            log_level,
            print_config: self.options.print_config,
            effective,
        })
    }
}

impl Command {
    /// The report the subcommand asks for, its reason and data checked.
    fn into_report(self) -> Result<Report, UsageError> {
        match self {
            Command::Ready => Ok(Report::Ready),
            Command::Failure { reason, data } => {
                let pairs = data
                    .iter()
                    .map(|pair| {
                        pair.split_once('=').ok_or_else(|| {
                            usage(format!(
                                "--data {pair:?}: expected KEY=VALUE (no `=` found)"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if reason.trim().is_empty() {
                    return Err(usage(
                        "--reason: the reason is empty; expected a short lower-case text such as \"failed to provision user\"",
                    ));
                }
                let failure = Failure::custom(reason, pairs).map_err(|why| {
                    let flag = match why {
                        reporter::FailureError::EmptyReason
                        | reporter::FailureError::NulInReason => "--reason",
                        _ => "--data",
                    };
                    usage(format!("{flag}: {why}"))
                })?;
                Ok(Report::Failure(failure))
            }
            Command::InProgress { description } => Ok(Report::InProgress { description }),
        }
    }
}

/// Where the settings come from: the command line (the environment merged in by clap) over
/// the --config file, over the built-in defaults.
struct Sources<'a> {
    cli: &'a Options,
    file: &'a FileConfig,
}

/// Where the reports go, and the VM id they carry.
struct Endpoints {
    wireserver: Url,
    /// Also with --no-imds: the effective configuration shows it.
    imds: Url,
    no_imds: bool,
    vm_id: Option<String>,
}

/// How long the wireserver report, the IMDS query and each KVP pool lock may take.
struct Timing {
    retry: RetryPolicy,
    imds_retry: RetryPolicy,
    kvp_lock_timeout: Duration,
}

/// The KVP record: `target` is `None` with --no-kvp; the rest is for the effective
/// configuration.
struct KvpSettings {
    target: Option<KvpTarget>,
    pool: PathBuf,
    key: String,
    no_kvp: bool,
    truncate_stale: bool,
}

impl Sources<'_> {
    /// Names where a bad value came from: its flag, or its key in the --config file.
    fn origin(&self, flag: &str, key: &str, from_cli: bool) -> String {
        match (&self.cli.config, from_cli) {
            (Some(path), false) => format!("`{key}` in --config {}", path.display()),
            _ => flag.to_owned(),
        }
    }

    /// A duration: the flag's (checked as it was parsed), else the config file's, else
    /// `default`.
    fn seconds(
        &self,
        cli: Option<Duration>,
        file: Option<f64>,
        default: Duration,
        allow_zero: bool,
        key: &str,
    ) -> Result<Duration, UsageError> {
        if let Some(d) = cli {
            return Ok(d);
        }
        match file {
            None => Ok(default),
            Some(value) => parse_seconds_value(value, allow_zero)
                .map_err(|why| usage(format!("{}: {why}", self.origin("", key, false)))),
        }
    }

    fn endpoints(&self) -> Result<Endpoints, UsageError> {
        let (o, file) = (self.cli, self.file);
        let wireserver = {
            let from_cli = o.wireserver.is_some();
            let text = o
                .wireserver
                .as_deref()
                .or(file.wireserver.as_deref())
                .unwrap_or(DEFAULT_WIRESERVER);
            parse_base_url(text).map_err(|why| {
                usage(format!(
                    "{}: {why}",
                    self.origin("--wireserver", "wireserver", from_cli)
                ))
            })?
        };
        let no_imds = o.no_imds || file.no_imds.unwrap_or(false);
        let imds = {
            let from_cli = o.imds.is_some();
            let text = o
                .imds
                .as_deref()
                .or(file.imds.as_deref())
                .unwrap_or(DEFAULT_IMDS);
            parse_base_url(text).map_err(|why| {
                usage(format!(
                    "{}: {why}",
                    self.origin("--imds", "imds", from_cli)
                ))
            })?
        };
        let vm_id = {
            let from_cli = o.vm_id.is_some();
            match o.vm_id.as_deref().or(file.vm_id.as_deref()) {
                Some(id) => Some(check_vm_id(id).map_err(|why| {
                    usage(format!(
                        "{}: {why}",
                        self.origin("--vm-id", "vm_id", from_cli)
                    ))
                })?),
                None => None,
            }
        };
        Ok(Endpoints {
            wireserver,
            imds,
            no_imds,
            vm_id,
        })
    }

    fn timing(&self) -> Result<Timing, UsageError> {
        let (o, file) = (self.cli, self.file);
        let retry = RetryPolicy {
            budget: self.seconds(
                o.timeout,
                file.timeout,
                RetryPolicy::WIRESERVER.budget,
                false,
                "timeout",
            )?,
            interval: self.seconds(
                o.retry_interval,
                file.retry_interval,
                RetryPolicy::WIRESERVER.interval,
                true,
                "retry_interval",
            )?,
            request_timeout: self.seconds(
                o.request_timeout,
                file.request_timeout,
                RetryPolicy::WIRESERVER.request_timeout,
                false,
                "request_timeout",
            )?,
        };
        let imds_retry = RetryPolicy {
            budget: self.seconds(
                o.imds_timeout,
                file.imds_timeout,
                RetryPolicy::IMDS.budget,
                false,
                "imds_timeout",
            )?,
            interval: retry.interval,
            request_timeout: retry.request_timeout,
        };
        let kvp_lock_timeout = self.seconds(
            o.kvp_lock_timeout,
            file.kvp_lock_timeout,
            KvpTarget::default().lock_timeout,
            false,
            "kvp_lock_timeout",
        )?;
        Ok(Timing {
            retry,
            imds_retry,
            kvp_lock_timeout,
        })
    }

    fn kvp(&self, lock_timeout: Duration) -> Result<KvpSettings, UsageError> {
        let (o, file) = (self.cli, self.file);
        let no_kvp = o.no_kvp || file.no_kvp.unwrap_or(false);
        let defaults = KvpTarget::default();
        let key_from_cli = o.kvp_key.is_some();
        let key = o
            .kvp_key
            .as_ref()
            .or(file.kvp_key.as_ref())
            .cloned()
            .unwrap_or(defaults.key);
        let pool = o
            .kvp_pool
            .as_ref()
            .or(file.kvp_pool.as_ref())
            .cloned()
            .unwrap_or(defaults.path);
        let truncate_stale = o.truncate_stale || file.truncate_stale.unwrap_or(false);
        let target = if no_kvp {
            None
        } else {
            validate_key(&key).map_err(|why| {
                usage(format!(
                    "{}: {why}",
                    self.origin("--kvp-key", "kvp_key", key_from_cli)
                ))
            })?;
            Some(KvpTarget {
                path: pool.clone(),
                key: key.clone(),
                truncate_stale,
                lock_timeout,
            })
        };
        Ok(KvpSettings {
            target,
            pool,
            key,
            no_kvp,
            truncate_stale,
        })
    }
}

fn load_config(path: &Path) -> Result<FileConfig, UsageError> {
    let text = std::fs::read(path)
        .map_err(|e| usage(format!("--config {}: cannot read: {e}", path.display())))?;
    let text = String::from_utf8(text).map_err(|e| {
        usage(format!(
            "--config {}: not UTF-8 (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    toml::from_str(&text).map_err(|e| {
        usage(format!(
            "--config {}: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    })
}

/// `http(s)://host[:port][/prefix]`; a bare `host[:port]` (cloud-init's endpoint form) gets
/// `http://`.
fn parse_base_url(text: &str) -> Result<Url, String> {
    let text = text.trim();
    let with_scheme = if text.contains("://") {
        text.to_owned()
    } else {
        format!("http://{text}")
    };
    let url = Url::parse(&with_scheme)
        .map_err(|e| format!("{text:?} is not a URL ({e}); expected e.g. http://127.0.0.1:8080"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{text:?}: expected an http:// or https:// URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{text:?}: the URL has no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{text:?}: expected a base URL without query or fragment; the reporter appends the paths"
        ));
    }
    Ok(url)
}

fn check_vm_id(id: &str) -> Result<String, String> {
    match reporter::vm_id::check_vm_id(id) {
        Ok(()) => Ok(id.to_owned()),
        Err(VmIdError::WhitespaceOrControl) => Err(format!(
            "{id:?} contains whitespace or a control character; expected an id such as 11111111-2222-3333-4444-555555555555"
        )),
        Err(error) => Err(error.to_string()),
    }
}

fn parse_seconds_value(value: f64, allow_zero: bool) -> Result<Duration, String> {
    if !value.is_finite() || value < 0.0 || (!allow_zero && value == 0.0) {
        let expected = if allow_zero {
            "0 or more"
        } else {
            "more than 0"
        };
        return Err(format!(
            "{value} is not a duration; expected seconds, {expected}, e.g. 2.5"
        ));
    }
    Duration::try_from_secs_f64(value).map_err(|e| format!("{value}: {e}"))
}

fn parse_seconds_text(text: &str, allow_zero: bool) -> Result<Duration, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected seconds, e.g. 2.5 (got {text:?})"))?;
    parse_seconds_value(value, allow_zero)
}

/// A value that must be UTF-8; the error names the argument.
#[derive(Debug, Clone, Copy)]
struct Utf8;

impl TypedValueParser for Utf8 {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        value.to_str().map(str::to_owned).ok_or_else(|| {
            arg_error(
                cmd,
                arg,
                ErrorKind::InvalidUtf8,
                &format!("{value:?} is not valid UTF-8"),
            )
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct PositiveSeconds;
#[derive(Debug, Clone, Copy)]
struct NonNegativeSeconds;

fn seconds_arg(
    cmd: &clap::Command,
    arg: Option<&clap::Arg>,
    value: &OsStr,
    allow_zero: bool,
) -> Result<Duration, clap::Error> {
    let text = Utf8.parse_ref(cmd, arg, value)?;
    parse_seconds_text(&text, allow_zero)
        .map_err(|why| arg_error(cmd, arg, ErrorKind::InvalidValue, &why))
}

impl TypedValueParser for PositiveSeconds {
    type Value = Duration;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Duration, clap::Error> {
        seconds_arg(cmd, arg, value, false)
    }
}

impl TypedValueParser for NonNegativeSeconds {
    type Value = Duration;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Duration, clap::Error> {
        seconds_arg(cmd, arg, value, true)
    }
}

fn arg_error(
    cmd: &clap::Command,
    arg: Option<&clap::Arg>,
    kind: ErrorKind,
    why: &str,
) -> clap::Error {
    let name = arg.map_or_else(|| "argument".to_owned(), |a| a.to_string());
    let mut cmd = cmd.clone();
    cmd.error(kind, format!("{name}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(
            parse_base_url("127.0.0.1:8080").unwrap().as_str(),
            "http://127.0.0.1:8080/"
        );
        assert!(parse_base_url("ftp://x").is_err());
        assert!(parse_base_url("http://x/?comp=health").is_err());
        assert!(parse_base_url("http://").is_err());
    }

    #[test]
    fn seconds_accept_fractions() {
        assert_eq!(
            parse_seconds_text("2.5", false).unwrap(),
            Duration::from_millis(2500)
        );
        assert!(parse_seconds_text("0", false).is_err());
        assert_eq!(parse_seconds_text("0", true).unwrap(), Duration::ZERO);
        assert!(parse_seconds_text("-1", true).is_err());
        assert!(parse_seconds_text("inf", true).is_err());
        assert!(parse_seconds_text("1e300", true).is_err());
        assert!(parse_seconds_text("soon", true).is_err());
    }
}
