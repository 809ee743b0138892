//! Locking shared state on the connection path.

use std::sync::{Mutex, MutexGuard};

/// Locks without ever panicking: a panic elsewhere must not take the fake down.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
