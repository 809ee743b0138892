//! What went wrong, as an encoded error report carries it: a reason and ordered supporting data.
//!
//! [`ProvisioningError`] is the typed taxonomy (lower-case reasons, acronyms kept), built after
//! cloud-init's `cloudinit/sources/azure/errors.py` and azure-init's `libazureinit/src/error.rs`
//! (docs/protocol.md §6.3). [`Failure::custom`] is the free-form escape hatch used by the CLI's
//! `failure --reason TEXT --data KEY=VALUE`.

use std::fmt;

use thiserror::Error;

/// Keys the encoder writes itself; supporting data must not repeat them.
pub const RESERVED_KEYS: &[&str] = &[
    "result",
    "reason",
    "agent",
    "pps_type",
    "vm_id_source",
    "vm_id",
    "timestamp",
    "documentation_url",
];

/// Keys the Azure host can read are at most 254 bytes (docs/protocol.md §7.1); the same limit
/// bounds supporting-data keys so no key the reporter writes is longer than what the host sees.
pub const KEY_MAX_BYTES: usize = 254;

/// A reason plus supporting data, validated so the encoded report stays parseable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    reason: String,
    supporting_data: Vec<(String, String)>,
}

/// Why a reason or a supporting-data pair was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FailureError {
    #[error(
        "the reason is empty; expected a short lower-case text such as \"failed to provision user\""
    )]
    EmptyReason,
    #[error("the reason contains a NUL character, which KVP cannot store")]
    NulInReason,
    #[error(
        "supporting-data key {key:?} is not an identifier; expected a letter or `_` followed by letters, digits or `_`"
    )]
    BadKey { key: String },
    #[error("supporting-data key {key:?} is {len} bytes; keys are at most {KEY_MAX_BYTES} bytes")]
    KeyTooLong { key: String, len: usize },
    #[error("supporting-data key {key:?} is reserved: the report writes it itself")]
    ReservedKey { key: String },
    #[error("supporting-data key {key:?} is given twice")]
    DuplicateKey { key: String },
    #[error(
        "the value of supporting-data key {key:?} contains a NUL character, which KVP cannot store"
    )]
    NulInValue { key: String },
}

impl Failure {
    /// A failure with a free-form reason and supporting data (in the order given).
    pub fn custom<I, K, V>(
        reason: impl Into<String>,
        supporting_data: I,
    ) -> Result<Self, FailureError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let reason = reason.into();
        if reason.is_empty() {
            return Err(FailureError::EmptyReason);
        }
        if reason.contains('\0') {
            return Err(FailureError::NulInReason);
        }
        let mut data: Vec<(String, String)> = Vec::new();
        for (key, value) in supporting_data {
            let (key, value) = (key.into(), value.into());
            validate_key(&key)?;
            if data.iter().any(|(existing, _)| *existing == key) {
                return Err(FailureError::DuplicateKey { key });
            }
            if value.contains('\0') {
                return Err(FailureError::NulInValue { key });
            }
            data.push((key, value));
        }
        Ok(Failure {
            reason,
            supporting_data: data,
        })
    }

    pub fn reason(&self) -> &str {
        &self.reason
    }

    pub fn supporting_data(&self) -> &[(String, String)] {
        &self.supporting_data
    }

    /// Built from taxonomy variants, whose keys are known-good; values are made NUL-free.
    fn known(reason: String, data: Vec<(&'static str, String)>) -> Self {
        Failure {
            reason: reason.replace('\0', "\u{FFFD}"),
            supporting_data: data
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value.replace('\0', "\u{FFFD}")))
                .collect(),
        }
    }
}

/// Checks a supporting-data key: an identifier (so a parser can tell keys from quotes, §6.5),
/// within [`KEY_MAX_BYTES`], and not one the encoder writes itself.
pub fn validate_key(key: &str) -> Result<(), FailureError> {
    let mut chars = key.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(FailureError::BadKey {
            key: key.to_owned(),
        });
    }
    if key.len() > KEY_MAX_BYTES {
        return Err(FailureError::KeyTooLong {
            key: key.to_owned(),
            len: key.len(),
        });
    }
    if RESERVED_KEYS.contains(&key) {
        return Err(FailureError::ReservedKey {
            key: key.to_owned(),
        });
    }
    Ok(())
}

/// The typed taxonomy of provisioning failures.
///
/// Reasons are lower-case (acronyms such as DHCP, IMDS and VM kept), worded as cloud-init or
/// azure-init word them so that dashboards keyed on those strings keep working. Durations are
/// in seconds and written like Python's `repr(float)`.
#[derive(Debug, Clone, PartialEq)]
pub enum ProvisioningError {
    /// `failure to find DHCP interface` (cloud-init 23.2).
    DhcpInterfaceNotFound { duration: f64 },
    /// `failure to obtain DHCP lease` (cloud-init 23.2).
    DhcpLeaseFailed {
        driver: Option<String>,
        duration: f64,
        interface: Option<String>,
        mac_address: Option<String>,
    },
    /// `connection timeout querying IMDS`.
    ImdsConnectionTimeout {
        duration: f64,
        exception: String,
        url: String,
    },
    /// `connection error querying IMDS`.
    ImdsConnectionError {
        duration: f64,
        exception: String,
        url: String,
    },
    /// `read timeout querying IMDS`.
    ImdsReadTimeout {
        duration: f64,
        exception: String,
        url: String,
    },
    /// `http error <code> querying IMDS` (cloud-init 23.4+ wording).
    ImdsHttpError {
        http_code: u16,
        duration: f64,
        exception: String,
        url: String,
    },
    /// `unexpected error querying IMDS`.
    ImdsUnexpectedError {
        duration: f64,
        exception: String,
        url: String,
    },
    /// `invalid IMDS metadata for key=<key>` (cloud-init 23.4, `type` since 25.2).
    ImdsInvalidMetadata {
        key: String,
        value: String,
        value_type: String,
    },
    /// `error parsing IMDS metadata`.
    ImdsMetadataParse { exception: String },
    /// `failure to read customData while hasCustomData=true` (cloud-init 26.2). The pps_type
    /// comes from the report context, as for every error report.
    CustomDataUnreadable { provisioning_media: String },
    /// `error parsing ovf-env.xml: <message>`.
    OvfEnvParse { message: String },
    /// `error waiting for host shutdown`.
    HostShutdownWait,
    /// `failure to identify Azure VM ID` (cloud-init 25.2).
    VmIdUnidentified {
        exception: String,
        system_uuid: String,
    },
    /// `http status error` (azure-init).
    HttpStatus { endpoint: String, status: u16 },
    /// `subprocess failed` (azure-init).
    SubprocessFailed {
        command: String,
        exit_status: String,
    },
    /// `user not found` (azure-init).
    UserNotFound { user: String },
    /// `failed to provision user` (azure-init).
    UserProvisioning { error: String },
    /// `failed to provision hostname` (azure-init).
    HostnameProvisioning { error: String },
    /// `failed to provision password` (azure-init).
    PasswordProvisioning { error: String },
    /// `provisioning with non-empty password is unsupported` (azure-init).
    NonEmptyPasswordUnsupported,
    /// `unsupported password length=<n> max=<max>` (cloud-init after 26.2).
    UnsupportedPasswordLength { length: usize, max_length: usize },
    /// `failed to load sshd config` (azure-init).
    SshdConfigLoad { details: String },
    /// `failed to update sshd config` (azure-init).
    SshdConfigUpdate { error: String },
    /// `azure-proxy-agent not found` (cloud-init 24.3).
    ProxyAgentNotFound,
    /// `azure-proxy-agent status failure` (cloud-init 24.3).
    ProxyAgentStatus {
        exit_code: i32,
        stdout: String,
        stderr: String,
    },
    /// `operation timed out` (azure-init).
    Timeout { error: String },
    /// `unhandled error` (azure-init): anything the taxonomy has no better name for.
    Unhandled { error: String },
}

impl ProvisioningError {
    /// `unhandled error` with the error and its sources joined by `: `.
    pub fn unhandled(error: &(dyn std::error::Error + 'static)) -> Self {
        let mut text = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        ProvisioningError::Unhandled { error: text }
    }

    /// The `reason=` text.
    pub fn reason(&self) -> String {
        use ProvisioningError::*;
        match self {
            DhcpInterfaceNotFound { .. } => "failure to find DHCP interface".into(),
            DhcpLeaseFailed { .. } => "failure to obtain DHCP lease".into(),
            ImdsConnectionTimeout { .. } => "connection timeout querying IMDS".into(),
            ImdsConnectionError { .. } => "connection error querying IMDS".into(),
            ImdsReadTimeout { .. } => "read timeout querying IMDS".into(),
            ImdsHttpError { http_code, .. } => format!("http error {http_code} querying IMDS"),
            ImdsUnexpectedError { .. } => "unexpected error querying IMDS".into(),
            ImdsInvalidMetadata { key, .. } => format!("invalid IMDS metadata for key={key}"),
            ImdsMetadataParse { .. } => "error parsing IMDS metadata".into(),
            CustomDataUnreadable { .. } => {
                "failure to read customData while hasCustomData=true".into()
            }
            OvfEnvParse { message } => format!("error parsing ovf-env.xml: {message}"),
            HostShutdownWait => "error waiting for host shutdown".into(),
            VmIdUnidentified { .. } => "failure to identify Azure VM ID".into(),
            HttpStatus { .. } => "http status error".into(),
            SubprocessFailed { .. } => "subprocess failed".into(),
            UserNotFound { .. } => "user not found".into(),
            UserProvisioning { .. } => "failed to provision user".into(),
            HostnameProvisioning { .. } => "failed to provision hostname".into(),
            PasswordProvisioning { .. } => "failed to provision password".into(),
            NonEmptyPasswordUnsupported => {
                "provisioning with non-empty password is unsupported".into()
            }
            UnsupportedPasswordLength { length, max_length } => {
                format!("unsupported password length={length} max={max_length}")
            }
            SshdConfigLoad { .. } => "failed to load sshd config".into(),
            SshdConfigUpdate { .. } => "failed to update sshd config".into(),
            ProxyAgentNotFound => "azure-proxy-agent not found".into(),
            ProxyAgentStatus { .. } => "azure-proxy-agent status failure".into(),
            Timeout { .. } => "operation timed out".into(),
            Unhandled { .. } => "unhandled error".into(),
        }
    }

    /// The supporting data, in the order the reference agents write it.
    pub fn supporting_data(&self) -> Vec<(&'static str, String)> {
        use ProvisioningError::*;
        match self {
            DhcpInterfaceNotFound { duration } => vec![("duration", python_float(*duration))],
            DhcpLeaseFailed {
                driver,
                duration,
                interface,
                mac_address,
            } => vec![
                ("driver", python_option(driver)),
                ("duration", python_float(*duration)),
                ("interface", python_option(interface)),
                ("mac_address", python_option(mac_address)),
            ],
            ImdsConnectionTimeout {
                duration,
                exception,
                url,
            }
            | ImdsConnectionError {
                duration,
                exception,
                url,
            }
            | ImdsReadTimeout {
                duration,
                exception,
                url,
            }
            | ImdsUnexpectedError {
                duration,
                exception,
                url,
            } => imds_data(*duration, exception, url),
            ImdsHttpError {
                http_code,
                duration,
                exception,
                url,
            } => {
                let mut data = vec![("http_code", http_code.to_string())];
                data.extend(imds_data(*duration, exception, url));
                data
            }
            ImdsInvalidMetadata {
                key,
                value,
                value_type,
            } => vec![
                ("key", key.clone()),
                ("value", value.clone()),
                ("type", value_type.clone()),
            ],
            ImdsMetadataParse { exception } => vec![("exception", exception.clone())],
            other => other.guest_data(),
        }
    }

    /// [`Self::supporting_data`] of the failures on the guest itself (media, users, sshd,
    /// subprocesses, the proxy agent); the network's are `supporting_data`'s own arms.
    fn guest_data(&self) -> Vec<(&'static str, String)> {
        use ProvisioningError::*;
        match self {
            CustomDataUnreadable { provisioning_media } => {
                vec![("provisioning_media", provisioning_media.clone())]
            }
            OvfEnvParse { .. } | HostShutdownWait | NonEmptyPasswordUnsupported => vec![],
            ProxyAgentNotFound => vec![],
            VmIdUnidentified {
                exception,
                system_uuid,
            } => vec![
                ("exception", exception.clone()),
                ("system_uuid", system_uuid.clone()),
            ],
            HttpStatus { endpoint, status } => vec![
                ("endpoint", endpoint.clone()),
                ("status", status.to_string()),
            ],
            SubprocessFailed {
                command,
                exit_status,
            } => vec![
                ("command", command.clone()),
                ("exit_status", exit_status.clone()),
            ],
            UserNotFound { user } => vec![("user", user.clone())],
            UserProvisioning { error }
            | HostnameProvisioning { error }
            | PasswordProvisioning { error }
            | SshdConfigUpdate { error }
            | Timeout { error } => vec![("error", error.clone())],
            UnsupportedPasswordLength { length, max_length } => vec![
                ("length", length.to_string()),
                ("max_length", max_length.to_string()),
            ],
            SshdConfigLoad { details } => vec![("details", details.clone())],
            ProxyAgentStatus {
                exit_code,
                stdout,
                stderr,
            } => vec![
                ("exit_code", exit_code.to_string()),
                ("stdout", stdout.clone()),
                ("stderr", stderr.clone()),
            ],
            Unhandled { error } => vec![("error", error.clone())],
            // The network's failures are answered by `supporting_data` before it asks here.
            DhcpInterfaceNotFound { .. }
            | DhcpLeaseFailed { .. }
            | ImdsConnectionTimeout { .. }
            | ImdsConnectionError { .. }
            | ImdsReadTimeout { .. }
            | ImdsHttpError { .. }
            | ImdsUnexpectedError { .. }
            | ImdsInvalidMetadata { .. }
            | ImdsMetadataParse { .. } => vec![],
        }
    }
}

impl fmt::Display for ProvisioningError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason())
    }
}

impl From<&ProvisioningError> for Failure {
    fn from(error: &ProvisioningError) -> Self {
        Failure::known(error.reason(), error.supporting_data())
    }
}

impl From<ProvisioningError> for Failure {
    fn from(error: ProvisioningError) -> Self {
        Failure::from(&error)
    }
}

/// The supporting data IMDS failures share: how long it took, the exception, the URL.
fn imds_data(duration: f64, exception: &str, url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("duration", python_float(duration)),
        ("exception", exception.to_owned()),
        ("url", url.to_owned()),
    ]
}

/// `repr(float)`: the shortest text that reads back to the same value, always with a `.`.
fn python_float(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e16 {
        format!("{value:.1}")
    } else {
        value.to_string()
    }
}

/// `str(None)` for a missing optional value, as cloud-init writes it.
fn python_option(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "None".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_failure_keeps_order_and_rejects_bad_keys() {
        let failure = Failure::custom("boom", [("b", "1"), ("a", "2")]).unwrap();
        assert_eq!(
            failure.supporting_data(),
            &[("b".into(), "1".into()), ("a".into(), "2".into())]
        );
        assert_eq!(
            Failure::custom("boom", [("vm_id", "x")]),
            Err(FailureError::ReservedKey {
                key: "vm_id".into()
            })
        );
        assert_eq!(
            Failure::custom("boom", [("'x", "x")]),
            Err(FailureError::BadKey { key: "'x".into() })
        );
        assert_eq!(
            Failure::custom("boom", [("a", "1"), ("a", "2")]),
            Err(FailureError::DuplicateKey { key: "a".into() })
        );
        let long = "k".repeat(255);
        assert!(matches!(
            Failure::custom("boom", [(long.as_str(), "v")]),
            Err(FailureError::KeyTooLong { len: 255, .. })
        ));
        assert!(Failure::custom("boom", [("k".repeat(254), "v")]).is_ok());
        assert_eq!(
            Failure::custom("", Vec::<(String, String)>::new()),
            Err(FailureError::EmptyReason)
        );
    }

    #[test]
    fn floats_print_like_python() {
        assert_eq!(python_float(12.5), "12.5");
        assert_eq!(python_float(300.0), "300.0");
        assert_eq!(python_float(300.2051315307617), "300.2051315307617");
    }

    #[test]
    fn unhandled_joins_the_source_chain() {
        let io = std::io::Error::other("disk on fire");
        #[derive(Debug, Error)]
        #[error("saving state")]
        struct Outer(#[source] std::io::Error);
        let error = ProvisioningError::unhandled(&Outer(io));
        assert_eq!(
            error,
            ProvisioningError::Unhandled {
                error: "saving state: disk on fire".into()
            }
        );
    }
}
