//! A scenario run's artifacts, kept under `<out>/artifacts/<agent>/<scenario id>/`:
//! `journal.jsonl` (one journal entry per line), `kvp_pool_1` (the pool file after the run),
//! `guest-calls.jsonl` (in a guest: what its stand-in tools were asked, one call per line),
//! and per invocation `run-N.command`, `run-N.stdout`, `run-N.stderr`.

use std::io::Write as _;
use std::path::Path;

use crate::observe::Observation;

/// `artifacts/<agent>/<scenario id>`, relative to the results folder.
pub fn relative_dir(agent: &str, scenario_id: &str) -> String {
    format!("artifacts/{agent}/{scenario_id}")
}

pub fn write(out: &Path, relative: &str, obs: &Observation) -> std::io::Result<()> {
    let dir = out.join(relative);
    // A previous run's files for the same case would mix with these.
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;

    let mut journal = std::io::BufWriter::new(std::fs::File::create(dir.join("journal.jsonl"))?);
    for entry in &obs.journal {
        serde_json::to_writer(&mut journal, entry)?;
        journal.write_all(b"\n")?;
    }
    journal.flush()?;

    if let Some(pool) = &obs.pool {
        std::fs::write(dir.join(super::attach::in_process::POOL_FILE), pool)?;
    }
    if !obs.guest_calls.is_empty() {
        let mut calls = Vec::new();
        for call in &obs.guest_calls {
            serde_json::to_writer(&mut calls, call)?;
            calls.push(b'\n');
        }
        std::fs::write(dir.join(fake_wireserver::guest::GUEST_CALLS_FILE), calls)?;
    }
    for (i, run) in obs.runs.iter().enumerate() {
        let n = i + 1;
        let mut command = String::new();
        command.push_str(&format!(
            "# run {n}: {} ({})\n",
            run.run.action,
            run.exit.describe()
        ));
        command.push_str(&format!(
            "# started +{} ms, ended +{} ms on the fake's clock\n",
            run.start_ms, run.end_ms
        ));
        command.push_str(&shell_words(&run.argv));
        command.push('\n');
        std::fs::write(dir.join(format!("run-{n}.command")), command)?;
        std::fs::write(dir.join(format!("run-{n}.stdout")), with_note(&run.stdout))?;
        std::fs::write(dir.join(format!("run-{n}.stderr")), with_note(&run.stderr))?;
    }
    Ok(())
}

fn with_note(c: &crate::exec::Captured) -> Vec<u8> {
    let mut bytes = c.bytes.clone();
    if c.truncated() {
        bytes.extend_from_slice(
            format!("\n[wirecheck: output cut; {} bytes in all]\n", c.total).as_bytes(),
        );
    }
    bytes
}

/// The argv as one shell-quoted line (for copy and paste).
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_shell_quoted() {
        let argv: Vec<String> = ["agent", "--reason", "it's | bad", ""]
            .map(String::from)
            .into();
        assert_eq!(shell_words(&argv), r"agent --reason 'it'\''s | bad' ''");
    }
}
