//! Start-up and memory: exec to ready line (median of N, interleaved with the references), and
//! resident memory (VmRSS from /proc) idle and after a flood of IMDS requests, next to the bare
//! axum handler serving the same bytes and the Python fake.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::bail;

use super::{Ctx, Document, thousands};
use crate::http::{IMDS_PATH, flood, imds_request};
use crate::procfs::{Memory, memory};
use crate::results::{Figure, Section};
use crate::servers::ServerSpec;
use crate::stats::{median, percentile};

/// Target: fake start-up (exec to ready line), median, in ms.
pub const TARGET_STARTUP_MS: f64 = 15.0;
/// Target: fake VmRSS when idle, MiB.
pub const TARGET_IDLE_MIB: f64 = 12.0;
/// Target: fake VmRSS after the flood, MiB.
pub const TARGET_LOADED_MIB: f64 = 40.0;

/// Settle time before an idle reading (lazy allocations after the ready line).
const SETTLE: Duration = Duration::from_millis(300);

struct Footprint {
    idle: Memory,
    loaded: Option<(Memory, f64)>,
}

fn footprint(
    ctx: &Ctx,
    spec: &ServerSpec,
    doc: &Document,
    requests: usize,
) -> anyhow::Result<Footprint> {
    let server = spec.start(&ctx.log)?;
    std::thread::sleep(SETTLE);
    let idle = memory(server.pid())?;
    let loaded = if requests > 0 {
        let s = &ctx.settings;
        let result = flood(
            server.imds,
            &imds_request(IMDS_PATH),
            &doc.bytes,
            requests,
            s.flood_connections,
        );
        if result.failures > 0 {
            bail!(
                "{}: {} of {} flood requests failed",
                spec.name,
                result.failures,
                requests
            );
        }
        std::thread::sleep(SETTLE);
        Some((
            memory(server.pid())?,
            requests as f64 / result.elapsed.as_secs_f64(),
        ))
    } else {
        None
    };
    server.stop();
    Ok(Footprint { idle, loaded })
}

pub fn run(ctx: &Ctx, doc: &Document) -> anyhow::Result<Section> {
    let s = &ctx.settings;
    let specs = [
        ctx.fake()?,
        ctx.bare_axum(doc)?,
        ctx.python_fake(doc, false),
    ];

    let startup_ms = startup_samples(ctx, &specs)?;

    // Memory: the fake and the ceiling under the same flood; the Python fake idle only (at a
    // few thousand requests per second it would add minutes for a reference nobody targets).
    let fake = footprint(ctx, &specs[0], doc, s.flood_requests)?;
    let bare = footprint(ctx, &specs[1], doc, s.flood_requests)?;
    let python = footprint(ctx, &specs[2], doc, 0)?;

    let mut body = String::new();
    write_startup_table(&mut body, ctx, &specs, &startup_ms);
    write_memory_table(&mut body, ctx, &specs, [&fake, &bare, &python]);
    Ok(Section {
        title: "Fake start-up and memory".into(),
        body,
        figures: figures(ctx, &startup_ms, &fake, &bare),
    })
}

/// Start-up times in ms, one list per server, the servers interleaved.
fn startup_samples(ctx: &Ctx, specs: &[ServerSpec]) -> anyhow::Result<Vec<Vec<f64>>> {
    let mut startup_ms: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    for _ in 0..ctx.settings.startup_runs.max(1) {
        for (i, spec) in specs.iter().enumerate() {
            let server = spec.start(&ctx.log)?;
            startup_ms[i].push(server.ready_after.as_secs_f64() * 1000.0);
            server.stop();
        }
    }
    Ok(startup_ms)
}

fn write_startup_table(
    body: &mut String,
    ctx: &Ctx,
    specs: &[ServerSpec],
    startup_ms: &[Vec<f64>],
) {
    let _ = writeln!(
        body,
        "Start-up: spawn to the ready line on stdout (all three print one JSON line when their \
         listeners are bound), {} runs per server, interleaved.\n",
        ctx.settings.startup_runs.max(1)
    );
    let _ = writeln!(body, "| server | median ms | p90 ms | min ms |");
    let _ = writeln!(body, "|---|---:|---:|---:|");
    for (spec, samples) in specs.iter().zip(startup_ms) {
        let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            body,
            "| {} | {:.2} | {:.2} | {:.2} |",
            spec.name,
            median(samples),
            percentile(samples, 90.0),
            min
        );
    }
}

fn write_memory_table(
    body: &mut String,
    ctx: &Ctx,
    specs: &[ServerSpec],
    footprints: [&Footprint; 3],
) {
    let s = &ctx.settings;
    let _ = writeln!(
        body,
        "\nMemory: VmRSS from `/proc/<pid>/status` {} ms after the ready line, and again after \
         {} IMDS requests over {} keep-alive connections (each answer checked: 200, same \
         bytes). VmHWM is the peak.\n",
        SETTLE.as_millis(),
        thousands(s.flood_requests as f64),
        s.flood_connections
    );
    let _ = writeln!(
        body,
        "| server | idle VmRSS MiB | after load VmRSS MiB | after load VmHWM MiB | flood req/s |"
    );
    let _ = writeln!(body, "|---|---:|---:|---:|---:|");
    for (spec, f) in specs.iter().zip(footprints) {
        let (rss, hwm, rate) = match &f.loaded {
            Some((m, rate)) => (
                format!("{:.1}", m.rss_mib()),
                format!("{:.1}", m.hwm_mib()),
                thousands(*rate),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            body,
            "| {} | {:.1} | {rss} | {hwm} | {rate} |",
            spec.name,
            f.idle.rss_mib()
        );
    }
}

fn figures(ctx: &Ctx, startup_ms: &[Vec<f64>], fake: &Footprint, bare: &Footprint) -> Vec<Figure> {
    let fake_start = median(&startup_ms[0]);
    let bare_start = median(&startup_ms[1]);
    let mut figures = vec![
        Figure {
            name: "fake start-up (exec to ready line, median)".into(),
            measured: format!("{fake_start:.2} ms"),
            reference: format!("bare axum {bare_start:.2} ms"),
            ratio: Some(fake_start / bare_start),
            target: format!("< {TARGET_STARTUP_MS} ms"),
            met: Some(fake_start < TARGET_STARTUP_MS),
        },
        Figure {
            name: "fake memory idle (VmRSS)".into(),
            measured: format!("{:.1} MiB", fake.idle.rss_mib()),
            reference: format!("bare axum {:.1} MiB", bare.idle.rss_mib()),
            ratio: Some(fake.idle.rss_mib() / bare.idle.rss_mib()),
            target: format!("< {TARGET_IDLE_MIB} MiB"),
            met: Some(fake.idle.rss_mib() < TARGET_IDLE_MIB),
        },
    ];
    if let (Some((f, _)), Some((b, _))) = (&fake.loaded, &bare.loaded) {
        figures.push(Figure {
            name: format!(
                "fake memory after {} requests (VmRSS)",
                thousands(ctx.settings.flood_requests as f64)
            ),
            measured: format!("{:.1} MiB", f.rss_mib()),
            reference: format!("bare axum {:.1} MiB", b.rss_mib()),
            ratio: Some(f.rss_mib() / b.rss_mib()),
            target: format!("< {TARGET_LOADED_MIB} MiB"),
            met: Some(f.rss_mib() < TARGET_LOADED_MIB),
        });
    }
    figures
}
