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

/// A bash command that sends `request`, exactly as given, to `host`:80 over bash's `/dev/tcp`:
/// a sandboxed command runs in the sandbox's own network namespace, which the test's own
/// client cannot reach, and bash is all the sandbox tests rely on. Build the bytes with
/// [`crate::http::get`] or [`crate::http::post`]; follow with [`PRINT_STATUS_LINE`] to read the
/// answer.
pub fn bash_send(host: &str, request: &[u8]) -> String {
    format!(
        "exec 3<>/dev/tcp/{host}/80 && printf '{}' >&3",
        printf_format(request)
    )
}

/// Appended to [`bash_send`]: prints the answer's status line (without its CR) and closes.
pub const PRINT_STATUS_LINE: &str = " && head -n 1 <&3 | tr -d '\\r' && exec 3<&-";

/// `bytes` as a single-quoted printf format that prints them unchanged.
fn printf_format(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 16);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'%' => out.push_str("%%"),
            b'\'' => out.push_str("'\\''"),
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printf_format_prints_the_request_unchanged() {
        let request: Vec<u8> =
            b"POST /a?b=%41 HTTP/1.1\r\nX: it's \"q\" \\n\t\xff\r\n\r\n<x/>".to_vec();
        let script = format!("printf '{}'", printf_format(&request));
        let out = Command::new("bash")
            .args(["-c", &script])
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, request);
    }
}
