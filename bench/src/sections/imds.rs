//! IMDS throughput and p99 latency: `wrk` at N connections on
//! `GET /metadata/instance?api-version=2021-08-01` with `Metadata: true`, against the fake, a
//! bare axum handler serving the same bytes (the ceiling) and a Python `http.server` fake in
//! testinit's style (the incumbent). Rounds are interleaved so drift in the machine's load hits
//! every server alike; figures are the medians over rounds.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::{Ctx, Document, thousands};
use crate::http::{IMDS_PATH, fetch, imds_request};
use crate::results::{Figure, Section};
use crate::servers::{Running, ServerSpec};
use crate::stats::median;
use crate::wrk::{Load, WrkSummary};

/// Target: fake throughput ≥ this share of bare axum's.
pub const TARGET_VS_BARE: f64 = 0.85;
/// Target: fake throughput ≥ this multiple of the Python fake's.
pub const TARGET_VS_PYTHON: f64 = 30.0;
/// Target: no regression against a baseline build (`--baseline-fake`): within measurement noise.
const TARGET_VS_BASELINE: f64 = 0.95;
const TARGET_P99_VS_BASELINE: f64 = 1.1;
/// Target: fake p99 ≤ this multiple of bare axum's.
pub const TARGET_P99_VS_BARE: f64 = 1.2;

struct Measured {
    name: String,
    rounds: Vec<WrkSummary>,
}

impl Measured {
    fn rps(&self) -> f64 {
        median(
            &self
                .rounds
                .iter()
                .map(WrkSummary::requests_per_second)
                .collect::<Vec<_>>(),
        )
    }
    fn p99_ms(&self) -> f64 {
        median(
            &self
                .rounds
                .iter()
                .map(|r| r.p99_us as f64 / 1000.0)
                .collect::<Vec<_>>(),
        )
    }
    fn p50_ms(&self) -> f64 {
        median(
            &self
                .rounds
                .iter()
                .map(|r| r.p50_us as f64 / 1000.0)
                .collect::<Vec<_>>(),
        )
    }
    fn errors(&self) -> u64 {
        self.rounds.iter().map(WrkSummary::errors).sum()
    }
    fn requests(&self) -> u64 {
        self.rounds.iter().map(|r| r.requests).sum()
    }
}

pub fn run(ctx: &Ctx, doc: &Document) -> anyhow::Result<Section> {
    let s = &ctx.settings;
    let load = Load {
        wrk: ctx.wrk.clone(),
        script: ctx.root.join("bench/imds.lua"),
        threads: s.wrk_threads,
        connections: s.connections,
        duration: Duration::from_secs(s.wrk_seconds),
    };
    let specs = server_specs(ctx, doc)?;
    let servers: Vec<Running> = specs
        .iter()
        .map(|spec| spec.start(&ctx.log))
        .collect::<anyhow::Result<_>>()?;
    check_same_document(&servers, doc)?;
    let warm_up = Duration::from_secs(s.wrk_seconds.clamp(1, 2));
    let measured = measure(ctx, &load, &servers, warm_up)?;
    drop(servers);

    let (fake, bare) = (&measured[0], &measured[1]);
    let baseline = measured.get(4);
    let mut body = String::new();
    write_table(&mut body, ctx, doc, warm_up, &measured);
    let mut figures = figures(&measured);
    if let (Some(base), Some(path)) = (baseline, &s.baseline_fake) {
        let _ = writeln!(
            body,
            "- fake-wireserver (baseline): `{}`, measured in the same rounds (before/after a \
             change of the connection path).",
            ctx.log.display_path(path)
        );
        figures.extend(baseline_figures(fake, base));
    }
    if fake.errors() > 0 || bare.errors() > 0 {
        let _ = writeln!(
            body,
            "\n**Errors:** the fake had {} and bare axum {} wrk errors; their figures are not \
             clean.",
            fake.errors(),
            bare.errors()
        );
    }
    Ok(Section {
        title: "IMDS throughput and latency".into(),
        body,
        figures,
    })
}

/// The fake, bare axum, the two Python fakes, and the baseline fake when there is one, in that
/// order (the figures find them by position).
fn server_specs(ctx: &Ctx, doc: &Document) -> anyhow::Result<Vec<ServerSpec>> {
    let mut specs = vec![
        ctx.fake()?,
        ctx.bare_axum(doc)?,
        ctx.python_fake(doc, false),
        ctx.python_fake(doc, true),
    ];
    if let Some(baseline) = &ctx.settings.baseline_fake {
        let baseline = baseline
            .canonicalize()
            .with_context(|| format!("--baseline-fake {}", baseline.display()))?;
        specs.push(ServerSpec::new("fake-wireserver (baseline)", baseline, &[]));
    }
    Ok(specs)
}

fn check_same_document(servers: &[Running], doc: &Document) -> anyhow::Result<()> {
    for server in servers {
        let r = fetch(server.imds, &imds_request(IMDS_PATH))
            .with_context(|| format!("probing {}", server.name))?;
        if r.status != 200 || r.body != doc.bytes {
            bail!(
                "{} does not serve the fake's document (status {}, {} bytes instead of {})",
                server.name,
                r.status,
                r.body.len(),
                doc.bytes.len()
            );
        }
    }
    Ok(())
}

/// Warms every server up, then measures them in interleaved rounds.
fn measure(
    ctx: &Ctx,
    load: &Load,
    servers: &[Running],
    warm_up: Duration,
) -> anyhow::Result<Vec<Measured>> {
    let url = |server: &Running| format!("http://{}{IMDS_PATH}", server.imds);
    for server in servers {
        load.run_for(&url(server), &server.name, warm_up, &ctx.log)
            .with_context(|| format!("warming up {}", server.name))?;
    }
    let mut measured: Vec<Measured> = servers
        .iter()
        .map(|s| Measured {
            name: s.name.clone(),
            rounds: Vec::new(),
        })
        .collect();
    for round in 0..ctx.settings.rounds.max(1) {
        // Rotate the order every round.
        for k in 0..servers.len() {
            let i = (round + k) % servers.len();
            let summary = load
                .run(&url(&servers[i]), &servers[i].name, &ctx.log)
                .with_context(|| format!("measuring {}", servers[i].name))?;
            measured[i].rounds.push(summary);
        }
    }
    Ok(measured)
}

/// How it was measured, the table of every server, and what the references are.
fn write_table(
    body: &mut String,
    ctx: &Ctx,
    doc: &Document,
    warm_up: Duration,
    measured: &[Measured],
) {
    let s = &ctx.settings;
    let (fake, bare) = (&measured[0], &measured[1]);
    let _ = writeln!(
        body,
        "`wrk -t{} -c{} -d{}s` on `GET {IMDS_PATH}` with `Metadata: true` (`bench/imds.lua`), \
         {} interleaved rounds per server after a {}s warm-up; medians over rounds. Every \
         server was first checked to answer 200 with the same {}-byte document (captured from \
         the fake).\n",
        s.wrk_threads,
        s.connections,
        s.wrk_seconds,
        s.rounds.max(1),
        warm_up.as_secs(),
        doc.bytes.len()
    );
    let _ = writeln!(
        body,
        "| server | requests/s | p50 ms | p99 ms | requests | errors (connect/read/write/status/timeout) |"
    );
    let _ = writeln!(body, "|---|---:|---:|---:|---:|---:|");
    for m in measured {
        let _ = writeln!(
            body,
            "| {} | {} | {:.3} | {:.3} | {} | {} |",
            m.name,
            thousands(m.rps()),
            m.p50_ms(),
            m.p99_ms(),
            thousands(m.requests() as f64),
            m.errors()
        );
    }
    let _ = writeln!(
        body,
        "\n- bare axum: `bench-bare-axum`, one axum route answering the same bytes (no journal, \
         no scenario engine, no header checks) on the fake's runtime shape and allocator \
         (mimalloc): the ceiling.\n\
         - Python HTTPServer (testinit): `bench/python_fake.py`, `http.server.HTTPServer` + \
         `BaseHTTPRequestHandler` as in azure-init's testinit (HTTP/1.0, one request at a time, \
         per-request logging off): the incumbent the ratio target refers to. The \
         ThreadingHTTPServer row is for information.\n\
         - The fake journals every request (in-memory window of 10,000 entries) and checks \
         headers, like it does for agents."
    );
    let per_round: Vec<String> = fake
        .rounds
        .iter()
        .zip(&bare.rounds)
        .map(|(f, b)| format!("{:.2}x", f.requests_per_second() / b.requests_per_second()))
        .collect();
    let _ = writeln!(
        body,
        "- Fake vs bare axum round by round (the spread behind the median): {}.",
        per_round.join(", ")
    );
}

/// The fake against bare axum and the Python fakes.
fn figures(measured: &[Measured]) -> Vec<Figure> {
    let (fake, bare, python, python_threads) =
        (&measured[0], &measured[1], &measured[2], &measured[3]);
    let vs_bare = fake.rps() / bare.rps();
    let vs_python = fake.rps() / python.rps();
    let p99_vs_bare = fake.p99_ms() / bare.p99_ms();
    vec![
        Figure {
            name: "IMDS throughput vs bare axum".into(),
            measured: format!("{} req/s", thousands(fake.rps())),
            reference: format!("{} req/s", thousands(bare.rps())),
            ratio: Some(vs_bare),
            target: format!("≥ {TARGET_VS_BARE}x"),
            met: Some(vs_bare >= TARGET_VS_BARE),
        },
        Figure {
            name: "IMDS throughput vs Python fake (testinit style)".into(),
            measured: format!("{} req/s", thousands(fake.rps())),
            reference: format!("{} req/s", thousands(python.rps())),
            ratio: Some(vs_python),
            target: format!("≥ {TARGET_VS_PYTHON}x"),
            met: Some(vs_python >= TARGET_VS_PYTHON),
        },
        Figure {
            name: "IMDS throughput vs Python ThreadingHTTPServer".into(),
            measured: format!("{} req/s", thousands(fake.rps())),
            reference: format!("{} req/s", thousands(python_threads.rps())),
            ratio: Some(fake.rps() / python_threads.rps()),
            target: "-".into(),
            met: None,
        },
        Figure {
            name: "IMDS p99 latency vs bare axum".into(),
            measured: format!("{:.3} ms", fake.p99_ms()),
            reference: format!("{:.3} ms", bare.p99_ms()),
            ratio: Some(p99_vs_bare),
            target: format!("≤ {TARGET_P99_VS_BARE}x"),
            met: Some(p99_vs_bare <= TARGET_P99_VS_BARE),
        },
    ]
}

/// The fake against the baseline build (`--baseline-fake`).
fn baseline_figures(fake: &Measured, base: &Measured) -> [Figure; 2] {
    let vs_base = fake.rps() / base.rps();
    let p99_vs_base = fake.p99_ms() / base.p99_ms();
    [
        Figure {
            name: "IMDS throughput vs the baseline fake".into(),
            measured: format!("{} req/s", thousands(fake.rps())),
            reference: format!("{} req/s", thousands(base.rps())),
            ratio: Some(vs_base),
            target: format!("≥ {TARGET_VS_BASELINE}x"),
            met: Some(vs_base >= TARGET_VS_BASELINE),
        },
        Figure {
            name: "IMDS p99 latency vs the baseline fake".into(),
            measured: format!("{:.3} ms", fake.p99_ms()),
            reference: format!("{:.3} ms", base.p99_ms()),
            ratio: Some(p99_vs_base),
            target: format!("≤ {TARGET_P99_VS_BASELINE}x"),
            met: Some(p99_vs_base <= TARGET_P99_VS_BASELINE),
        },
    ]
}
