//! Starting the pairs in the runner's order, at most `jobs` at a time.
//!
//! Each pair waits for its slot before its task exists. A task that waited in its own first
//! poll started whenever the runtime first polled it: its workers take spawned tasks in batches
//! and poll them side by side, so the seven-profile matrix's longest cases (12 s of the wall's
//! each) started 78 s into a 97 s run, its shortest among the first.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::exec::Stop;

/// Spawns `start(i, stopped)` for each index of `order`, in that order, each once one of
/// `jobs` slots is free, and holds its slot until it ends. `stopped` is the signal that
/// stopped the run before the pair's turn came (it is then to be skipped, not run).
pub async fn spawn_in_order<T, F, Fut>(
    order: &[usize],
    jobs: usize,
    stop: &Stop,
    mut start: F,
) -> Vec<JoinHandle<T>>
where
    F: FnMut(usize, Option<i32>) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let slots = Arc::new(Semaphore::new(jobs.max(1)));
    let mut tasks = Vec::with_capacity(order.len());
    for &i in order {
        let (slot, stopped) = tokio::select! {
            biased;
            sig = stop.stopped() => (None, Some(sig)),
            slot = Arc::clone(&slots).acquire_owned() => (slot.ok(), stop.signal()),
        };
        let work = start(i, stopped);
        tasks.push(tokio::spawn(async move {
            let _slot = slot;
            work.await
        }));
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// One slot, many pairs: they start exactly in the given order (before, a task took its
    /// slot when first polled, and the runtime's two workers polled them out of order).
    #[test]
    fn pairs_start_in_the_given_order() {
        let rt = runtime();
        let (_tx, stop) = Stop::new();
        let order: Vec<usize> = (0..200).rev().collect();
        let started = Arc::new(Mutex::new(Vec::new()));
        rt.block_on(async {
            let tasks = spawn_in_order(&order, 1, &stop, |i, stopped| {
                let started = Arc::clone(&started);
                async move {
                    assert_eq!(stopped, None);
                    started.lock().unwrap().push(i);
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            })
            .await;
            for t in tasks {
                t.await.unwrap();
            }
        });
        assert_eq!(*started.lock().unwrap(), order);
    }

    /// At most `jobs` run at once; once the run is stopped, the pairs not yet started are
    /// told so, and none of them runs. Pairs 3 and 4 hold their slots until pair 5 raises the
    /// stop, so what starts before it is fixed however the machine schedules them.
    #[test]
    fn at_most_jobs_run_and_a_stop_skips_the_rest() {
        let rt = runtime();
        let (tx, stop) = Stop::new();
        let order: Vec<usize> = (0..12).collect();
        let running = Arc::new(Mutex::new((0usize, 0usize)));
        let outcomes = rt.block_on(async {
            let tasks = spawn_in_order(&order, 3, &stop, |i, stopped| {
                let running = Arc::clone(&running);
                let tx = (i == 5).then(|| tx.clone());
                let held_until_stopped = (i == 3 || i == 4).then(|| stop.clone());
                async move {
                    if let Some(sig) = stopped {
                        return Err(sig);
                    }
                    {
                        let mut r = running.lock().unwrap();
                        r.0 += 1;
                        r.1 = r.1.max(r.0);
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    if let Some(tx) = tx {
                        tx.send(Some(15)).unwrap();
                    }
                    if let Some(stop) = held_until_stopped {
                        stop.stopped().await;
                    }
                    running.lock().unwrap().0 -= 1;
                    Ok(i)
                }
            })
            .await;
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        // Pairs 3, 4 and 5 ran together, and never more.
        assert_eq!(running.lock().unwrap().1, 3);
        // Pair 5 raised the stop as it ended: what started before ran, the rest were skipped.
        assert_eq!(outcomes[..6], [Ok(0), Ok(1), Ok(2), Ok(3), Ok(4), Ok(5)]);
        assert!(outcomes[6..].iter().all(|o| *o == Err(15)), "{outcomes:?}");
    }
}
