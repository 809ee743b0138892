//! The whole report, end to end: vm id → encoded report → KVP → wireserver.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Url;
use thiserror::Error;

use crate::clock::{Clock, SystemClock};
use crate::failure::Failure;
use crate::format::HealthState;
use crate::format::encoded::{ReportContext, encode_error, encode_success};
use crate::http::Http;
use crate::imds::{InstanceMetadata, fetch_instance};
use crate::kvp::pool::{DEFAULT_LOCK_TIMEOUT, KvpPool, PoolError, boot_time};
use crate::kvp::record::{RecordError, validate_key};
use crate::kvp::{DEFAULT_POOL_PATH, PROVISIONING_REPORT_KEY};
use crate::retry::RetryPolicy;
use crate::vm_id::{Dmi, VmIdSource, ZERO_GUID};
use crate::wireserver::{AgentHeaders, Delivered, Protocol, Wireserver, WireserverError};
use crate::{AGENT, GUEST_AGENT_NAME, NAME};

/// The platform addresses. Nothing else ever defaults to them.
pub const DEFAULT_WIRESERVER: &str = "http://168.63.129.16";
pub const DEFAULT_IMDS: &str = "http://169.254.169.254";

/// What to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Provisioning succeeded.
    Ready,
    /// Provisioning failed for good.
    Failure(Failure),
    /// Provisioning is still running; `None` uses azure-init's default text.
    InProgress { description: Option<String> },
}

impl Report {
    pub fn name(&self) -> &'static str {
        match self {
            Report::Ready => "ready",
            Report::Failure(_) => "failure",
            Report::InProgress { .. } => "in-progress",
        }
    }
}

/// The vm id used in the report, where it came from, and IMDS's pps_type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub vm_id: String,
    pub source: VmIdSource,
    pub pps_type: Option<String>,
}

/// The bytes a report consists of, before any I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The encoded report for KVP (and, for failures, the description). In-progress reports
    /// have none.
    pub encoded: Option<String>,
    /// What goes to the wireserver.
    pub health: HealthState,
}

/// Builds the encoded report and health state: a pure function of its inputs.
pub fn prepare(report: &Report, identity: &Identity, timestamp: DateTime<Utc>) -> Prepared {
    let ctx = ReportContext {
        agent: AGENT,
        vm_id: &identity.vm_id,
        timestamp,
        pps_type: identity.pps_type.as_deref(),
        vm_id_source: (!identity.source.is_authoritative()).then(|| identity.source.as_str()),
    };
    match report {
        Report::Ready => Prepared {
            encoded: Some(encode_success(&ctx)),
            health: HealthState::Ready,
        },
        Report::Failure(failure) => {
            let encoded = encode_error(&ctx, failure);
            Prepared {
                health: HealthState::failed(&encoded),
                encoded: Some(encoded),
            }
        }
        Report::InProgress { description } => {
            let description = description
                .clone()
                .unwrap_or_else(|| HealthState::default_in_progress_description(&identity.vm_id));
            Prepared {
                encoded: None,
                health: HealthState::in_progress(&description),
            }
        }
    }
}

/// Where the encoded report is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvpTarget {
    pub path: PathBuf,
    pub key: String,
    /// Empty the pool first when it predates the current boot.
    pub truncate_stale: bool,
    /// How long each pool lock is waited for before the KVP record is given up.
    pub lock_timeout: Duration,
}

impl Default for KvpTarget {
    fn default() -> Self {
        KvpTarget {
            path: PathBuf::from(DEFAULT_POOL_PATH),
            key: PROVISIONING_REPORT_KEY.to_owned(),
            truncate_stale: false,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }
}

/// Everything a [`Reporter`] needs.
#[derive(Debug, Clone)]
pub struct ReporterConfig {
    pub wireserver: Url,
    pub protocol: Protocol,
    pub retry: RetryPolicy,
    /// `None` skips IMDS.
    pub imds: Option<Url>,
    pub imds_retry: RetryPolicy,
    /// Overrides the vm id from IMDS.
    pub vm_id: Option<String>,
    pub dmi: Dmi,
    /// `None` skips KVP.
    pub kvp: Option<KvpTarget>,
    /// Honour `http_proxy` and friends (off: the endpoints are link-local).
    pub use_env_proxy: bool,
}

impl Default for ReporterConfig {
    fn default() -> Self {
        ReporterConfig {
            wireserver: Url::parse(DEFAULT_WIRESERVER).expect("valid default"),
            protocol: Protocol::Json,
            retry: RetryPolicy::WIRESERVER,
            imds: Some(Url::parse(DEFAULT_IMDS).expect("valid default")),
            imds_retry: RetryPolicy::IMDS,
            vm_id: None,
            dmi: Dmi::default(),
            kvp: Some(KvpTarget::default()),
            use_env_proxy: false,
        }
    }
}

/// What happened to the KVP record.
#[derive(Debug)]
pub enum KvpOutcome {
    Written {
        path: PathBuf,
        index: usize,
    },
    /// KVP is off.
    Disabled,
    /// In-progress reports have no encoded report to write.
    NotApplicable,
    /// Opening or writing the pool failed; the wireserver report went ahead anyway.
    Failed(PoolError),
}

/// The result of one run.
#[derive(Debug)]
pub struct Outcome {
    pub identity: Identity,
    pub prepared: Prepared,
    pub kvp: KvpOutcome,
    pub delivery: Result<Delivered, WireserverError>,
}

impl Outcome {
    /// Whether the wireserver accepted the report.
    pub fn is_reported(&self) -> bool {
        self.delivery.is_ok()
    }
}

/// Failures that stop a report before anything is sent or written.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("KVP key: {0}")]
    KvpKey(#[from] RecordError),
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Sends provisioning reports.
pub struct Reporter {
    config: ReporterConfig,
    http: Http,
    clock: Arc<dyn Clock>,
}

impl Reporter {
    /// Checks the configuration and builds the HTTP client; nothing is sent yet.
    pub fn new(config: ReporterConfig) -> Result<Reporter, SetupError> {
        if let Some(kvp) = &config.kvp {
            validate_key(&kvp.key)?;
        }
        let http = Http::new(AGENT, config.use_env_proxy)?;
        Ok(Reporter {
            config,
            http,
            clock: Arc::new(SystemClock),
        })
    }

    /// Replaces the clock the encoded report is stamped with.
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Reporter {
        self.clock = Arc::new(clock);
        self
    }

    pub fn config(&self) -> &ReporterConfig {
        &self.config
    }

    /// Finds the vm id (given > IMDS > DMI > zero GUID) and IMDS's pps_type.
    pub async fn identify(&self) -> Identity {
        let metadata: Option<InstanceMetadata> = match &self.config.imds {
            None => None,
            Some(url) => match fetch_instance(&self.http, url, self.config.imds_retry).await {
                Ok(metadata) => Some(metadata),
                Err(error) => {
                    tracing::warn!("IMDS: {error}; continuing without it");
                    None
                }
            },
        };
        let pps_type = metadata.as_ref().and_then(|m| m.pps_type.clone());
        let (vm_id, source) = if let Some(vm_id) = &self.config.vm_id {
            (vm_id.clone(), VmIdSource::Given)
        } else if let Some(metadata) = metadata {
            (metadata.vm_id, VmIdSource::Imds)
        } else {
            match self.config.dmi.vm_id() {
                Ok(vm_id) => (vm_id, VmIdSource::Dmi),
                Err(error) => {
                    tracing::warn!("DMI: {error}; using the zero GUID as vm id");
                    (ZERO_GUID.to_owned(), VmIdSource::Zero)
                }
            }
        };
        tracing::info!(vm_id, source = source.as_str(), "vm id");
        Identity {
            vm_id,
            source,
            pps_type,
        }
    }

    /// Opens the KVP pool, finds the vm id, writes the encoded report to KVP, then reports to
    /// the wireserver, whatever happened to the pool.
    pub async fn report(&self, report: &Report) -> Result<Outcome, SetupError> {
        // Whatever sits at the pool path is the machine's state, not the user's input: a pool
        // that cannot be opened (read-only, permissions, a full disk, a symlink, a directory or
        // a FIFO left there) must not cost the VM its report: the KVP part fails, the report
        // goes out.
        let mut open_failed = None;
        let pool = match &self.config.kvp {
            Some(target) => match KvpPool::open(&target.path) {
                Ok(pool) => Some((pool.with_lock_timeout(target.lock_timeout), target)),
                Err(error) => {
                    tracing::error!("{error}; reporting to the wireserver anyway");
                    open_failed = Some(error);
                    None
                }
            },
            None => None,
        };
        if let Some((pool, target)) = &pool
            && target.truncate_stale
        {
            truncate_stale(pool);
        }
        let identity = self.identify().await;
        let prepared = prepare(report, &identity, self.clock.now());
        let kvp = match (&pool, &prepared.encoded) {
            (None, _) if open_failed.is_some() => {
                KvpOutcome::Failed(open_failed.take().expect("checked"))
            }
            (None, _) => KvpOutcome::Disabled,
            (Some(_), None) => KvpOutcome::NotApplicable,
            (Some((pool, target)), Some(encoded)) => match pool.upsert(&target.key, encoded) {
                Ok(upserted) => {
                    tracing::info!(
                        pool = %pool.path().display(),
                        key = target.key,
                        index = upserted.index,
                        "wrote the encoded report to KVP"
                    );
                    KvpOutcome::Written {
                        path: pool.path().to_owned(),
                        index: upserted.index,
                    }
                }
                Err(error) => {
                    tracing::error!("{error}; reporting to the wireserver anyway");
                    KvpOutcome::Failed(error)
                }
            },
        };
        let wireserver = Wireserver::new(
            &self.http,
            self.config.wireserver.clone(),
            AgentHeaders {
                guest_agent_name: GUEST_AGENT_NAME.to_owned(),
                agent_name: NAME.to_owned(),
            },
        );
        let delivery = wireserver
            .report(&prepared.health, self.config.protocol, self.config.retry)
            .await;
        Ok(Outcome {
            identity,
            prepared,
            kvp,
            delivery,
        })
    }

    /// [`Reporter::report`] on a private single-threaded runtime, for callers without one.
    /// Do not call it from inside an async runtime.
    pub fn report_blocking(&self, report: &Report) -> Result<Outcome, SetupError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(SetupError::Runtime)?
            .block_on(self.report(report))
    }
}

fn truncate_stale(pool: &KvpPool) {
    let boot = match boot_time() {
        Ok(boot) => boot,
        Err(error) => {
            tracing::warn!(
                "cannot tell when the system booted ({error}); not truncating the KVP pool"
            );
            return;
        }
    };
    match pool.truncate_if_stale(boot) {
        Ok(true) => {
            tracing::info!(pool = %pool.path().display(), "emptied a KVP pool left from an earlier boot")
        }
        Ok(false) => {}
        Err(error) => tracing::warn!("{error}; not truncating"),
    }
}
