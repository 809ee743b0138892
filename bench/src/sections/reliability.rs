//! provision-report's reliability figures (issue 13): the release binary under SIGKILL during
//! pool rewrites, under pool faults, on hostile pools, and given bad input. Not a speed
//! figure: each count is what a user would notice (a report not sent, a record torn or lost,
//! a bad input accepted), next to a reference from the same run where there is one: the kill
//! loop also runs the rewrite design the reporter had before (`bench/kvp_rewrite_one_write.py`:
//! the whole pool rewritten with one write).

use std::fmt::Write as _;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use fake_wireserver::{EndpointId, Fake, FakeConfig};
use wirecheck_e2e::kill_loop::{self, LoopStats, VM_ID};
use wirecheck_oracle::encoded::{Mode, parse};
use wirecheck_oracle::kvp::{RECORD_SIZE, decode_pool, encode_record};

use super::{Ctx, thousands};
use crate::commands::render;
use crate::results::{Figure, Section};

/// Other-writer records in the kill loop's pool (6.4 MB).
pub const KILL_LOOP_OTHERS: usize = 2_500;
const GIB: u64 = 1 << 30;

/// One case: what was done, what was expected, what happened.
struct Case {
    kind: &'static str,
    name: String,
    expected: String,
    outcome: String,
    ok: bool,
    elapsed: Duration,
}

struct Harness<'a> {
    ctx: &'a Ctx,
    reporter: PathBuf,
    rt: tokio::runtime::Runtime,
    dir: PathBuf,
    n: usize,
}

impl Harness<'_> {
    fn fresh_dir(&mut self) -> anyhow::Result<PathBuf> {
        self.n += 1;
        let dir = self.dir.join(format!("case-{}", self.n));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    fn fake(&self) -> anyhow::Result<Fake> {
        Ok(self.rt.block_on(Fake::start(FakeConfig::default()))?)
    }

    /// The reporter with the bench's common flags, then `args`.
    fn command(&self, fake: &Fake, pool: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.reporter);
        cmd.env_clear()
            .arg(format!("--wireserver={}", fake.wireserver_url()))
            .arg("--no-imds")
            .arg(format!("--vm-id={VM_ID}"))
            .arg(format!("--kvp-pool={}", pool.display()))
            .args(["--timeout=5", "--retry-interval=0.2", "--request-timeout=2"])
            .args(args);
        cmd
    }

    fn run(&self, mut cmd: Command) -> anyhow::Result<(Output, Duration)> {
        let program = PathBuf::from(cmd.get_program());
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        self.ctx.log.record(&render(&program, &args));
        let started = Instant::now();
        let out = cmd.output().context("running provision-report")?;
        Ok((out, started.elapsed()))
    }
}

fn reports_received(fake: &Fake) -> usize {
    fake.journal()
        .iter()
        .filter(|e| e.endpoint == EndpointId::WireserverHealthJson)
        .count()
}

fn exit_text(out: &Output) -> String {
    match out.status.code() {
        Some(c) => format!("exit {c}"),
        None => format!("killed ({})", out.status),
    }
}

/// Applies an rlimit to the child.
fn limit(cmd: &mut Command, resource: rustix::process::Resource, bytes: u64) {
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setrlimit(
                resource,
                rustix::process::Rlimit {
                    current: Some(bytes),
                    maximum: Some(bytes),
                },
            )
            .map_err(std::io::Error::from)
        });
    }
}

fn record(key: &str, value: &str) -> Vec<u8> {
    encode_record(key, value).expect("valid record").to_vec()
}

/// Pool faults: the report must still go out, exit 3 (or 0 where the record can be written).
fn pool_faults(h: &mut Harness<'_>) -> anyhow::Result<Vec<Case>> {
    let mut cases = vec![unopenable_pool(h)?];
    for what in ["symlink", "directory", "FIFO"] {
        cases.push(not_a_file_at_pool_path(h, what)?);
    }
    for lock in [PoolLock::Flock, PoolLock::Fcntl] {
        cases.push(locked_pool(h, lock)?);
    }
    cases.push(pool_cannot_grow(h)?);
    cases.push(sparse_pool_under_address_limit(h)?);
    Ok(cases)
}

const EXPECTED_EXIT_3_UNCHANGED: &str = "exit 3, report delivered, pool unchanged";

/// A pool fault whose right outcome is exit 3, the report delivered once and the pool as it was.
fn exit_3_pool_unchanged(
    name: String,
    out: &Output,
    got: usize,
    unchanged: bool,
    elapsed: Duration,
) -> Case {
    Case {
        kind: "pool fault",
        name,
        expected: EXPECTED_EXIT_3_UNCHANGED.into(),
        outcome: format!(
            "{}, {got} report(s) received, pool {}",
            exit_text(out),
            if unchanged { "unchanged" } else { "CHANGED" }
        ),
        ok: out.status.code() == Some(3) && got == 1 && unchanged,
        elapsed,
    }
}

/// How another process holds the pool.
#[derive(Clone, Copy)]
enum PoolLock {
    Flock,
    Fcntl,
}

impl PoolLock {
    fn name(self) -> &'static str {
        match self {
            PoolLock::Flock => "flock",
            PoolLock::Fcntl => "a whole-file fcntl write lock",
        }
    }
}

fn unopenable_pool(h: &mut Harness<'_>) -> anyhow::Result<Case> {
    // Cannot be opened: sysfs refuses new files to everyone, root included.
    let fake = h.fake()?;
    let cmd = h.command(
        &fake,
        Path::new("/sys/kernel/wirecheck-bench-pool"),
        &["ready"],
    );
    let (out, elapsed) = h.run(cmd)?;
    let got = reports_received(&fake);
    Ok(Case {
        kind: "pool fault",
        name: "pool cannot be opened (a path in sysfs)".into(),
        expected: "exit 3, report delivered".into(),
        outcome: format!("{}, {got} report(s) received", exit_text(&out)),
        ok: out.status.code() == Some(3) && got == 1,
        elapsed,
    })
}

/// What sits at the pool path at boot is the machine's state: a symlink (never followed),
/// a directory or a FIFO (opened O_NONBLOCK) costs the KVP record, not the report.
fn not_a_file_at_pool_path(h: &mut Harness<'_>, what: &str) -> anyhow::Result<Case> {
    let dir = h.fresh_dir()?;
    let pool = dir.join(".kvp_pool_1");
    let target = dir.join("elsewhere");
    match what {
        "symlink" => {
            std::fs::write(&target, b"untouched")?;
            std::os::unix::fs::symlink(&target, &pool)?;
        }
        "directory" => std::fs::create_dir(&pool)?,
        _ => rustix::fs::mknodat(
            rustix::fs::CWD,
            &pool,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )?,
    }
    let fake = h.fake()?;
    let cmd = h.command(&fake, &pool, &["ready"]);
    let (out, elapsed) = h.run(cmd)?;
    let got = reports_received(&fake);
    let untouched = what != "symlink" || std::fs::read(&target)? == b"untouched";
    Ok(Case {
        kind: "pool fault",
        name: format!("a {what} at the pool path"),
        expected: if what == "symlink" {
            "exit 3, report delivered, link target untouched".into()
        } else {
            "exit 3, report delivered".into()
        },
        outcome: format!(
            "{}, {got} report(s) received{}",
            exit_text(&out),
            if untouched {
                ""
            } else {
                ", link target CHANGED"
            }
        ),
        ok: out.status.code() == Some(3) && got == 1 && untouched,
        elapsed,
    })
}

/// `lock`: "flock", or "fcntl" for a whole-file fcntl write lock.
fn locked_pool(h: &mut Harness<'_>, lock: PoolLock) -> anyhow::Result<Case> {
    use rustix::fs::FlockOperation;
    let dir = h.fresh_dir()?;
    let pool = dir.join(".kvp_pool_1");
    let before = record("OTHER", "value");
    std::fs::write(&pool, &before)?;
    let holder = std::fs::File::options()
        .read(true)
        .write(true)
        .open(&pool)?;
    match lock {
        PoolLock::Flock => rustix::fs::flock(&holder, FlockOperation::LockExclusive)?,
        PoolLock::Fcntl => rustix::fs::fcntl_lock(&holder, FlockOperation::LockExclusive)?,
    }
    let fake = h.fake()?;
    let cmd = h.command(&fake, &pool, &["--kvp-lock-timeout=1", "ready"]);
    let (out, elapsed) = h.run(cmd)?;
    drop(holder);
    let got = reports_received(&fake);
    let unchanged = std::fs::read(&pool)? == before;
    Ok(exit_3_pool_unchanged(
        format!(
            "{} held by another process past --kvp-lock-timeout 1",
            lock.name()
        ),
        &out,
        got,
        unchanged,
        elapsed,
    ))
}

fn pool_cannot_grow(h: &mut Harness<'_>) -> anyhow::Result<Case> {
    // Cannot be written: a file size limit at the pool's size (EFBIG, as a full disk: ENOSPC).
    let dir = h.fresh_dir()?;
    let pool = dir.join(".kvp_pool_1");
    let mut before = record("OTHER", "value");
    before.extend(record("ANOTHER", "value"));
    std::fs::write(&pool, &before)?;
    let fake = h.fake()?;
    let mut cmd = h.command(&fake, &pool, &["ready"]);
    limit(
        &mut cmd,
        rustix::process::Resource::Fsize,
        before.len() as u64,
    );
    let (out, elapsed) = h.run(cmd)?;
    let got = reports_received(&fake);
    let unchanged = std::fs::read(&pool)? == before;
    Ok(exit_3_pool_unchanged(
        "pool cannot grow (RLIMIT_FSIZE at its size: EFBIG)".into(),
        &out,
        got,
        unchanged,
        elapsed,
    ))
}

fn sparse_pool_under_address_limit(h: &mut Harness<'_>) -> anyhow::Result<Case> {
    // 8 GiB sparse pool under a 512 MiB address-space limit (a quarter of a 2 GB VM).
    let dir = h.fresh_dir()?;
    let pool = dir.join(".kvp_pool_1");
    let file = std::fs::File::create(&pool)?;
    let slots = 8 * GIB / RECORD_SIZE as u64;
    file.write_all_at(&record("first", "at the start"), 0)?;
    file.write_all_at(
        &record("PROVISIONING_REPORT", "result=error|reason=earlier"),
        (slots - 2) * RECORD_SIZE as u64,
    )?;
    file.write_all_at(
        &record("last", "at the end"),
        (slots - 1) * RECORD_SIZE as u64,
    )?;
    drop(file);
    let fake = h.fake()?;
    let mut cmd = h.command(&fake, &pool, &["ready"]);
    limit(&mut cmd, rustix::process::Resource::As, GIB / 2);
    let (out, elapsed) = h.run(cmd)?;
    let got = reports_received(&fake);
    let view = decode_pool(&std::fs::read(&pool)?);
    let keys: Vec<&str> = view.records.iter().map(|r| r.key.as_str()).collect();
    let right = keys == ["first", "last", "PROVISIONING_REPORT"];
    Ok(Case {
        kind: "pool fault",
        name: "8 GiB sparse pool, 512 MiB address-space limit".into(),
        expected: "exit 0, report delivered, 3 records (holes and the earlier report gone)".into(),
        outcome: format!(
            "{}, {got} report(s) received, records {keys:?}",
            exit_text(&out)
        ),
        ok: out.status.code() == Some(0) && got == 1 && right,
        elapsed,
    })
}

/// Hostile pool contents: the upsert must keep every readable record of others and leave one
/// complete report.
fn hostile_pools(h: &mut Harness<'_>) -> anyhow::Result<Vec<Case>> {
    let mut out_cases = Vec::new();
    for (name, bytes) in hostile_pool_contents() {
        out_cases.push(hostile_pool(h, name, &bytes)?);
    }
    Ok(out_cases)
}

/// Each hostile pool: its name and its bytes.
fn hostile_pool_contents() -> Vec<(&'static str, Vec<u8>)> {
    let others = |n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| record(&format!("other_{i}"), &format!("value {i}")))
            .collect()
    };
    let mut key_fills = vec![b'k'; RECORD_SIZE];
    key_fills[512..].fill(0);
    key_fills[512..517].copy_from_slice(b"value");
    let mut bad_utf8 = record("binary", "x");
    bad_utf8[512..516].copy_from_slice(&[0xff, 0xfe, 0xc3, 0x28]);
    let mut erased = record("gone", "stale value left behind");
    erased[..512].fill(0);
    vec![
        ("empty pool (0 bytes)", Vec::new()),
        ("partial record at the end (1,000 bytes)", {
            let mut p = others(3);
            p.extend(&record("torn", "tail")[..1000]);
            p
        }),
        ("a key filling all 512 bytes (no NUL)", {
            let mut p = others(2);
            p.extend(&key_fills);
            p
        }),
        ("invalid UTF-8 in a value", {
            let mut p = others(2);
            p.extend(&bad_utf8);
            p
        }),
        ("all-zero records between records", {
            let mut p = others(2);
            p.extend(vec![0u8; 5 * RECORD_SIZE]);
            p.extend(others(4).split_off(2 * RECORD_SIZE));
            p
        }),
        ("an erased key with its value left", {
            let mut p = erased.clone();
            p.extend(others(2));
            p
        }),
        ("100 earlier reports interleaved", {
            let mut p = Vec::new();
            for i in 0..100 {
                p.extend(record(
                    "PROVISIONING_REPORT",
                    &format!("result=error|reason=old {i}"),
                ));
                p.extend(record(&format!("other_{i}"), "v"));
            }
            p
        }),
        ("10,000 all-zero records", vec![0u8; 10_000 * RECORD_SIZE]),
    ]
}

/// One failure report upserted into a pool holding `bytes`.
fn hostile_pool(h: &mut Harness<'_>, name: &str, bytes: &[u8]) -> anyhow::Result<Case> {
    let dir = h.fresh_dir()?;
    let pool = dir.join(".kvp_pool_1");
    std::fs::write(&pool, bytes)?;
    // What must survive: every whole slot with a key that is not ours, byte for byte.
    let mut kept: Vec<Vec<u8>> = bytes
        .chunks_exact(RECORD_SIZE)
        .filter(|s| s[0] != 0 && !s.starts_with(b"PROVISIONING_REPORT\0"))
        .map(<[u8]>::to_vec)
        .collect();
    let fake = h.fake()?;
    let cmd = h.command(&fake, &pool, &["failure", "--reason", "hostile pool"]);
    let (out, elapsed) = h.run(cmd)?;
    let got = reports_received(&fake);
    let after = std::fs::read(&pool)?;
    let view = decode_pool(&after);
    let mut slots: Vec<Vec<u8>> = after
        .chunks_exact(RECORD_SIZE)
        .map(<[u8]>::to_vec)
        .collect();
    let report = slots.pop();
    let report_ok = report.as_ref().is_some_and(|r| {
        r.starts_with(b"PROVISIONING_REPORT\0")
            && view.provisioning_report.as_ref().is_some_and(|(_, rep)| {
                rep.get("reason") == Some("hostile pool")
                    && parse(&view.records.last().unwrap().value, Mode::Lenient).is_ok()
            })
    });
    kept.sort();
    slots.sort();
    let others_ok = slots == kept;
    let whole = after.len() % RECORD_SIZE == 0;
    Ok(Case {
        kind: "hostile pool",
        name: name.into(),
        expected: "exit 0, report delivered, others' records kept, one report".into(),
        outcome: format!(
            "{}, {got} report(s) received, {} record(s){}{}{}",
            exit_text(&out),
            after.len() / RECORD_SIZE,
            if whole { "" } else { ", NOT WHOLE RECORDS" },
            if others_ok {
                ""
            } else {
                ", OTHERS' RECORDS CHANGED"
            },
            if report_ok { "" } else { ", REPORT MISSING" },
        ),
        ok: out.status.code() == Some(0) && got == 1 && whole && others_ok && report_ok,
        elapsed,
    })
}

/// Bad input: exit 2, the flag named, nothing sent, no pool created.
fn bad_inputs(h: &mut Harness<'_>) -> anyhow::Result<Vec<Case>> {
    let dir = h.fresh_dir()?;
    let unknown_key = dir.join("unknown.toml");
    std::fs::write(&unknown_key, "timeout = 5\ncolour = \"blue\"\n")?;
    let long_key = "k".repeat(255);
    let config_arg = format!("--config={}", unknown_key.display());
    let missing_arg = format!("--config={}", dir.join("missing.toml").display());
    let long_arg = format!("--kvp-key={long_key}");
    let inputs: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--timeout=0", "ready"], "--timeout"),
        (vec!["--timeout=-1", "ready"], "--timeout"),
        (vec!["--timeout=soon", "ready"], "--timeout"),
        (vec!["--timeout=1e300", "ready"], "--timeout"),
        (vec!["--retry-interval=-1", "ready"], "--retry-interval"),
        (vec!["--request-timeout=0", "ready"], "--request-timeout"),
        (vec!["--imds-timeout=NaN", "ready"], "--imds-timeout"),
        (vec!["--kvp-lock-timeout=0", "ready"], "--kvp-lock-timeout"),
        (vec!["--kvp-key=", "ready"], "--kvp-key"),
        (vec![long_arg.as_str(), "ready"], "--kvp-key"),
        (vec!["--wireserver=ftp://example", "ready"], "--wireserver"),
        (vec!["--wireserver=not a url", "ready"], "--wireserver"),
        (vec!["--protocol=carrier-pigeon", "ready"], "--protocol"),
        (vec![config_arg.as_str(), "ready"], "colour"),
        (vec![missing_arg.as_str(), "ready"], "--config"),
        (vec!["failure", "--reason="], "--reason"),
        (vec!["failure", "--reason=x", "--data=noequals"], "--data"),
        (vec!["failure", "--reason=x", "--data=1x=y"], "--data"),
        (
            vec!["failure", "--reason=x", "--data=result=forged"],
            "--data",
        ),
    ];
    let mut cases = Vec::new();
    for (args, flag) in inputs {
        let case_dir = h.fresh_dir()?;
        let pool = case_dir.join("hyperv/.kvp_pool_1");
        let fake = h.fake()?;
        let mut cmd = Command::new(&h.reporter);
        cmd.env_clear()
            .arg(format!("--wireserver={}", fake.wireserver_url()))
            .arg(format!("--imds={}", fake.imds_url()))
            .arg(format!("--kvp-pool={}", pool.display()))
            .args(&args);
        let (out, elapsed) = h.run(cmd)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let sent = fake.journal().len();
        let created = pool.exists();
        let named = stderr.contains(flag);
        let tmp = h.ctx.tmp.display().to_string();
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                if a.len() > 200 {
                    format!(
                        "{}<{} × k>",
                        &a[..a.find('=').map_or(0, |i| i + 1)],
                        long_key.len()
                    )
                } else {
                    a.replace(&tmp, "$TMP")
                }
            })
            .collect();
        cases.push(Case {
            kind: "bad input",
            name: format!("`{}`", shown.join(" ")),
            expected: format!("exit 2 naming {flag}, nothing sent, no pool"),
            outcome: format!(
                "{}{}{}{}",
                exit_text(&out),
                if named {
                    format!(", names {flag}")
                } else {
                    format!(", DOES NOT NAME {flag}")
                },
                if sent == 0 {
                    String::new()
                } else {
                    format!(", SENT {sent} REQUEST(S)")
                },
                if created { ", POOL CREATED" } else { "" },
            ),
            ok: out.status.code() == Some(2) && named && sent == 0 && !created,
            elapsed,
        });
    }
    Ok(cases)
}

fn kill_loop(h: &Harness<'_>, rounds: usize) -> anyhow::Result<(LoopStats, LoopStats)> {
    let fake = h.fake()?;
    let wireserver = fake.wireserver_url();
    let dir = h.dir.join("kill-loop");
    std::fs::create_dir_all(&dir)?;
    let pool = dir.join(".kvp_pool_1");
    let reporter = |round: usize| {
        let mut cmd = Command::new(&h.reporter);
        cmd.env_clear()
            .args(["failure", "--reason", &kill_loop::reason(round)])
            .arg(format!("--kvp-pool={}", pool.display()))
            .arg(format!("--wireserver={wireserver}"))
            .arg("--no-imds")
            .arg(format!("--vm-id={VM_ID}"))
            .args(["--timeout=10", "--retry-interval=0.2", "--log-level=warn"]);
        cmd
    };
    let one = reporter(1);
    h.ctx.log.record(&format!(
        "{}   # killed with SIGKILL after a delay, {rounds} times (wirecheck_e2e::kill_loop)",
        render(
            Path::new(one.get_program()),
            &one.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        )
    ));
    let subject = kill_loop::run(&pool, KILL_LOOP_OTHERS, rounds, 0.9, reporter)
        .context("the kill loop of provision-report")?;
    let script = h.ctx.root.join("bench/kvp_rewrite_one_write.py");
    let reference = |round: usize| {
        let mut cmd = Command::new(&h.ctx.python);
        cmd.arg(&script).arg(&pool).arg(kill_loop::KEY).arg(format!(
            "result=error|reason={}|agent=one-write-rewrite|vm_id={VM_ID}",
            kill_loop::reason(round)
        ));
        cmd
    };
    let one = reference(1);
    h.ctx.log.record(&format!(
        "{}   # the reference, killed the same way",
        render(
            Path::new(one.get_program()),
            &one.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        )
    ));
    let reference = kill_loop::run(&pool, KILL_LOOP_OTHERS, rounds, 0.9, reference)
        .context("the kill loop of the one-write reference")?;
    drop(fake);
    Ok((subject, reference))
}

pub fn run(ctx: &Ctx) -> anyhow::Result<Section> {
    let rounds = ctx.settings.reliability_rounds;
    let mut h = Harness {
        ctx,
        reporter: ctx.bin("provision-report")?,
        rt: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
        dir: ctx.tmp.join("reliability"),
        n: 0,
    };
    std::fs::create_dir_all(&h.dir)?;
    if !rustix::process::geteuid().is_root() {
        // sysfs refuses the unopenable pool to everyone; the rest needs nothing special.
        eprintln!("bench-run: reliability: not root; the cases do not need it");
    }
    let (subject, reference) = kill_loop(&h, rounds)?;
    let mut cases = pool_faults(&mut h)?;
    cases.extend(hostile_pools(&mut h)?);
    cases.extend(bad_inputs(&mut h)?);

    let mut body = String::new();
    let _ = writeln!(
        body,
        "The release `provision-report` against an in-process fake wireserver; every pool read \
         back with the oracle's KVP reader (`wirecheck_oracle::kvp`), as the host reads \
         it.\n"
    );
    write_kill_loop_table(&mut body, rounds, &subject, &reference);
    write_cases_table(&mut body, &cases);
    let figures = figures(rounds, &subject, &reference, &cases);
    if subject.during == 0 {
        bail!("no kill landed during the rewrite: the loop measured nothing");
    }
    Ok(Section {
        title: "provision-report reliability".into(),
        body,
        figures,
    })
}

fn damaged(s: &LoopStats) -> usize {
    s.damaged.len()
}

fn write_kill_loop_table(
    body: &mut String,
    rounds: usize,
    subject: &LoopStats,
    reference: &LoopStats,
) {
    let _ = writeln!(
        body,
        "**Kill loop** (`wirecheck_e2e::kill_loop`, also `tests/tests/reliability_kvp_kill.rs`): \
         {rounds} rounds, each on the same {:.1} MB pool (an earlier report first, {} records of \
         another writer with 1.2–2 KB values, two more earlier reports); the writer is killed \
         with SIGKILL after a delay walking over [0, 0.9 × its quickest unkilled run). A kill \
         *damaged* the pool when a record is torn (matches no record of the pool and is no \
         complete new report), a record of the other writer is missing, no report is left, or \
         more than one record is present twice. The reference is the rewrite provision-report \
         did before issue 13 (`bench/kvp_rewrite_one_write.py`: whole pool rewritten with one \
         write), killed the same way.\n",
        kill_loop::original_pool(KILL_LOOP_OTHERS).len() as f64 / 1e6,
        thousands(KILL_LOOP_OTHERS as f64)
    );
    let _ = writeln!(
        body,
        "| writer | unkilled run | kills before / during / after the rewrite | kills that damaged the pool | torn records | records lost | free slots left | duplicated records left |"
    );
    let _ = writeln!(body, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("provision-report", subject),
        ("one-write rewrite (reference)", reference),
    ] {
        let _ = writeln!(
            body,
            "| {name} | {:.1} ms | {} / {} / {} | {} | {} | {} | {} | {} |",
            s.unkilled.as_secs_f64() * 1e3,
            s.before,
            s.during,
            s.after,
            damaged(s),
            s.torn_records,
            s.lost_records,
            s.free_slots,
            s.duplicated
        );
    }
    if let Some((round, damage)) = subject.damaged.first() {
        let _ = writeln!(
            body,
            "\n**provision-report damaged the pool** (first: round {round}: {}).",
            damage
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    if let Some((round, damage)) = reference.damaged.first() {
        let _ = writeln!(
            body,
            "\nFirst damage by the reference: round {round}: {}.",
            damage
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let _ = writeln!(
        body,
        "\nFree slots (an empty key) and a second copy of the record being moved are what a kill \
         can leave by design (reporter/src/kvp/pool.rs); the next run drops free slots and copies of \
         its own record, and keeps both copies of another writer's (indistinguishable from a \
         record appended twice).\n"
    );
}

fn write_cases_table(body: &mut String, cases: &[Case]) {
    let _ = writeln!(
        body,
        "**Faults, hostile pools, bad input**: one run each.\n"
    );
    let _ = writeln!(body, "| kind | case | expected | outcome | ms | |");
    let _ = writeln!(body, "|---|---|---|---|---:|---|");
    for c in cases {
        let _ = writeln!(
            body,
            "| {} | {} | {} | {} | {:.1} | {} |",
            c.kind,
            c.name.replace('|', "\\|"),
            c.expected,
            c.outcome.replace('|', "\\|"),
            c.elapsed.as_secs_f64() * 1e3,
            if c.ok { "ok" } else { "**FAILED**" }
        );
    }
}

fn figures(
    rounds: usize,
    subject: &LoopStats,
    reference: &LoopStats,
    cases: &[Case],
) -> Vec<Figure> {
    let count = |kind: &str| {
        let of_kind: Vec<&Case> = cases.iter().filter(|c| c.kind == kind).collect();
        (of_kind.iter().filter(|c| c.ok).count(), of_kind.len())
    };
    let (faults_ok, faults) = count("pool fault");
    let (hostile_ok, hostile) = count("hostile pool");
    let (bad_ok, bad) = count("bad input");
    let survived = rounds - damaged(subject);
    vec![
        Figure {
            name: "kills during a KVP rewrite survived (no record torn or lost)".into(),
            measured: format!(
                "{survived} of {rounds} ({} during the rewrite)",
                subject.during
            ),
            reference: format!(
                "one-write rewrite: {} of {rounds} ({} during)",
                rounds - damaged(reference),
                reference.during
            ),
            ratio: None,
            target: "all".into(),
            met: Some(survived == rounds && subject.during > 0),
        },
        Figure {
            name: "records lost or torn in the kill loop".into(),
            measured: format!("{}", subject.lost_records + subject.torn_records),
            reference: format!(
                "one-write rewrite: {}",
                reference.lost_records + reference.torn_records
            ),
            ratio: None,
            target: "zero".into(),
            met: Some(subject.lost_records + subject.torn_records == 0),
        },
        Figure {
            name: "pool faults survived (report sent, exit status says what became of KVP)".into(),
            measured: format!("{faults_ok} of {faults}"),
            reference: "-".into(),
            ratio: None,
            target: "all".into(),
            met: Some(faults_ok == faults),
        },
        Figure {
            name: "hostile pools upserted (others' records kept, one report)".into(),
            measured: format!("{hostile_ok} of {hostile}"),
            reference: "-".into(),
            ratio: None,
            target: "all".into(),
            met: Some(hostile_ok == hostile),
        },
        Figure {
            name: "bad inputs refused (exit 2, flag named, nothing sent or written)".into(),
            measured: format!("{bad_ok} of {bad}"),
            reference: "-".into(),
            ratio: None,
            target: "all".into(),
            met: Some(bad_ok == bad),
        },
    ]
}
