//! `wirecheck kvp dump` on a large pool file, next to cloud-init's own reader
//! (`HyperVKvpReportingHandler._iterate_kvps`, Debian's cloud-init 22.4.2) reading the same file.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, anyhow, bail};
use wirecheck_oracle::kvp::encode_record;

use super::{Ctx, thousands};
use crate::commands::render;
use crate::results::{Figure, Section};
use crate::stats::{median, percentile};

/// Writes a pool of `records` records like a busy cloud-init boot leaves behind: event records
/// (`CLOUD_INIT|<incarnation>|<type>|<name>|<uuid>` with compact JSON), and one
/// `PROVISIONING_REPORT` near the end.
pub fn write_pool(path: &Path, records: usize) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for i in 0..records {
        let record = if i + 1 == records.saturating_sub(10).max(1) {
            encode_record(
                "PROVISIONING_REPORT",
                "result=success|agent=Cloud-Init/22.4.2|timestamp=2026-11-29T14:31:02.349555|\
                 vm_id=0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a",
            )
        } else {
            let kind = if i % 2 == 0 { "start" } else { "finish" };
            let name = format!("init-network/config-module-{}", i % 97);
            let uuid = format!(
                "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                i,
                i % 0xffff,
                i % 0xfff,
                (i / 7) % 0xfff,
                i * 2654435761 % 0xffff_ffff_ffff
            );
            let key = format!("CLOUD_INIT|1764426600|{kind}|{name}|{uuid}");
            let result = if kind == "finish" {
                ",\"result\":\"SUCCESS\""
            } else {
                ""
            };
            let value = format!(
                "{{\"name\":\"{name}\",\"type\":\"{kind}\",\"ts\":\"2026-11-29T14:31:02.{:06}Z\"{result},\"msg\":\"running config module {} of the init stage\"}}",
                i % 1_000_000,
                i % 97
            );
            encode_record(&key, &value)
        }
        .map_err(|e| anyhow!("encoding record {i}: {e}"))?;
        out.write_all(&record)?;
    }
    out.flush()?;
    Ok(())
}

pub fn run(ctx: &Ctx) -> anyhow::Result<Section> {
    let s = &ctx.settings;
    let pool = ctx.tmp.join("kvp_pool_1");
    write_pool(&pool, s.kvp_records)?;
    let size = std::fs::metadata(&pool)?.len();
    let wirecheck = ctx.bin("wirecheck")?;
    let pool_arg = pool.display().to_string();
    let dump_args = vec!["kvp".to_owned(), "dump".to_owned(), pool_arg.clone()];
    let dump_json_args = vec![
        "kvp".to_owned(),
        "dump".to_owned(),
        "--json".to_owned(),
        pool_arg.clone(),
    ];
    let script = ctx
        .root
        .join("bench/kvp_cloudinit.py")
        .display()
        .to_string();
    let py_args = vec![script, pool_arg];

    check_both_read_every_record(ctx, &wirecheck, &dump_args, &py_args)?;

    let mut t = Timings::default();
    for _ in 0..s.kvp_runs.max(1) {
        t.dump_ms.push(time_quiet(ctx, &wirecheck, &dump_args)?);
        t.dump_json_ms
            .push(time_quiet(ctx, &wirecheck, &dump_json_args)?);
        let started = Instant::now();
        let (_, read_s) = python_read(ctx, &py_args)?;
        t.py_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        t.py_call_ms.push(read_s * 1000.0);
    }

    Ok(Section {
        title: "`wirecheck kvp dump` on a large pool".into(),
        body: body(ctx, size, &t),
        figures: figures(ctx, &t),
    })
}

/// Each reader's timed runs, in ms.
#[derive(Default)]
struct Timings {
    dump_ms: Vec<f64>,
    dump_json_ms: Vec<f64>,
    /// cloud-init's reader as a whole python3 process.
    py_ms: Vec<f64>,
    /// cloud-init's read alone, timed inside the interpreter.
    py_call_ms: Vec<f64>,
}

/// Checks once that both readers read every record.
fn check_both_read_every_record(
    ctx: &Ctx,
    wirecheck: &Path,
    dump_args: &[String],
    py_args: &[String],
) -> anyhow::Result<()> {
    let s = &ctx.settings;
    let out = Command::new(wirecheck).args(dump_args).output()?;
    ctx.log.record(&render(wirecheck, dump_args));
    let first = String::from_utf8_lossy(&out.stdout);
    let first = first.lines().next().unwrap_or_default();
    if out.status.code().is_none_or(|c| c > 1)
        || !first.contains(&format!("{} records", s.kvp_records))
    {
        bail!(
            "wirecheck kvp dump did not read {} records ({}): {first:?}",
            s.kvp_records,
            out.status
        );
    }
    let py = python_read(ctx, py_args)?;
    if py.0 != s.kvp_records {
        bail!(
            "cloud-init's reader saw {} records, not {}",
            py.0,
            s.kvp_records
        );
    }
    Ok(())
}

fn body(ctx: &Ctx, size: u64, t: &Timings) -> String {
    let s = &ctx.settings;
    let mut body = String::new();
    let _ = writeln!(
        body,
        "A generated pool of {} records ({} MiB: cloud-init event records and one \
         PROVISIONING_REPORT), page cache warm, {} interleaved runs per reader. The wirecheck \
         rows are whole processes writing to /dev/null; wirecheck does more than read (host view \
         of every record, findings, split-event rebuild, the report parsed).\n",
        thousands(s.kvp_records as f64),
        size / (1024 * 1024),
        s.kvp_runs.max(1)
    );
    let _ = writeln!(body, "| reader | measured | median ms | p90 ms |");
    let _ = writeln!(body, "|---|---|---:|---:|");
    let rows: [(&str, &str, &Vec<f64>); 4] = [
        ("`wirecheck kvp dump`", "process", &t.dump_ms),
        ("`wirecheck kvp dump --json`", "process", &t.dump_json_ms),
        (
            "cloud-init 22.4.2 `_iterate_kvps` (python3 process)",
            "process",
            &t.py_ms,
        ),
        (
            "cloud-init 22.4.2 `_iterate_kvps` (the read alone)",
            "in-process",
            &t.py_call_ms,
        ),
    ];
    for (name, how, samples) in rows {
        let _ = writeln!(
            body,
            "| {name} | {how} | {:.1} | {:.1} |",
            median(samples),
            percentile(samples, 90.0)
        );
    }
    body
}

fn figures(ctx: &Ctx, t: &Timings) -> Vec<Figure> {
    let dump = median(&t.dump_ms);
    let py = median(&t.py_ms);
    let py_call = median(&t.py_call_ms);
    vec![
        Figure {
            name: format!(
                "`kvp dump` of {} records vs cloud-init's reader (process)",
                thousands(ctx.settings.kvp_records as f64)
            ),
            measured: format!("{dump:.1} ms"),
            reference: format!("{py:.1} ms"),
            ratio: Some(py / dump),
            target: "- (speed-up shown)".into(),
            met: None,
        },
        Figure {
            name: "`kvp dump` process vs cloud-init's read alone (no interpreter start)".into(),
            measured: format!("{dump:.1} ms"),
            reference: format!("{py_call:.1} ms"),
            ratio: Some(py_call / dump),
            target: "- (speed-up shown)".into(),
            met: None,
        },
    ]
}

/// Runs `program args` with stdout and stderr discarded; ms. Exit 0 or 1 (findings) only.
fn time_quiet(ctx: &Ctx, program: &Path, args: &[String]) -> anyhow::Result<f64> {
    ctx.log
        .record(&format!("{} > /dev/null", render(program, args)));
    let started = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if status.code().is_none_or(|c| c > 1) {
        bail!("{}: {status}", render(program, args));
    }
    Ok(ms)
}

/// `(records, seconds in the read alone)` from kvp_cloudinit.py.
fn python_read(ctx: &Ctx, args: &[String]) -> anyhow::Result<(usize, f64)> {
    ctx.log.record(&render(&ctx.python, args));
    let out = Command::new(&ctx.python).args(args).output()?;
    if !out.status.success() {
        bail!(
            "{}: {}\n{}",
            render(&ctx.python, args),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "kvp_cloudinit.py printed {:?}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    let records = v["records"]
        .as_u64()
        .ok_or_else(|| anyhow!("no records count"))? as usize;
    let read_s = v["read_s"].as_f64().ok_or_else(|| anyhow!("no read_s"))?;
    Ok((records, read_s))
}
