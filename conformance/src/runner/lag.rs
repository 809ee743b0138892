//! The runner watches its own scheduling lag: a task on the runner's runtime (where every
//! case's fake runs) sleeps [`TICK`] again and again and records how late it woke. A wake-up
//! late by `lag` means the runtime (or the machine) stalled for that long, and any time the
//! fake recorded around then may be late by as much. The checks get these stalls on the fake's
//! clock (`Observation::stalls`) and do not call a timing that is within the stall of its
//! limit (`Observation::uncertainty_ms`): on a machine too loaded to keep time, the verdict
//! says so (informational, with the lag) instead of a pass or a fail that depends on the load.
//!
//! A late wake-up of the watcher shows a stall of the thread it runs on; a worker thread the
//! machine left waiting while the watcher ran on another does not show there. So each tick also
//! reads how long each of wirecheck's threads waited for a CPU (`/proc/self/task/*/schedstat`,
//! the run-queue delay): the longest wait of any thread in the tick is a stall too.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_wireserver::clock::AgentClock;

pub use crate::observe::Stall;

/// How often the watcher wakes.
const TICK: Duration = Duration::from_millis(10);

/// Lags below this are not kept (they never matter to a verdict).
const KEEP_FROM: Duration = Duration::from_millis(crate::observe::UNSEEN_LAG_MS);

/// Samples kept at most (oldest dropped): at one sample per tick, over 15 minutes of
/// continuous lag.
const MAX_SAMPLES: usize = 100_000;

/// How long each thread of this process has been waiting for a CPU, look after look.
#[derive(Debug, Default)]
struct RunQueueWaits {
    /// Thread id → (total run-queue wait at the last look, ns; the wait of the looks in a row
    /// in which it waited, ns).
    last: std::collections::HashMap<u32, (u64, u64)>,
    /// When the last look was.
    looked: Option<Instant>,
}

impl RunQueueWaits {
    /// The longest stretch any thread has been kept waiting for a CPU, ending now (zero where
    /// the kernel keeps no scheduler statistics): a thread that waited in each of the last
    /// ticks was held back for their sum.
    fn longest_since_last(&mut self) -> Duration {
        let now = Instant::now();
        let elapsed = self
            .looked
            .replace(now)
            .map_or(0, |then| now.duration_since(then).as_nanos() as u64);
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Duration::ZERO;
        };
        let mut longest = 0u64;
        let mut seen = std::collections::HashMap::with_capacity(self.last.len());
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            // "<on-cpu ns> <run-queue wait ns> <time slices>"
            let Some(waited) = std::fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            else {
                continue;
            };
            // A thread that waited through (nearly) the whole time since the last look was held
            // back all along: its wait goes on. Many short waits in a row are not one long one
            // (each delayed what it delayed by at most its own length).
            let streak = match self.last.get(&tid) {
                Some((before, streak)) => {
                    let delta = waited.saturating_sub(*before);
                    if delta < KEEP_FROM.as_nanos() as u64 {
                        0
                    } else if delta * 10 >= elapsed * 9 {
                        streak + delta
                    } else {
                        delta
                    }
                }
                None => 0,
            };
            longest = longest.max(streak);
            seen.insert(tid, (waited, streak));
        }
        self.last = seen;
        Duration::from_nanos(longest)
    }
}

/// The recorded lag samples of one run.
#[derive(Debug, Clone)]
pub struct LagWatch {
    samples: Arc<Mutex<VecDeque<(Instant, Duration)>>>,
}

impl LagWatch {
    /// Starts watching on the current runtime until the returned handle is aborted.
    pub fn start() -> (LagWatch, tokio::task::JoinHandle<()>) {
        let watch = LagWatch {
            samples: Arc::default(),
        };
        let samples = Arc::clone(&watch.samples);
        let task = tokio::spawn(async move {
            let mut waits = RunQueueWaits::default();
            waits.longest_since_last();
            loop {
                let before = Instant::now();
                tokio::time::sleep(TICK).await;
                let woke = Instant::now();
                let lag = woke
                    .duration_since(before)
                    .saturating_sub(TICK)
                    .max(waits.longest_since_last());
                if lag >= KEEP_FROM {
                    let mut s = samples.lock().unwrap_or_else(|e| e.into_inner());
                    if s.len() == MAX_SAMPLES {
                        s.pop_front();
                    }
                    s.push_back((woke, lag));
                }
            }
        });
        (watch, task)
    }

    /// A watch that saw nothing (for runs without a watcher, e.g. tests of the judging).
    pub fn idle() -> LagWatch {
        LagWatch {
            samples: Arc::default(),
        }
    }

    /// Records one sample (for tests).
    pub fn record(&self, at: Instant, lag: Duration) {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((at, lag));
    }

    /// The stalls that ended after `from`, on the fake's `clock`: in agent time, where a
    /// stall of the wall clock lasts `scale` times as long.
    pub fn stalls_since(&self, from: Instant, clock: &AgentClock) -> Vec<Stall> {
        let s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        s.iter()
            .filter(|(woke, _)| *woke >= from)
            .map(|(woke, lag)| Stall {
                end_ms: clock.ms(*woke),
                len_ms: lag.mul_f64(clock.scale().factor()).as_millis() as u64,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread the machine keeps off the CPU (four spinners per core) is seen waiting, though
    /// it never sleeps late itself.
    #[test]
    fn a_thread_kept_waiting_for_a_cpu_is_seen() {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let spinners: Vec<_> = (0..4 * cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let mut waits = RunQueueWaits::default();
        waits.longest_since_last();
        let mut longest = Duration::ZERO;
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            std::thread::sleep(TICK);
            longest = longest.max(waits.longest_since_last());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        if std::path::Path::new("/proc/self/schedstat").exists() {
            assert!(longest >= KEEP_FROM, "longest wait {longest:?}");
        }
    }

    #[test]
    fn stalls_are_given_on_the_fakes_clock() {
        let w = LagWatch::idle();
        let origin = Instant::now();
        w.record(
            origin + Duration::from_millis(100),
            Duration::from_millis(30),
        );
        w.record(
            origin + Duration::from_millis(900),
            Duration::from_millis(250),
        );
        let wall = AgentClock::new(origin, fake_wireserver::clock::TimeScale::WALL);
        assert_eq!(
            w.stalls_since(origin + Duration::from_millis(500), &wall),
            [Stall {
                end_ms: 900,
                len_ms: 250
            }]
        );
        assert_eq!(w.stalls_since(origin, &wall).len(), 2);
        // In agent time at x20 a stall lasts twenty times as long, and ends twenty times later.
        let x20 = AgentClock::new(origin, fake_wireserver::clock::TimeScale::new(20).unwrap());
        assert_eq!(
            w.stalls_since(origin + Duration::from_millis(500), &x20),
            [Stall {
                end_ms: 18_000,
                len_ms: 5_000
            }]
        );
    }

    #[tokio::test]
    async fn a_blocked_runtime_is_seen_as_a_stall() {
        let (w, task) = LagWatch::start();
        let origin = Instant::now();
        tokio::time::sleep(Duration::from_millis(30)).await;
        // Block the runtime's only thread: the watcher cannot wake for 300 ms.
        std::thread::sleep(Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(50)).await;
        task.abort();
        let stalls = w.stalls_since(origin, &AgentClock::new(origin, Default::default()));
        assert!(stalls.iter().any(|s| s.len_ms >= 200), "{stalls:?}");
    }
}
