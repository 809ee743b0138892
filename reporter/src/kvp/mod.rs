//! Hyper-V KVP: the record format ([`record`], pure) and the guest pool file ([`pool`], I/O).

pub mod pool;
pub mod record;

/// The guest → host pool cloud-init and azure-init write (docs/protocol.md §7.1).
pub const DEFAULT_POOL_PATH: &str = "/var/lib/hyperv/.kvp_pool_1";

/// The key the host reads the provisioning report from.
pub const PROVISIONING_REPORT_KEY: &str = "PROVISIONING_REPORT";
