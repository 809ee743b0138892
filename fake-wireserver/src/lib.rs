//! Fake wireserver + IMDS for testing Azure provisioning agents.

pub mod oracle;
