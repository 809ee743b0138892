//! Regression snapshots of what an agent emits (`wirecheck run --snapshots DIR`): a normalized
//! transcript per (agent, scenario) compared with an accepted one, reviewed the way
//! `cargo insta` reviews code snapshots (`wirecheck snapshots ...`).
//!
//! [`transcript`] is the normalizer, public so an agent's own tests can snapshot with it;
//! [`raw`] the exact-bytes views (a journal entry, the exchange, cloud-init's KVP events) the
//! project's end-to-end snapshots use; [`store`] the files; [`redact`] what differs from run to run.

pub mod raw;
pub mod redact;
pub mod store;
pub mod transcript;

pub use redact::{Redaction, Redactor};
pub use store::{Outcome, Snapshot};
pub use transcript::{SnapshotOptions, transcript};

/// The check id of a snapshot comparison: its case is `<scenario id>.snapshot.transcript`.
pub const CHECK_ID: &str = crate::catalog::SNAPSHOT_CHECK;
