//! Agent time: the fake's clock can run faster than the wall clock, in step with an agent whose
//! own clock is sped up by the same factor (Debian's libfaketime, `LD_PRELOAD` with a speed,
//! after wirecheck's own `libwirecheck_agent_clock.so` for the waits libfaketime leaves on the
//! real clock: [`agent_env`]). Then a scripted 30 s delay takes 30 s of the agent's time and 1.5 s of the
//! wall's at x20, and the journal's times (`at_ms`, `done_ms`, ...) are the agent's.
//!
//! Only what the scenario scripts runs in agent time: delays, slow-body intervals, time triggers,
//! rate-limit windows and the journal's clock. The fake's own protection (read and head
//! timeouts, the connection cap) stays on the wall clock: it guards the machine, not the agent.
//!
//! Both clocks scale one source, the machine's monotonic clock, so they stay in step however
//! long a case runs; only their zero differs (the agent's is its start), which intervals,
//! budgets and deadlines never see.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How many times faster than the wall clock an agent's clock runs: a whole number from 1 (the
/// wall clock) to [`TimeScale::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeScale(u32);

impl TimeScale {
    /// The wall clock.
    pub const WALL: TimeScale = TimeScale(1);
    /// The fastest agent time allowed. Beyond it one millisecond of the machine's jitter is a
    /// tenth of a second of the agent's, more than the finest interval checks allow for.
    pub const MAX: u32 = 100;

    /// `factor` when it is from 1 to [`TimeScale::MAX`].
    pub fn new(factor: u32) -> Result<TimeScale, String> {
        if (1..=Self::MAX).contains(&factor) {
            Ok(TimeScale(factor))
        } else {
            Err(format!(
                "a time scale is a whole number from 1 (the wall clock) to {}, not {factor}",
                Self::MAX
            ))
        }
    }

    /// The factor: agent seconds per wall second.
    pub fn factor(self) -> f64 {
        f64::from(self.0)
    }

    /// The factor as the whole number it is.
    pub fn times(self) -> u32 {
        self.0
    }

    /// Whether this is the wall clock (no agent time).
    pub fn is_wall(self) -> bool {
        self.0 == 1
    }
}

impl Default for TimeScale {
    fn default() -> Self {
        TimeScale::WALL
    }
}

impl fmt::Display for TimeScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "x{}", self.0)
    }
}

impl std::str::FromStr for TimeScale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let number = s.trim().trim_start_matches(['x', 'X']);
        let factor: u32 = number.parse().map_err(|_| {
            format!(
                "a time scale is a whole number from 1 to {} such as 20 or x20, not {s:?}",
                Self::MAX
            )
        })?;
        TimeScale::new(factor)
    }
}

/// A clock counting agent time from `origin` (a moment on the machine's monotonic clock).
#[derive(Debug, Clone, Copy)]
pub struct AgentClock {
    origin: Instant,
    scale: TimeScale,
}

impl AgentClock {
    /// Agent time 0 at `origin`, running `scale` times the wall clock.
    pub fn new(origin: Instant, scale: TimeScale) -> AgentClock {
        AgentClock { origin, scale }
    }

    /// The moment agent time 0 was, on the machine's clock.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// How much faster than the wall clock it runs.
    pub fn scale(&self) -> TimeScale {
        self.scale
    }

    /// Agent time at the machine's moment `wall` (0 before the origin).
    pub fn since_origin(&self, wall: Instant) -> Duration {
        wall.saturating_duration_since(self.origin)
            .saturating_mul(self.scale.0)
    }

    /// Agent milliseconds at the machine's moment `wall`.
    pub fn ms(&self, wall: Instant) -> u64 {
        u64::try_from(self.since_origin(wall).as_millis()).unwrap_or(u64::MAX)
    }

    /// Agent milliseconds now.
    pub fn now_ms(&self) -> u64 {
        self.ms(Instant::now())
    }

    /// The machine's moment `wall` moved onto agent time: an instant as far from the origin as
    /// the agent's clock has run. Differences between such instants are agent durations, so
    /// code that measures time with `Instant`s (windows, triggers) runs in agent time unchanged.
    pub fn agent_instant(&self, wall: Instant) -> Instant {
        self.origin + self.since_origin(wall)
    }

    /// [`AgentClock::agent_instant`] of now.
    pub fn now(&self) -> Instant {
        self.agent_instant(Instant::now())
    }

    /// How long on the wall clock `agent` lasts.
    pub fn wall(&self, agent: Duration) -> Duration {
        agent / self.scale.0
    }

    /// Sleeps `agent` of agent time.
    pub async fn sleep(&self, agent: Duration) {
        tokio::time::sleep(self.wall(agent)).await;
    }
}

/// Where Debian's `libfaketime` package puts the library (multiarch paths first).
const LIBFAKETIME_PLACES: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

/// The environment variable naming another libfaketime (a build of one's own).
pub const LIBFAKETIME_VAR: &str = "WIRECHECK_LIBFAKETIME";

/// The library the environment variable `var` names, when it is set: it must be a file.
fn named_by(var: &str) -> Option<Result<PathBuf, String>> {
    let path = PathBuf::from(std::env::var_os(var)?);
    Some(if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{var} names {}, which is not a file",
            path.display()
        ))
    })
}

/// The libfaketime to preload: `$WIRECHECK_LIBFAKETIME`, else Debian's.
pub fn libfaketime() -> Result<PathBuf, String> {
    if let Some(named) = named_by(LIBFAKETIME_VAR) {
        return named;
    }
    LIBFAKETIME_PLACES
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            format!(
                "agent time needs libfaketime (Debian: apt-get install faketime), or {LIBFAKETIME_VAR} naming the library"
            )
        })
}

/// The environment variable naming wirecheck's agent clock library (a build of one's own).
pub const AGENT_CLOCK_VAR: &str = "WIRECHECK_AGENT_CLOCK";

/// The file name of wirecheck's agent clock library (crate `wirecheck-agent-clock`).
const AGENT_CLOCK_FILE: &str = "libwirecheck_agent_clock.so";

/// The library preloaded before libfaketime that keeps the waits libfaketime leaves on the real
/// clock at the agent's speed (`agent-clock/src/lib.rs`): `$WIRECHECK_AGENT_CLOCK`, else
/// beside the running program (or one folder up: cargo's test binaries live in `deps/`), else
/// `/usr/lib/wirecheck/` or `/usr/local/lib/wirecheck/`.
pub fn agent_clock_library() -> Result<PathBuf, String> {
    if let Some(named) = named_by(AGENT_CLOCK_VAR) {
        return named;
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .into_iter()
        .flat_map(|dir| {
            [
                dir.join(AGENT_CLOCK_FILE),
                dir.join("..").join(AGENT_CLOCK_FILE),
            ]
        });
    let installed = ["/usr/lib/wirecheck", "/usr/local/lib/wirecheck"]
        .into_iter()
        .map(|dir| Path::new(dir).join(AGENT_CLOCK_FILE));
    beside.chain(installed).find(|p| p.is_file()).ok_or_else(|| {
        format!(
            "agent time needs {AGENT_CLOCK_FILE} (built with the workspace: cargo build -p wirecheck-agent-clock) beside wirecheck, or {AGENT_CLOCK_VAR} naming it"
        )
    })
}

/// The variables that run an agent's clock at `scale`: `LD_PRELOAD` of wirecheck's agent clock
/// library and libfaketime with its speed, the offset zero (its clock starts at the real time
/// and runs `scale` times faster). None at the wall clock.
pub fn agent_env(scale: TimeScale) -> Result<Vec<(String, String)>, String> {
    if scale.is_wall() {
        return Ok(Vec::new());
    }
    let faketime = libfaketime()?;
    let waits = agent_clock_library()?;
    Ok(vec![
        (
            "LD_PRELOAD".into(),
            format!("{}:{}", waits.display(), faketime.display()),
        ),
        ("FAKETIME".into(), format!("+0 x{}", scale.0)),
        ("WIRECHECK_AGENT_CLOCK_SCALE".into(), scale.0.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_parse_and_are_bounded() {
        assert_eq!("x20".parse::<TimeScale>().unwrap().factor(), 20.0);
        assert_eq!("3".parse::<TimeScale>().unwrap().times(), 3);
        for bad in ["2.5", "0", "101", "NaN", "fast", "-3"] {
            let e = bad.parse::<TimeScale>().unwrap_err();
            assert!(e.contains("time scale"), "{bad}: {e}");
        }
        assert!(TimeScale::default().is_wall());
    }

    #[test]
    fn agent_time_runs_scale_times_faster() {
        let origin = Instant::now();
        let clock = AgentClock::new(origin, TimeScale::new(20).unwrap());
        let later = origin + Duration::from_millis(150);
        assert_eq!(clock.ms(later), 3000);
        assert_eq!(
            clock.agent_instant(later) - clock.agent_instant(origin),
            Duration::from_secs(3)
        );
        assert_eq!(
            clock.wall(Duration::from_secs(30)),
            Duration::from_millis(1500)
        );
        // Before the origin it is 0, never a wrap.
        let wall = AgentClock::new(later, TimeScale::WALL);
        assert_eq!(wall.ms(origin), 0);
    }

    #[test]
    fn the_wall_clock_preloads_nothing() {
        assert!(agent_env(TimeScale::WALL).unwrap().is_empty());
    }
}
