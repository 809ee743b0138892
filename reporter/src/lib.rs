//! `reporter`: the provisioning health reporter for Azure Linux guests.
//!
//! It tells the wireserver that provisioning succeeded (Ready), failed (NotReady +
//! ProvisioningFailed, with an encoded error report as description) or is still running
//! (NotReady + Provisioning), over the JSON endpoint or the legacy XML flow, and writes the
//! encoded report to the Hyper-V KVP guest pool first, so the host sees it even when the
//! wireserver does not answer.
//!
//! ```no_run
//! use reporter::{Failure, ProvisioningError, Report, Reporter, ReporterConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let reporter = Reporter::new(ReporterConfig::default())?;
//! let failure = Failure::from(ProvisioningError::UserProvisioning {
//!     error: "useradd exited with 9".into(),
//! });
//! let outcome = reporter.report_blocking(&Report::Failure(failure))?;
//! if let Err(error) = &outcome.delivery {
//!     eprintln!("the wireserver did not take the report: {error}");
//! }
//! # Ok(()) }
//! ```
//!
//! Inside an async runtime, `reporter.report(&report).await` does the same.
//!
//! Layout: [`format`] and [`kvp::record`] are pure (inputs, injected clock and vm id in,
//! bytes out); [`http`], [`wireserver`], [`imds`] and [`kvp::pool`] do the I/O; [`retry`] is
//! the one retry engine; [`report`] ties them together; [`bounded_log`] is how much of the
//! servers' text reaches the log.

pub mod bounded_log;
pub mod clock;
pub mod failure;
pub mod format;
pub mod http;
pub mod imds;
pub mod kvp;
pub mod report;
pub mod retry;
pub mod vm_id;
pub mod wireserver;

pub use clock::{Clock, FixedClock, SystemClock};
pub use failure::{Failure, FailureError, ProvisioningError};
pub use report::{
    Identity, KvpOutcome, KvpTarget, Outcome, Prepared, Report, Reporter, ReporterConfig,
    SetupError, prepare,
};
pub use retry::RetryPolicy;
pub use vm_id::{Dmi, VmIdSource};
pub use wireserver::{Delivered, Flow, Protocol, WireserverError};

/// The program name, sent as `x-ms-agent-name` in the XML flow.
pub const NAME: &str = "provision-report";
/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// `agent=` in encoded reports and the `User-Agent` header: `provision-report/<version>`.
pub const AGENT: &str = concat!("provision-report/", env!("CARGO_PKG_VERSION"));
/// `x-ms-guest-agent-name` on the JSON endpoint, azure-init style: `provision-report v<version>`.
pub const GUEST_AGENT_NAME: &str = concat!("provision-report v", env!("CARGO_PKG_VERSION"));
