//! The servers under test as child processes: started, timed from exec to their ready line
//! (one JSON line on stdout, `fake-wireserver`'s contract, which the bare axum bin and the
//! Python fake imitate), and killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};

use crate::commands::{CommandLog, render};

/// How long a server may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// How to start one kind of server.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Shown in tables, e.g. "fake-wireserver".
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl ServerSpec {
    pub fn new(name: &str, program: impl Into<PathBuf>, args: &[&str]) -> ServerSpec {
        ServerSpec {
            name: name.to_owned(),
            program: program.into(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    pub fn command_line(&self) -> String {
        render(&self.program, &self.args)
    }

    /// Starts the server and waits for its ready line.
    pub fn start(&self, log: &CommandLog) -> anyhow::Result<Running> {
        log.record(&self.command_line());
        let started = Instant::now();
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", self.command_line()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        // Read the line on a thread so a server that never gets ready cannot hang the bench.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let result = reader.read_line(&mut line).map(|_| line);
            let _ = tx.send((result, Instant::now(), reader));
        });
        let mut running = Running {
            name: self.name.clone(),
            child,
            stdout: None,
            imds: "127.0.0.1:0".parse().expect("literal address"),
            ready_after: Duration::ZERO,
        };
        let (line, ready_at, reader) = rx
            .recv_timeout(READY_TIMEOUT)
            .map_err(|_| anyhow!("{}: no ready line within {READY_TIMEOUT:?}", self.name))?;
        running.ready_after = ready_at.duration_since(started);
        running.stdout = Some(reader);
        let line = line.with_context(|| format!("{}: reading its ready line", self.name))?;
        if line.is_empty() {
            bail!("{}: exited before printing its ready line", self.name);
        }
        running.imds = parse_ready_line(&line)
            .with_context(|| format!("{}: ready line {:?}", self.name, line.trim_end()))?;
        Ok(running)
    }
}

/// The `imds` address from a ready line (`{"wireserver":...,"imds":"127.0.0.1:41235",...}`).
pub fn parse_ready_line(line: &str) -> anyhow::Result<SocketAddr> {
    let value: serde_json::Value = serde_json::from_str(line.trim()).context("not JSON")?;
    let imds = value
        .get("imds")
        .and_then(|v| v.as_str())
        .ok_or_else(|| anyhow!("no \"imds\" address"))?;
    imds.parse()
        .with_context(|| format!("\"imds\" {imds:?} is not IP:PORT"))
}

/// A started server; killed (SIGKILL) and reaped on drop.
pub struct Running {
    pub name: String,
    child: Child,
    /// Kept open so the server never writes into a closed pipe.
    stdout: Option<BufReader<ChildStdout>>,
    pub imds: SocketAddr,
    /// From spawn to the ready line.
    pub ready_after: Duration,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stop(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stdout = None;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A release binary of this workspace (`target/release/NAME`).
pub fn release_binary(target_dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let path = target_dir.join("release").join(name);
    if !path.is_file() {
        bail!(
            "{} not found: bench/run.sh builds the release binaries first",
            path.display()
        );
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_gives_the_imds_address() {
        let line = r#"{"wireserver":"127.0.0.1:1","imds":"127.0.0.1:41235","proxy":null,"admin":"127.0.0.1:3"}"#;
        assert_eq!(parse_ready_line(line).unwrap().port(), 41235);
        assert!(parse_ready_line(r#"{"imds":null}"#).is_err());
        assert!(parse_ready_line("listening").is_err());
    }
}
