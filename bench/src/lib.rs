//! wirecheck benchmarks (`bench/run.sh`). Every figure is measured side by side with a reference
//! in the same run and reported as a ratio in `bench/RESULTS.md`.
//!
//! Code map: [`sections`] (one module per figure: IMDS throughput, start-up and memory, the
//! reporter's own benchmark, the conformance suite, `kvp dump`), [`servers`] (spawning the
//! servers under test and waiting for their ready line), [`http`] (a raw keep-alive HTTP/1.1
//! client for probes and request floods), [`wrk`], [`procfs`] (VmRSS / VmHWM), [`machine`] (other work on the machine), [`stats`],
//! [`commands`] (the log of exact commands printed in RESULTS.md), [`results`] (the markdown).

pub mod commands;
pub mod http;
pub mod machine;
pub mod procfs;
pub mod results;
pub mod sections;
pub mod servers;
pub mod stats;
pub mod wrk;
