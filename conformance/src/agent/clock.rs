//! Whether an agent's clock can run in agent time (profile key `clock`): an ordinary
//! dynamically linked agent (Python, Rust with tokio, C) can, by libfaketime's `LD_PRELOAD`
//! (`fake_wireserver::clock`); a statically linked one, or one that reads the time without the
//! C library, cannot and keeps the wall clock. `wall` is the default: an agent whose clock was
//! sped up without it noticing would look that many times slower, so speed is opted into by a
//! profile that was tried at both speeds (`tests/tests/agent_time.rs`).

use fake_wireserver::clock::TimeScale;
use serde::Deserialize;

/// The profile's `clock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ClockKind {
    /// Runs at the wall clock, always.
    #[default]
    Wall,
    /// Its clock can be scaled: the runner picks a speed per case (or `--time-scale` sets one).
    Scalable,
}

impl ClockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClockKind::Wall => "wall",
            ClockKind::Scalable => "scalable",
        }
    }
}

/// An agent's clock in a run: the profile's kind and the fastest speed it keeps up with
/// (`fastest_clock`), and the speed `--time-scale` fixed for the run (`None`: the runner picks
/// one per case).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentClockPolicy {
    pub kind: ClockKind,
    pub fixed: Option<TimeScale>,
    /// Sped up, the agent's own work (start-up, key generation, parsing) costs `scale` times
    /// as much of its time; an agent with much of it between its requests declares the speed
    /// beyond which that work, not its waits, would decide its verdicts.
    pub fastest: TimeScale,
}

impl Default for AgentClockPolicy {
    fn default() -> Self {
        AgentClockPolicy {
            kind: ClockKind::default(),
            fixed: None,
            fastest: TimeScale::new(TimeScale::MAX).unwrap_or(TimeScale::WALL),
        }
    }
}

impl AgentClockPolicy {
    /// The speed of a case whose agent waits `wanted` would put at: the wall clock for an agent
    /// that cannot be scaled, the run's fixed speed when one was given, else `wanted`; never
    /// faster than the profile's `fastest_clock`.
    pub fn scale(&self, wanted: TimeScale) -> TimeScale {
        match self.kind {
            ClockKind::Wall => TimeScale::WALL,
            ClockKind::Scalable => self.fixed.unwrap_or(wanted).min(self.fastest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_scalable_clock_is_sped_up_and_a_fixed_speed_wins() {
        let x20 = TimeScale::new(20).unwrap();
        let x5 = TimeScale::new(5).unwrap();
        let wall = AgentClockPolicy::default();
        assert_eq!(wall.scale(x20), TimeScale::WALL);
        let fixed_wall = AgentClockPolicy {
            kind: ClockKind::Wall,
            fixed: Some(x5),
            ..Default::default()
        };
        assert_eq!(fixed_wall.scale(x20), TimeScale::WALL);
        let auto = AgentClockPolicy {
            kind: ClockKind::Scalable,
            fixed: None,
            ..Default::default()
        };
        assert_eq!(auto.scale(x20), x20);
        let fixed = AgentClockPolicy {
            kind: ClockKind::Scalable,
            fixed: Some(x5),
            ..Default::default()
        };
        assert_eq!(fixed.scale(x20), x5);
        // Never faster than the agent keeps up with, chosen or fixed.
        let capped = AgentClockPolicy {
            kind: ClockKind::Scalable,
            fixed: None,
            fastest: x5,
        };
        assert_eq!(capped.scale(x20), x5);
        assert_eq!(
            AgentClockPolicy {
                fixed: Some(x20),
                ..capped
            }
            .scale(x20),
            x5
        );
    }
}
