//! `fake-wireserver sandbox --out DIR [OPTIONS] -- COMMAND...`, and reading what it left in
//! `DIR`: `journal.jsonl`, `sandbox.json`, the copied `.kvp_pool_*` files.

use std::path::Path;
use std::process::{Command, Output};

use serde::de::DeserializeOwned;

/// Runs `fake sandbox --out out extra... -- command...` (as root: namespaces) and returns how
/// it ended.
pub fn run(fake: &Path, out: &Path, extra: &[&str], command: &[&str]) -> Output {
    Command::new(fake)
        .arg("sandbox")
        .arg("--out")
        .arg(out)
        .args(extra)
        .arg("--")
        .args(command)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} sandbox: {e}", fake.display()))
}

/// How a sandbox run ended, for assertion messages.
pub fn describe(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `out/journal.jsonl`, a journal entry a line, read as `T` (the fake's `journal::Entry`).
pub fn journal<T: DeserializeOwned>(out: &Path) -> Vec<T> {
    let path = out.join("journal.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no journal at {}: {e}", path.display()));
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: not a journal line: {e}: {line}", path.display()))
        })
        .collect()
}

/// `out/sandbox.json`, the run summary.
pub fn summary(out: &Path) -> serde_json::Value {
    let path = out.join("sandbox.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no summary at {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The copied pool files, by name, in name order.
pub fn pools(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut pools: Vec<(String, Vec<u8>)> = std::fs::read_dir(out)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", out.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.starts_with(".kvp_pool_")
                .then(|| (name, std::fs::read(e.path()).expect("a copied pool file")))
        })
        .collect();
    pools.sort();
    pools
}
