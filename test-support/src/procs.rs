//! The processes a test started, found by a marker in their command line or environment (the
//! way a user would look for what a killed run left behind: `/proc`, not the runner's word).

use std::time::{Duration, Instant};

/// Processes whose command line or environment holds `marker` (zombies, already ended, are
/// not counted: they hold nothing but a process table entry until reaped).
pub fn marked(marker: &str) -> Vec<u32> {
    let needle = marker.as_bytes();
    let holds = |bytes: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let read =
                |what: &str| std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
            !zombie(*pid) && (holds(&read("cmdline")) || holds(&read("environ")))
        })
        .collect()
}

/// Whether `pid` has ended and waits to be reaped.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the command name, which is in parentheses and may hold any byte.
            let after = &stat[stat.rfind(')')? + 1..];
            after.split_whitespace().next().map(|s| s == "Z")
        })
        .unwrap_or(false)
}

/// Waits up to `bound` for every process marked with `marker` to end; returns those left, each
/// with its command line.
pub fn left_after(marker: &str, bound: Duration) -> Vec<String> {
    let until = Instant::now() + bound;
    loop {
        let left = marked(marker);
        if left.is_empty() {
            return Vec::new();
        }
        if Instant::now() >= until {
            return left
                .into_iter()
                .map(|pid| {
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    format!(
                        "{pid}: {}",
                        String::from_utf8_lossy(&cmdline).replace('\0', " ")
                    )
                })
                .collect();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits up to `bound` until at least `count` processes are marked with `marker`.
pub fn wait_for(marker: &str, count: usize, bound: Duration) -> bool {
    let until = Instant::now() + bound;
    while Instant::now() < until {
        if marked(marker).len() >= count {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
