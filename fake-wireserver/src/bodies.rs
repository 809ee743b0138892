//! The memory the request bodies in progress hold together, bounded per fake.
//!
//! Each connection's body is bounded by `max_body` (1 MiB by default) and each listener by its
//! connection cap (1,024): without a shared bound, a client that sends all but the last byte
//! of a 1 MiB body on every connection holds a GiB of the fake's memory until the read
//! timeouts. A body is reserved whole as soon as its size is known (its `Content-Length`; each
//! chunk's size line), before any of it is read; a reservation that does not fit is refused
//! (`http.over-budget`: 503, closed), and what a connection reserved stays reserved until its
//! request's answer is written (a scripted hang holds its body as long as it hangs).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of request bodies in progress one fake holds at most (or `max_body`, when larger: a
/// single body of the allowed size always fits).
pub const BODY_BUDGET: usize = 64 << 20;

/// The bytes reserved by every connection of one fake.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    held: AtomicUsize,
    limit: usize,
}

impl BodyBudget {
    pub(crate) fn new(max_body: usize) -> Self {
        BodyBudget {
            held: AtomicUsize::new(0),
            limit: BODY_BUDGET.max(max_body),
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// An empty reservation for one request.
    pub(crate) fn hold(&self) -> Held<'_> {
        Held {
            budget: self,
            bytes: 0,
        }
    }
}

/// What one request reserved; given back when dropped.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    budget: &'a BodyBudget,
    bytes: usize,
}

impl Held<'_> {
    /// Grows this reservation to `total` bytes. `Err(others)`: it does not fit beside the
    /// `others` bytes the other requests hold (nothing more is reserved).
    pub(crate) fn grow_to(&mut self, total: usize) -> Result<(), usize> {
        let more = total.saturating_sub(self.bytes);
        let limit = self.budget.limit;
        self.budget
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(more).filter(|&after| after <= limit)
            })
            .map_err(|held| held - self.bytes)?;
        self.bytes += more;
        Ok(())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_share_the_budget_and_give_it_back_when_dropped() {
        let budget = BodyBudget::new(1024);
        let mut a = budget.hold();
        a.grow_to(BODY_BUDGET - 10).unwrap();
        let mut b = budget.hold();
        assert_eq!(b.grow_to(11), Err(BODY_BUDGET - 10));
        b.grow_to(10).unwrap();
        // Growing to what is already held reserves nothing more.
        b.grow_to(10).unwrap();
        drop(a);
        b.grow_to(BODY_BUDGET).unwrap();
        drop(b);
        assert_eq!(budget.held.load(Ordering::Acquire), 0);
    }

    #[test]
    fn one_body_of_the_allowed_size_always_fits() {
        let budget = BodyBudget::new(BODY_BUDGET * 2);
        budget.hold().grow_to(BODY_BUDGET * 2).unwrap();
        assert_eq!(budget.limit(), BODY_BUDGET * 2);
    }
}
