//! A faithful fake of the Azure wireserver (`168.63.129.16`) and Instance Metadata Service
//! (`169.254.169.254`) for testing provisioning agents, with scripted faults and a journal.
//!
//! # The guide
//!
//! Every section below is a test (`cargo test -p fake-wireserver --doc`). A test that uses the
//! library builds none of the binary's dependencies (the binary is the `fake-wireserver-cli`
//! crate's):
//!
//! ```toml
//! [dev-dependencies]
//! fake-wireserver = { path = "../wirecheck/fake-wireserver" }
//! ```
//!
//! ## Start a fake
//!
//! [`Fake::start`] binds ephemeral loopback ports (wireserver and IMDS by default; the
//! HostGAPlugin, proxy mode and the admin API on request, see [`FakeConfig`]). Point the code
//! under test at [`Fake::wireserver_url`] and [`Fake::imds_url`]; the fake stops when the
//! handle drops.
//!
//! ```
//! use fake_wireserver::{Fake, FakeConfig};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let fake = Fake::start(FakeConfig::default()).await?;
//! assert!(fake.wireserver_url().starts_with("http://127.0.0.1:"));
//!
//! // Any HTTP client works; this one is a raw socket.
//! let mut conn = tokio::net::TcpStream::connect(fake.imds_addr().unwrap()).await?;
//! conn.write_all(
//!     b"GET /metadata/instance?api-version=2021-08-01 HTTP/1.1\r\nHost: 169.254.169.254\r\n\
//!       Metadata: true\r\nConnection: close\r\n\r\n",
//! )
//! .await?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"));
//! assert!(answer.contains("\"vmId\""));
//! # Ok(())
//! # }
//! ```
//!
//! A plain `#[test]` without a runtime uses [`Fake::start_blocking`]: the fake brings its own.
//!
//! ```
//! use std::io::{Read, Write};
//! use fake_wireserver::{Fake, FakeConfig};
//!
//! let fake = Fake::start_blocking(FakeConfig::default())?;
//! let mut conn = std::net::TcpStream::connect(fake.wireserver_addr().unwrap())?;
//! conn.write_all(b"GET /?comp=versions HTTP/1.1\r\nHost: 168.63.129.16\r\nConnection: close\r\n\r\n")?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"));
//! assert!(answer.contains("<Preferred>"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## A scenario from TOML
//!
//! A scenario says what the fake does instead of (or before) its default answers, per
//! endpoint: the same file format `wirecheck` and the binary read ([`scenario`] documents it).
//! A mistake is an error naming the line and the field.
//!
//! ```
//! use fake_wireserver::{Action, Scenario};
//!
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
//!     times = 2
//!     "#,
//!     "example.toml",
//! )?;
//! assert_eq!(scenario.endpoints[0].steps[0].times, 2);
//!
//! let typo = Scenario::from_toml_str(
//!     "[[endpoint]]\nid = \"wireserver.helth.*\"\n[[endpoint.step]]\nkind = \"hang\"\n",
//!     "typo.toml",
//! )
//! .unwrap_err();
//! assert!(typo.to_string().starts_with("typo.toml:2:6: endpoint[1].id: \"wireserver.helth.*\" matches no endpoint id; expected one of wireserver.versions,"));
//! # Ok::<(), fake_wireserver::ScenarioError>(())
//! ```
//!
//! ## A scenario from the builder
//!
//! The same scenario in code: [`Scenario::endpoint`] takes an [`EndpointId`] (or a string id
//! or glob, checked: a typo panics at the calling line, listing the valid ids), and [`Step`]
//! has a constructor per step kind and preset. The builder holds a scenario to the file's
//! rules: an argument a file could not hold (`times(0)`, `probability(7.0)`,
//! `rate_limit(0, -1.0, ..)`, no steps, status 42, ...) panics at the calling line with the
//! file's wording. A scenario written into the public fields directly is checked by
//! [`Scenario::validate`] when the fake starts ([`FakeError::Scenario`]) or loads it
//! ([`Fake::load_scenario`] returns the error and keeps the scenario in effect).
//!
//! ```
//! use fake_wireserver::{EndPolicy, EndpointId, EndpointPlan, Scenario, Step};
//!
//! let built = Scenario::new()
//!     .incarnation("7")
//!     .endpoint("wireserver.health.*", EndPolicy::Default, vec![Step::throttled().times(2)]);
//! # let toml = Scenario::from_toml_str("[goalstate]\nincarnation = \"7\"\n[[endpoint]]\nid = \"wireserver.health.*\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"throttled\"\ntimes = 2\n", "x.toml").unwrap();
//! # assert_eq!(built.endpoints, toml.endpoints);
//! # assert_eq!(built.goalstate, toml.goalstate);
//!
//! // A typed id cannot be misspelt; a string one is checked.
//! let plan = Scenario::new().try_endpoint("imds.instanse", EndPolicy::Default, vec![Step::hang()]);
//! assert!(plan.unwrap_err().to_string().contains("expected one of"));
//! let _ = Scenario::new().endpoint(EndpointId::ImdsInstance, EndPolicy::Cycle, vec![Step::hang()]);
//!
//! // Fields set by hand are checked before a fake serves them.
//! let mut by_hand = Scenario::new();
//! by_hand.endpoints.push(EndpointPlan { id: "wireserver.goalstat".into(), end: EndPolicy::Default, steps: vec![Step::hang()] });
//! let err = by_hand.validate().unwrap_err();
//! assert!(err.to_string().starts_with("<code>:0:0: endpoint[1].id: \"wireserver.goalstat\" matches no endpoint id"));
//! ```
//!
//! ## Faults
//!
//! Faults are acted out on the socket, a [`Step`] constructor per kind of [`Action`] (e.g.
//! [`Step::hang`] reads the request and never answers, [`Step::reset`] sends a TCP RST);
//! [`Step::respond`] and the presets ([`Step::throttled`], [`Step::gone`],
//! [`Step::internal_error`], [`Step::unavailable`], [`Step::too_many_requests`]) answer with a
//! status, adjusted by [`Step::header`] and [`Step::body`]. [`EndPolicy`] says what follows the
//! last step.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::time::Duration;
//! use fake_wireserver::{EndPolicy, EndpointId, Fake, FakeConfig, Scenario, Step};
//!
//! let scenario = Scenario::new().endpoint(
//!     EndpointId::WireserverGoalstate,
//!     EndPolicy::Default, // then the default goal state
//!     vec![
//!         Step::close(),
//!         Step::partial(10),
//!         Step::respond(503).header("Retry-After", "1").body("busy"),
//!         Step::delay(Duration::from_millis(50)),
//!     ],
//! );
//! let fake = Fake::start_blocking(FakeConfig::default().scenario(scenario))?;
//! let get = |conn: &mut std::net::TcpStream| -> std::io::Result<String> {
//!     conn.write_all(b"GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\n\
//!                      x-ms-version: 2012-11-30\r\nConnection: close\r\n\r\n")?;
//!     let mut answer = Vec::new();
//!     conn.read_to_end(&mut answer)?;
//!     Ok(String::from_utf8_lossy(&answer).into_owned())
//! };
//! let ws = fake.wireserver_addr().unwrap();
//! assert_eq!(get(&mut std::net::TcpStream::connect(ws)?)?, ""); // closed, not a byte
//! let partial = get(&mut std::net::TcpStream::connect(ws)?)?;
//! let (head, body) = partial.split_once("\r\n\r\n").unwrap();
//! assert!(head.starts_with("HTTP/1.1 200 OK"));
//! assert_eq!(body.len(), 10); // of a longer Content-Length
//! let busy = get(&mut std::net::TcpStream::connect(ws)?)?;
//! assert!(busy.starts_with("HTTP/1.1 503 Service Unavailable") && busy.contains("Retry-After: 1"));
//! assert!(get(&mut std::net::TcpStream::connect(ws)?)?.contains("<Incarnation>1</Incarnation>"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Expectations
//!
//! [`Fake::expect`] declares what should arrive ([`Expectation`]), wiremock style: verified
//! when the handle drops (a panic listing what arrived) or by [`Fake::verify`]. A failed
//! expectation names the file and line of the `expect` call that set it. Counts are a number
//! or a range ([`Times`]); an empty range (`3..=1`) panics at the calling line, and so does a
//! state or substatus no report can carry (`state("Redy")`: the valid values are the oracle's,
//! `Ready`/`NotReady` and `ProvisioningFailed`/`Provisioning`), since either would make the
//! expectation pass or fail whatever the agent sent.
//!
//! ```
//! use fake_wireserver::{EndpointId, Expectation, Fake, FakeConfig};
//!
//! let fake = Fake::start_blocking(FakeConfig::default())?;
//! fake.expect(Expectation::requests(EndpointId::WireserverGoalstate).times(1..=3));
//! fake.expect(Expectation::requests("imds.*").never());
//! fake.expect(Expectation::health_reports(1).state("Ready"));
//! // Nothing arrived: two of the three are not met.
//! let err = fake.verify().unwrap_err();
//! assert!(err.starts_with("fake-wireserver: 2 expectation(s) not met:"));
//! assert!(err.contains(": expected between 1 and 3 request(s) to wireserver.goalstate, got 0"));
//! // Dropping the handle now panics with the same message.
//! let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(fake)));
//! assert!(panic.is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The journal
//!
//! One [`journal::Entry`] per request: what arrived (headers in order and case, body), the
//! [endpoint id](EndpointId), the [listener](journal::Listener) it reached, what the fake
//! answered (`answer.kind`, an [`AnswerKind`]; `status`; `step`), request-level
//! [findings](oracle::Finding), and for health POSTs the oracle's parse of the report
//! ([`oracle::HealthReport`]) including mismatches against the goal state that was served.
//! [`FakeConfig::journal_file`] also writes it as JSON Lines.
//!
//! ```
//! use std::io::{Read, Write};
//! use fake_wireserver::oracle::{HealthState, ReportKind, SubStatus};
//! use fake_wireserver::{AnswerKind, EndpointId, Fake, FakeConfig, Listener};
//!
//! let fake = Fake::start_blocking(FakeConfig::default())?;
//! let body = r#"{"state":"NotReady","details":{"subStatus":"ProvisioningFailed","description":"no disk"}}"#;
//! let mut conn = std::net::TcpStream::connect(fake.wireserver_addr().unwrap())?;
//! conn.write_all(format!(
//!     "POST /provisioning/health HTTP/1.1\r\nHost: 168.63.129.16\r\n\
//!      Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
//!     body.len()
//! ).as_bytes())?;
//! conn.read_to_end(&mut Vec::new())?;
//!
//! let journal = fake.journal();
//! let entry = &journal[0];
//! assert_eq!(entry.endpoint, EndpointId::WireserverHealthJson);
//! assert!(entry.endpoint.is_health() && entry.endpoint.is_wireserver());
//! assert_eq!(entry.listener, Listener::Wireserver);
//! assert_eq!((entry.answer.kind, entry.answer.status), (AnswerKind::Default, Some(201)));
//! let report = entry.report.as_ref().unwrap();
//! assert_eq!(report.kind, ReportKind::Json);
//! assert_eq!(report.state, Some(HealthState::NotReady));
//! assert_eq!(report.substatus, Some(SubStatus::ProvisioningFailed));
//! // Serialized, every field is the string the journal always had.
//! let line = serde_json::to_value(entry)?;
//! assert_eq!((&line["endpoint"], &line["listener"]), (&"wireserver.health.json".into(), &"wireserver".into()));
//! assert_eq!(line["answer"]["kind"], "default");
//! // An agent's header mistakes are findings, with ids of the request rulebook
//! // (this client sent no x-ms-guest-agent-name; informational).
//! use fake_wireserver::inspect::{Aspect, RequestId};
//! let header = |f: &fake_wireserver::oracle::Finding| {
//!     RequestId::parse(&f.id).is_some_and(|id| id.graded_by().contains(&Aspect::Headers))
//! };
//! assert!(entry.findings.iter().any(header));
//! assert_eq!(entry.findings[0].id, RequestId::HeaderMissingXMsGuestAgentName.as_str());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The admin API
//!
//! A fake driven from outside (the binary, another process) is read and steered over its admin
//! API: its own loopback listener ([`FakeConfig::admin`]), every request with
//! `Authorization: Bearer` [`Fake::admin_token`]. `GET /__admin/journal`,
//! `POST /__admin/scenario` (`Content-Type: application/toml`), `POST /__admin/reset`,
//! `GET /__admin/served`.
//!
//! ```
//! use std::io::{Read, Write};
//! use fake_wireserver::{Fake, FakeConfig};
//!
//! let fake = Fake::start_blocking(FakeConfig::default().admin(([127, 0, 0, 1], 0).into()))?;
//! let admin = fake.admin_addr().unwrap();
//! let token = fake.admin_token().unwrap();
//! let scenario = "[goalstate]\nincarnation = \"9\"\n";
//! let mut conn = std::net::TcpStream::connect(admin)?;
//! conn.write_all(format!(
//!     "POST /__admin/scenario HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {token}\r\n\
//!      Content-Type: application/toml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{scenario}",
//!     scenario.len()
//! ).as_bytes())?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
//! assert_eq!(fake.served_ids().incarnation, "9");
//!
//! // Without the token: 401, and nothing done.
//! let mut conn = std::net::TcpStream::connect(admin)?;
//! conn.write_all(format!("POST /__admin/reset HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n").as_bytes())?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The oracle
//!
//! [`oracle`] (crate `wirecheck-oracle`) parses what agents send, independently of any
//! agent's code: encoded provisioning reports, health bodies, KVP pool files. Pure functions;
//! problems are [`Finding`]s with stable ids.
//!
//! ```
//! use fake_wireserver::oracle::{Mode, encoded, health};
//!
//! let report = encoded::parse(
//!     "result=success|agent=Azure-Init/0.1.1|pps_type=None|vm_id=v|timestamp=2026-06-17T00:00:00+00:00",
//!     Mode::Strict,
//! )?;
//! assert_eq!(report.get("vm_id"), Some("v"));
//!
//! let json = health::parse_json(br#"{"state":"Ready"}"#);
//! assert_eq!(json.state, Some(health::HealthState::Ready));
//! assert!(json.is_terminal());
//! // An unknown state is kept as sent, with an error finding.
//! let bad = health::parse_json(br#"{"state":"Done"}"#);
//! assert_eq!(bad.state, Some(health::HealthState::from("Done")));
//! assert!(bad.findings.iter().any(|f| f.is_error()));
//! # Ok::<(), fake_wireserver::oracle::EncodedError>(())
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
//! # Transport
//!
//! The fake reads and writes HTTP/1.1 on the raw socket itself, so scripted faults are real (a
//! `reset` is a TCP RST, a `hang` never answers; each kind is an [`Action`]). The default
//! documents come from two axum routers ([`wireserver::router`], [`imds::router`]).

// Unit tests read top to bottom as the story they check; the length rule is for the code.
#![cfg_attr(test, allow(clippy::too_many_lines))]
#![warn(missing_docs)]

mod admin;
mod bodies;
pub mod clock;
pub mod config;
mod conns;
pub mod contain;
mod context;
pub mod documents;
pub mod endpoint;
mod engine;
pub mod expect;
mod fake;
pub mod fdlimit;
pub mod files;
pub mod guest;
pub mod hostplugin;
mod http1;
pub mod imds;
pub mod inspect;
pub mod journal;
pub mod journal_file;
pub mod lifeline;
pub mod limits;
/// The independent parsers (crate `wirecheck-oracle`), re-exported for the journal's users.
pub use wirecheck_oracle as oracle;
pub mod proxy;
mod rx_stamp;
pub mod sandbox;
pub mod scenario;
mod server;
pub mod syn_watch;
mod sync;
pub mod text;
pub mod wireserver;

pub use documents::Addresses;
pub use endpoint::{EndpointId, IntoEndpointPattern, Service, UnknownEndpoint};
pub use expect::{Expectation, Times};
pub use fake::{
    DEFAULT_HEAD_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT, Fake,
    FakeConfig, FakeError, Listeners, serve_on,
};
pub use files::FileAccess;
pub use journal::{
    Answer, AnswerKind, Delivery, Entry, EntryError, JournalStats, Listener, StepRef, UnknownName,
};
pub use journal_file::JournalFileError;
pub use oracle::{Finding, HealthReport, HealthState, ServedIds, Severity, SubStatus};
pub use scenario::{
    Action, Body, EndPolicy, EndpointPlan, ImdsRateLimit, Preset, RateLimit, Reply, Scenario,
    ScenarioError, Step, Trigger, TriggerAction,
};
