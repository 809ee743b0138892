//! A faithful fake of the Azure wireserver (`168.63.129.16`) and Instance Metadata Service
//! (`169.254.169.254`) for testing provisioning agents, with scripted faults and a journal.
//!
//! # In a Rust test
//!
//! Start a fake on ephemeral loopback ports, point the code under test at its URLs, then read
//! the journal or let expectations be verified when the handle drops:
//!
//! ```
//! use fake_wireserver::{Expectation, Fake, FakeConfig, Scenario};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The first health report is throttled with the platform's 403, later ones succeed.
//! let scenario = Scenario::from_toml_str(
//!     r#"
//!     [goalstate]
//!     incarnation = "7"
//!
//!     [[endpoint]]
//!     id = "wireserver.health.*"
//!     [[endpoint.step]]
//!     kind = "respond"
//!     preset = "throttled"
//!     "#,
//!     "example.toml",
//! )?;
//! let fake = Fake::start(FakeConfig::default().scenario(scenario)).await?;
//! fake.expect(Expectation::health_reports(1).state("Ready"));
//!
//! // Any HTTP client works; this one is a raw socket.
//! let body = r#"{"state":"Ready"}"#;
//! let mut conn = tokio::net::TcpStream::connect(fake.wireserver_addr().unwrap()).await?;
//! conn.write_all(format!(
//!     "POST /provisioning/health HTTP/1.1\r\nHost: 168.63.129.16\r\n\
//!      Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
//!     body.len()
//! ).as_bytes()).await?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 403 Forbidden"));
//! assert!(answer.contains("<Code>RequestRateLimitExceeded</Code>"));
//!
//! let journal = fake.journal();
//! assert_eq!(journal[0].endpoint, "wireserver.health.json");
//! assert_eq!(journal[0].answer.kind, "respond");
//! assert_eq!(journal[0].report.as_ref().unwrap().kind, fake_wireserver::oracle::ReportKind::Json);
//! assert_eq!(fake.served_ids().incarnation, "7");
//! # Ok(())
//! # }
//! // Dropping `fake` verifies the expectation: exactly one health report with state Ready.
//! ```
//!
//! # What it serves
//!
//! * Wireserver: `/?comp=versions`, the goal state (`/machine/?comp=goalstate` and
//!   `/machine?comp=goalstate`), XML health (`comp=health`, 200), JSON health
//!   (`/provisioning/health`, 201), telemetry (`comp=telemetrydata`), the shared config and
//!   certificates named in the goal state (URLs on the Host the agent used). `/`, `/machine`,
//!   `/machine/` are treated alike and dispatched on `comp`; anything else is a 404 plus a finding.
//! * IMDS: `/metadata/instance` (and `extended=true`), leaf paths (walk the JSON document; a leaf
//!   needs `format=text`), `/metadata/versions`, `/metadata/reprovisiondata` (404 until a
//!   `reprovision-available` trigger). Without `Metadata: true`, without a supported
//!   `api-version`, with duplicate query parameters or `X-Forwarded-For`: 400 with the platform's
//!   JSON error body.
//!
//! The defaults are data files in `defaults/` (goal state, versions, shared config,
//! certificates, instance document, ovf-env); a scenario overrides the ids (`[goalstate]`,
//! `[imds]`) and scripts faults per endpoint ([`scenario`] documents the format).
//!
//! # Attaching agents
//!
//! * Loopback listeners: [`Fake::wireserver_url`] and [`Fake::imds_url`].
//! * Proxy mode ([`FakeConfig::with_proxy`]): one listener for absolute-form targets
//!   (`GET http://168.63.129.16/machine/?comp=goalstate`) or origin-form with a `Host`,
//!   routed by host to the wireserver or IMDS; any other host gets 502 plus a finding. Set
//!   `http_proxy=http://{proxy_addr}` for the agent.
//! * Pre-bound listeners ([`serve_on`], [`Listeners`]): e.g. the real addresses inside a network
//!   namespace.
//!
//! # The journal
//!
//! One [`journal::Entry`] per request: what arrived (headers in order and case, body), the
//! endpoint id, what the fake answered (`answer.kind`/`status`/`step`), request-level
//! [findings](oracle::Finding), and for health POSTs the oracle's parse of the report
//! ([`oracle::HealthReport`]) including mismatches against the goal state that was served.
//!
//! # Transport
//!
//! The fake reads and writes HTTP/1.1 on the raw socket itself, so scripted faults are real:
//! `hang` never answers, `reset` sends a TCP RST, `close` closes without a byte, `malformed`
//! writes raw bytes, `partial` stops inside the declared body, `slow` dribbles the body. The
//! default documents come from two axum routers ([`wireserver::router`], [`imds::router`]).

#![warn(missing_docs)]

mod admin;
pub mod config;
mod conns;
pub mod documents;
pub mod endpoint;
mod engine;
pub mod expect;
mod fake;
pub mod fdlimit;
pub mod files;
pub mod hostplugin;
mod http1;
pub mod imds;
mod inspect;
pub mod journal;
/// The independent parsers (crate `wirecheck-oracle`), re-exported for the journal's users.
pub use wirecheck_oracle as oracle;
pub mod sandbox;
pub mod scenario;
mod server;
pub mod text;
pub mod wireserver;

pub use documents::Addresses;
pub use endpoint::{EndpointId, IntoEndpointPattern, UnknownEndpoint};
pub use expect::{Expectation, Times};
pub use fake::{
    DEFAULT_HEAD_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT, Fake,
    FakeConfig, FakeError, Listeners, serve_on,
};
pub use files::FileAccess;
pub use journal::{Answer, Entry, JournalStats, StepRef};
pub use oracle::{Finding, HealthReport, ServedIds, Severity};
pub use scenario::{
    Action, Body, EndPolicy, EndpointPlan, Preset, RateLimit, Reply, Scenario, ScenarioError, Step,
    Trigger, TriggerAction,
};
