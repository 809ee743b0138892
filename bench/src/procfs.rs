//! Resident memory of a process, from `/proc/<pid>/status`.

use anyhow::{Context as _, anyhow};

/// `VmRSS` (resident now) and `VmHWM` (peak resident), in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

impl Memory {
    pub fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }
    pub fn hwm_mib(&self) -> f64 {
        self.hwm_kib as f64 / 1024.0
    }
}

pub fn memory(pid: u32) -> anyhow::Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_status(&status).with_context(|| format!("in {path}"))
}

/// Parses the `VmRSS:` and `VmHWM:` lines (`VmRSS:   13976 kB`).
pub fn parse_status(status: &str) -> anyhow::Result<Memory> {
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .ok_or_else(|| anyhow!("no {name} line"))?;
        let number = line.trim().trim_end_matches("kB").trim();
        number
            .parse()
            .with_context(|| format!("{name} {number:?} is not a number of kB"))
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() {
        let m = parse_status("Name:\tx\nVmHWM:\t   20000 kB\nVmRSS:\t   13976 kB\n").unwrap();
        assert_eq!(
            m,
            Memory {
                rss_kib: 13976,
                hwm_kib: 20000
            }
        );
        assert!(parse_status("Name:\tx\n").is_err());
    }

    #[test]
    fn reads_our_own_memory() {
        let m = memory(std::process::id()).unwrap();
        assert!(m.rss_kib > 0 && m.hwm_kib >= m.rss_kib);
    }
}
