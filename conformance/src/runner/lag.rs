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
//!
//! An agent the machine keeps off the CPU sends late too, though wirecheck kept time (a busy
//! neighbour beside the bundled reporter: its attempt 68 ms past its budget with no lag of
//! wirecheck's own). So each tick reads the run-queue delay of every thread of every agent's
//! process tree as well (wirecheck's children, found through `/proc/*/task/*/children`), and
//! keeps that stall for that agent's cases only. A tree that itself used half a CPU in the tick
//! or more, or kept two threads or more wanting a CPU all along, is the load, not its victim:
//! its waits are not a stall, so an agent cannot make its own lateness "not judged" by
//! spinning (except while it forks its spinners: they are not known yet). They are kept apart
//! as its own work held back (`at_work`); with its time on a CPU they are its work
//! (`working`), which only its exit may be excused by, and by no more than its own start-up
//! (`checks::behaviour::budget`). The
//! `/proc` reads run on a thread of their own, never on a runtime worker serving the fakes.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Threads read per agent tree and tick at most (a fork bomb is not walked to its end).
const MAX_TREE_THREADS: usize = 256;

/// What one look saw: the longest wait of wirecheck's own threads, and of each agent tree's
/// (by the PID of its root, wirecheck's child).
#[derive(Debug, Default, PartialEq)]
struct Look {
    runner: Duration,
    agents: Vec<(u32, TreeWait)>,
}

/// One agent tree's waits for a CPU since the last look.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct TreeWait {
    /// The longest stretch one of its threads has been kept waiting (a late event).
    longest: Duration,
    /// The most one of its threads waited in the look, short waits added up (work held back:
    /// CPU-bound work such as an exit is late by the sum of its thread's waits, many short
    /// ones included; one thread's, not all of them added, which could exceed the look).
    widest: Duration,
    /// The tree was itself the load in this look (it ran half a CPU or more, or kept two
    /// threads wanting one): its waits are not a stall, only its own CPU-bound work (an exit)
    /// held back.
    at_work: bool,
    /// How long it worked in the look: its time on a CPU, and its waits for one while it was
    /// the load (at most the look): CPU-bound work such as an exit, which agent time magnifies.
    working: Duration,
}

/// One thread's scheduler statistics at the last look.
#[derive(Debug, Clone, Copy)]
struct ThreadStat {
    /// Total run-queue wait, ns.
    waited: u64,
    /// The wait of the looks in a row in which it waited, ns.
    streak: u64,
    /// Total time on a CPU, ns.
    ran: u64,
}

/// How long each thread of this process and of its agents' trees has been waiting for a
/// CPU, look after look.
#[derive(Debug, Default)]
struct RunQueueWaits {
    last: HashMap<u32, ThreadStat>,
    /// When the last look was.
    looked: Option<Instant>,
    /// When each agent tree (by its root's PID) was last the load.
    loaded: HashMap<u32, Instant>,
}

/// How long a tree that was the load stays the load: the kernel adds a thread's wait only once
/// it runs again, so a spinner kept waiting through a whole look shows none in it, and a look
/// of a spinning tree can look idle.
const LOAD_MEMORY: Duration = Duration::from_millis(100);

impl RunQueueWaits {
    /// The longest stretch any thread has been kept waiting for a CPU, ending now (zero where
    /// the kernel keeps no scheduler statistics), wirecheck's own and each agent tree's: a
    /// thread that waited in each of the last ticks was held back for their sum.
    fn look(&mut self) -> Look {
        let elapsed = self.elapsed();
        let mut seen = HashMap::with_capacity(self.last.len());
        let own = Path::new("/proc/self/task");
        let runner = self.threads(own, elapsed, &mut seen).longest;
        let now = Instant::now();
        let agents = children(own)
            .into_iter()
            .map(|root| {
                let wait = self.tree(root, elapsed, &mut seen);
                let was_load = self
                    .loaded
                    .get(&root)
                    .is_some_and(|at| now.duration_since(*at) < LOAD_MEMORY);
                if wait.at_work {
                    self.loaded.insert(root, now);
                }
                (
                    root,
                    TreeWait {
                        at_work: wait.at_work || was_load,
                        ..wait
                    },
                )
            })
            .collect();
        self.loaded
            .retain(|_, at| now.duration_since(*at) < LOAD_MEMORY);
        self.last = seen;
        Look {
            runner: Duration::from_nanos(runner),
            agents,
        }
    }

    /// The wall time since the last look, ns (zero at the first).
    fn elapsed(&mut self) -> u64 {
        let now = Instant::now();
        self.looked
            .replace(now)
            .map_or(0, |then| now.duration_since(then).as_nanos() as u64)
    }

    /// The longest and the widest waits in the tree of processes under `root`, `at_work` when
    /// the tree is the load itself, having run for half a CPU's worth of the time since the last
    /// look or more, or kept two threads or more wanting a CPU all along (an agent waiting for
    /// its next attempt needs a few per cent of a CPU and one thread).
    fn tree(&self, root: u32, elapsed: u64, seen: &mut HashMap<u32, ThreadStat>) -> TreeWait {
        let mut pending = vec![root];
        let mut longest = 0;
        let mut widest = 0;
        let mut busy = 0;
        let mut ran = 0;
        let mut threads = 0;
        while let Some(pid) = pending.pop() {
            if threads >= MAX_TREE_THREADS {
                break;
            }
            let tasks = Path::new("/proc").join(pid.to_string()).join("task");
            let read = self.threads(&tasks, elapsed, seen);
            longest = longest.max(read.longest);
            widest = widest.max(read.widest);
            busy += read.busy;
            ran += read.ran;
            threads += read.threads;
            pending.extend(children(&tasks));
        }
        // The load itself: it ran half a CPU or more, or two of its threads or more wanted a
        // CPU (ran or waited) through the whole look (on a machine busy with others a spinning
        // tree gets little CPU, but its spinners never stop wanting one; an agent's threads
        // woken together at its exit want one briefly).
        let at_work = elapsed > 0 && (ran * 2 >= elapsed || busy >= 2);
        let held = if at_work { widest } else { 0 };
        TreeWait {
            longest: Duration::from_nanos(longest),
            widest: Duration::from_nanos(widest),
            at_work,
            working: Duration::from_nanos((ran + held).min(elapsed)),
        }
    }

    /// The threads under one `task` folder: their longest wait and their time on a CPU since
    /// the last look.
    fn threads(&self, tasks: &Path, elapsed: u64, seen: &mut HashMap<u32, ThreadStat>) -> Threads {
        let mut read = Threads::default();
        let Ok(entries) = std::fs::read_dir(tasks) else {
            return read;
        };
        for task in entries.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            let Some((ran, waited)) = schedstat(&task.path()) else {
                continue;
            };
            let before = self.last.get(&tid);
            let streak = before.map_or(0, |b| continued_wait(b, waited, elapsed));
            read.longest = read.longest.max(streak);
            let delta = before.map_or(0, |b| waited.saturating_sub(b.waited));
            read.widest = read.widest.max(delta);
            let wanted = before.map_or(0, |b| ran.saturating_sub(b.ran)) + delta;
            if elapsed > 0 && wanted * 10 >= elapsed * 9 {
                read.busy += 1;
            }
            // A thread new since the last look ran all its life in it (or just before): its
            // whole time counts, so a tree that starts by forking spinners is the load from
            // its first look on.
            read.ran += before.map_or(ran, |b| ran.saturating_sub(b.ran));
            read.threads += 1;
            seen.insert(
                tid,
                ThreadStat {
                    waited,
                    streak,
                    ran,
                },
            );
        }
        read
    }
}

/// What [`RunQueueWaits::threads`] read.
#[derive(Debug, Default)]
struct Threads {
    longest: u64,
    widest: u64,
    /// Threads that wanted a CPU through (nearly) the whole look.
    busy: usize,
    ran: u64,
    threads: usize,
}

/// A thread's wait streak now, from its statistics at the last look: a thread that waited
/// through (nearly) the whole time since was held back all along, its wait goes on; many short
/// waits in a row are not one long one (each delayed what it delayed by at most its own
/// length).
fn continued_wait(before: &ThreadStat, waited: u64, elapsed: u64) -> u64 {
    let delta = waited.saturating_sub(before.waited);
    if delta < KEEP_FROM.as_nanos() as u64 {
        0
    } else if delta * 10 >= elapsed * 9 {
        before.streak + delta
    } else {
        delta
    }
}

/// A thread's "<on-cpu ns> <run-queue wait ns> <time slices>".
fn schedstat(task: &Path) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(task.join("schedstat")).ok()?;
    let mut fields = s.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// The child processes of every thread under one `task` folder.
fn children(tasks: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(tasks) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Sets its flag when dropped: the watcher's task, aborted, stops its thread.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One recorded stall: when the watcher saw it end, how long, and whose (`None`: the
/// runner's, every case's; `Some(pid)`: the agent tree under that PID's).
type Sample = (Instant, Duration, Option<u32>);

/// The recorded lag samples of one run.
#[derive(Debug, Clone)]
pub struct LagWatch {
    samples: Arc<Mutex<VecDeque<Sample>>>,
    /// Each agent tree's widest wait per look (`TreeWait::widest`), kept apart: a sum of short
    /// waits delays work, not an event.
    waited: Arc<Mutex<VecDeque<Sample>>>,
    /// Each agent tree's work per look (`TreeWait::working`).
    working: Arc<Mutex<VecDeque<Sample>>>,
}

impl LagWatch {
    /// Starts watching on the current runtime until the returned handle is aborted: a task
    /// that measures how late the runtime wakes it, and a thread of its own that reads the
    /// run-queue waits (blocking `/proc` reads, never on a worker that serves fakes).
    pub fn start() -> (LagWatch, tokio::task::JoinHandle<()>) {
        let watch = LagWatch::idle();
        let stop = Arc::new(AtomicBool::new(false));
        let recorder = watch.clone();
        let stopped = Arc::clone(&stop);
        // Without the thread (none could be started) only the runtime's own lag is seen.
        let _looker = std::thread::Builder::new()
            .name("wirecheck-lag".into())
            .spawn(move || recorder.read_waits(&stopped));
        let recorder = watch.clone();
        let task = tokio::spawn(async move {
            let _stop = StopOnDrop(stop);
            loop {
                let before = Instant::now();
                tokio::time::sleep(TICK).await;
                let woke = Instant::now();
                recorder.keep(woke, woke.duration_since(before).saturating_sub(TICK), None);
            }
        });
        (watch, task)
    }

    /// Looks at the run-queue waits every tick until `stop` is set.
    fn read_waits(&self, stop: &AtomicBool) {
        let mut waits = RunQueueWaits::default();
        waits.look();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(TICK);
            let look = waits.look();
            let now = Instant::now();
            self.keep(now, look.runner, None);
            for (pid, wait) in look.agents {
                keep_wait(&self.working, now, wait.working, pid);
                if !wait.at_work {
                    self.keep(now, wait.longest, Some(pid));
                    keep_wait(&self.waited, now, wait.widest, pid);
                }
            }
        }
    }

    /// A watch that saw nothing (for runs without a watcher, e.g. tests of the judging).
    pub fn idle() -> LagWatch {
        LagWatch {
            samples: Arc::default(),
            waited: Arc::default(),
            working: Arc::default(),
        }
    }

    /// Records one sample of the runner's (for tests).
    pub fn record(&self, at: Instant, lag: Duration) {
        self.keep(at, lag, None);
    }

    /// Keeps a sample that can matter to a verdict.
    fn keep(&self, at: Instant, lag: Duration, whose: Option<u32>) {
        if lag < KEEP_FROM {
            return;
        }
        let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() == MAX_SAMPLES {
            s.pop_front();
        }
        s.push_back((at, lag, whose));
    }

    /// The widest waits for a CPU of the agents under `agents` (their PIDs), per look, that
    /// ended after `from`, on the fake's `clock` (`Observation::agent_waited`).
    pub fn waited_since(&self, from: Instant, clock: &AgentClock, agents: &[u32]) -> Vec<Stall> {
        let w = self.waited.lock().unwrap_or_else(|e| e.into_inner());
        samples_since(&w, from, clock, agents)
    }

    /// How long the agents under `agents` worked per look (`Observation::agent_working`), as
    /// [`LagWatch::waited_since`].
    pub fn working_since(&self, from: Instant, clock: &AgentClock, agents: &[u32]) -> Vec<Stall> {
        let w = self.working.lock().unwrap_or_else(|e| e.into_inner());
        samples_since(&w, from, clock, agents)
    }

    /// The stalls that ended after `from` of the runner and of the agents under `agents`
    /// (their PIDs), on the fake's `clock`: in agent time, where a stall of the wall clock
    /// lasts `scale` times as long.
    pub fn stalls_since(&self, from: Instant, clock: &AgentClock, agents: &[u32]) -> Vec<Stall> {
        let s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples_since(&s, from, clock, agents)
    }
}

/// Keeps an agent tree's widest wait of one look in `waits`, when it could matter.
fn keep_wait(waits: &Mutex<VecDeque<Sample>>, at: Instant, widest: Duration, pid: u32) {
    if widest < Duration::from_millis(1) {
        return;
    }
    let mut w = waits.lock().unwrap_or_else(|e| e.into_inner());
    if w.len() == MAX_SAMPLES {
        w.pop_front();
    }
    w.push_back((at, widest, Some(pid)));
}

/// The samples after `from` that are the runner's or one of `agents`', on the fake's clock.
fn samples_since(
    samples: &VecDeque<Sample>,
    from: Instant,
    clock: &AgentClock,
    agents: &[u32],
) -> Vec<Stall> {
    samples
        .iter()
        .filter(|(woke, _, whose)| *woke >= from && whose.is_none_or(|pid| agents.contains(&pid)))
        .map(|(woke, lag, _)| Stall {
            end_ms: clock.ms(*woke),
            len_ms: lag.mul_f64(clock.scale().factor()).as_millis() as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that load the machine, one at a time (each measures what the load does).
    static MACHINE: Mutex<()> = Mutex::new(());

    /// Spinning threads of this process, four per core, until the returned stop is set.
    fn spinners() -> (
        Arc<std::sync::atomic::AtomicBool>,
        Vec<std::thread::JoinHandle<()>>,
    ) {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..4 * cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        (stop, threads)
    }

    /// A child process in a group of its own, killed with its group when dropped.
    struct Child(std::process::Child);

    impl Child {
        fn spawn(program: &str, args: &[&str]) -> Child {
            use std::os::unix::process::CommandExt as _;
            Child(
                std::process::Command::new(program)
                    .args(args)
                    .process_group(0)
                    .spawn()
                    .unwrap(),
            )
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            // SAFETY: a plain kill(2) of the child's own process group.
            unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
            let _ = self.0.wait();
        }
    }

    /// What each look saw of the tree under `pid`, for `how_long`.
    fn watch_tree(pid: u32, how_long: Duration) -> Vec<TreeWait> {
        let mut waits = RunQueueWaits::default();
        waits.look();
        let until = Instant::now() + how_long;
        let mut seen = Vec::new();
        while Instant::now() < until {
            std::thread::sleep(TICK);
            let look = waits.look();
            seen.extend(
                look.agents
                    .iter()
                    .filter(|(p, _)| *p == pid)
                    .map(|(_, w)| *w),
            );
        }
        seen
    }

    /// An agent the machine keeps off the CPU (a child that wakes every 5 ms, beside four
    /// spinners per core) is seen waiting, as its own tree's stall: the stall reaches that
    /// agent's cases and no other agent's.
    #[test]
    fn an_agent_kept_waiting_for_a_cpu_is_its_own_cases_stall() {
        let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        let waker = Child::spawn(
            "perl",
            &["-e", "select(undef, undef, undef, 0.005) while 1"],
        );
        let (stop, threads) = spinners();
        let seen = watch_tree(waker.0.id(), Duration::from_secs(2));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(!seen.is_empty(), "the child's tree was never found");
        assert!(seen.iter().all(|w| !w.at_work), "{seen:?}");
        let longest = seen.iter().map(|w| w.longest).max().unwrap_or_default();
        assert!(longest >= KEEP_FROM, "longest wait {longest:?}");

        let w = LagWatch::idle();
        let origin = Instant::now();
        w.keep(origin, Duration::from_millis(40), Some(waker.0.id()));
        let clock = AgentClock::new(origin, Default::default());
        assert_eq!(w.stalls_since(origin, &clock, &[waker.0.id()]).len(), 1);
        assert_eq!(w.stalls_since(origin, &clock, &[waker.0.id() + 1]), []);
    }

    /// An agent that is itself the load (eight spinning processes per core) waits for a CPU
    /// too, but that wait is not a stall: a slow agent cannot make its own lateness "not
    /// judged" by spinning. Its looks are its work's (`at_work`), the waits kept for its exit.
    #[test]
    fn an_agent_that_is_the_load_is_not_stalled_by_it() {
        let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let script = format!(
            "for i in $(seq {}); do (while :; do :; done) & done; wait",
            8 * cores
        );
        let load = Child::spawn("sh", &["-c", &script]);
        // Judged once its spinners exist: while it forks them, they are not known yet.
        let pid = load.0.id();
        let formed = Instant::now() + Duration::from_secs(10);
        while children(&Path::new("/proc").join(pid.to_string()).join("task")).len() < 8 * cores {
            assert!(Instant::now() < formed, "the spinners never started");
            std::thread::sleep(TICK);
        }
        let seen = watch_tree(pid, Duration::from_secs(1));
        assert!(!seen.is_empty(), "the child's tree was never found");
        assert!(
            seen.iter().all(|w| w.at_work || w.longest.is_zero()),
            "the spinning tree was called stalled: {seen:?}"
        );
        if Path::new("/proc/self/schedstat").exists() {
            assert!(seen.iter().all(|w| w.at_work), "{seen:?}");
            assert!(seen.iter().any(|w| !w.widest.is_zero()), "{seen:?}");
        }
    }

    /// A thread the machine keeps off the CPU (four spinners per core) is seen waiting, though
    /// it never sleeps late itself.
    #[test]
    fn a_thread_kept_waiting_for_a_cpu_is_seen() {
        let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        let (stop, spinners) = spinners();
        let mut waits = RunQueueWaits::default();
        waits.look();
        let mut longest = Duration::ZERO;
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            std::thread::sleep(TICK);
            longest = longest.max(waits.look().runner);
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
            w.stalls_since(origin + Duration::from_millis(500), &wall, &[]),
            [Stall {
                end_ms: 900,
                len_ms: 250
            }]
        );
        assert_eq!(w.stalls_since(origin, &wall, &[]).len(), 2);
        // In agent time at x20 a stall lasts twenty times as long, and ends twenty times later.
        let x20 = AgentClock::new(origin, fake_wireserver::clock::TimeScale::new(20).unwrap());
        assert_eq!(
            w.stalls_since(origin + Duration::from_millis(500), &x20, &[]),
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
        let stalls = w.stalls_since(origin, &AgentClock::new(origin, Default::default()), &[]);
        assert!(stalls.iter().any(|s| s.len_ms >= 200), "{stalls:?}");
    }
}
