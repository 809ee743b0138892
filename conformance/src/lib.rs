//! wirecheck: runs provisioning agents against scenarios on the fake wireserver and judges what they did.

pub mod results;
pub mod tools;
