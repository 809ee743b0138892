//! How busy the machine was with work other than the benchmark: total busy CPU time from
//! `/proc/stat` minus this process's own CPU time and that of its waited-for descendants
//! (`/proc/self/stat`: utime, stime, cutime, cstime). Every child the bench starts is waited
//! for, so what remains is other people's work.

use std::time::Instant;

/// Clock ticks per second of /proc/stat and /proc/<pid>/stat (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug, Clone, Copy)]
pub struct CpuSnapshot {
    busy_ticks: u64,
    own_ticks: u64,
    at: Instant,
    /// 1-minute load average.
    pub load1: f64,
}

impl CpuSnapshot {
    pub fn now() -> CpuSnapshot {
        CpuSnapshot {
            busy_ticks: std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| machine_busy_ticks(&s))
                .unwrap_or(0),
            own_ticks: std::fs::read_to_string("/proc/self/stat")
                .ok()
                .and_then(|s| own_ticks(&s))
                .unwrap_or(0),
            at: Instant::now(),
            load1: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(f64::NAN),
        }
    }

    /// Average number of cores busy with other work between `self` and `later`.
    pub fn other_cores_until(&self, later: &CpuSnapshot) -> f64 {
        let wall = later.at.duration_since(self.at).as_secs_f64();
        if wall <= 0.0 {
            return 0.0;
        }
        let busy = later.busy_ticks.saturating_sub(self.busy_ticks) as f64;
        let own = later.own_ticks.saturating_sub(self.own_ticks) as f64;
        ((busy - own).max(0.0) / TICKS_PER_SECOND) / wall
    }
}

/// `cpu  user nice system idle iowait irq softirq steal ...`: everything but idle and iowait.
fn machine_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    Some(v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)? + v.get(7).unwrap_or(&0))
}

/// utime + stime + cutime + cstime (fields 14–17; the command name may contain spaces).
fn own_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // after ')' the first field is field 3 (state); field 14 is at index 11.
    (11..15).map(|i| fields.get(i)?.parse::<u64>().ok()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_and_self_stat() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(machine_busy_ticks(stat), Some(161));
        let own = "42 (a b) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 11 13 20 0 1 0 5 0 0";
        assert_eq!(own_ticks(own), Some(7 + 3 + 11 + 13));
    }

    #[test]
    fn other_work_is_never_negative() {
        let a = CpuSnapshot::now();
        let b = CpuSnapshot::now();
        assert!(a.other_cores_until(&b) >= 0.0);
    }
}
