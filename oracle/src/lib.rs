//! The independent parsers (the oracle): encoded reports, health XML/JSON, KVP pool files.
//!
//! Pure functions pinned to PROTOCOL.md (§4–§7) and the captured vectors, never to the
//! `reporter` crate: a bug in an encoder must not hide because the judge shares its code.
//! Nothing here does I/O; every output type is serde Serialize + Deserialize so the journal and
//! the conformance results can carry it. The input is the agent's: work is linear in it and
//! findings that repeat are bounded ([`bounds`]).

#![warn(missing_docs)]

pub mod bounds;
pub mod encoded;
pub mod finding;
pub mod health;
pub mod id;
pub mod kvp;

pub use encoded::{Dialect, EncodedError, EncodedReport, Mode};
pub use finding::{Finding, Severity};
pub use health::{
    HealthReport, HealthState, ReportKind, ServedIds, SubStatus, UnknownState, UnknownSubStatus,
};
pub use kvp::{HostRecord, KvpError, PoolView, SplitEvent};
