//! The wait queue: who waits for a permit, in which order, and who has been
//! handed one.
//!
//! Lives behind the limiter's mutex; every method here runs with that lock
//! held. A waiter is a number (its ticket, unique per limiter) and the
//! waker of the task that waits. When a permit is free for a waiter, the
//! lock holder takes it on the state word by CAS and moves the ticket from
//! `waiting` to `granted`, with the in-flight count the permit was admitted
//! at; the waiting task finds it there on its next poll. A ticket is in at
//! most one of the two. A waiter that goes away removes its ticket: from
//! `waiting` (it loses nothing, it held nothing) or from `granted` (it
//! releases the permit it was handed, so nothing is lost either).
//!
//! Order: [`QueueOrder::Fifo`] serves the oldest ticket first,
//! [`QueueOrder::Lifo`] the newest (under overload the newest waiter is the
//! one whose caller is still likely to be waiting for the answer).

use std::collections::BTreeMap;
use std::task::Waker;

/// Which waiter a freed permit goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueOrder {
    /// The one that has waited longest (first in, first out).
    #[default]
    Fifo,
    /// The one that arrived last (last in, first out): under sustained
    /// overload the oldest waiters time out anyway, and serving the newest
    /// keeps the latency of the requests served low.
    Lifo,
}

#[derive(Debug)]
pub(crate) struct Queue {
    waiting: BTreeMap<u64, Waker>,
    /// Tickets handed a permit, with the in-flight count at the handing.
    granted: Vec<(u64, u32)>,
    next_ticket: u64,
    capacity: usize,
    order: QueueOrder,
}

impl Queue {
    pub(crate) fn new(capacity: usize, order: QueueOrder) -> Queue {
        Queue {
            waiting: BTreeMap::new(),
            granted: Vec::new(),
            next_ticket: 0,
            capacity,
            order,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn order(&self) -> QueueOrder {
        self.order
    }

    /// A new capacity and order. Waiters already queued stay (a smaller
    /// capacity refuses newcomers until the queue is below it); the order
    /// applies from the next hand-off.
    pub(crate) fn reconfigure(&mut self, capacity: usize, order: QueueOrder) {
        self.capacity = capacity;
        self.order = order;
    }

    /// Waiters not yet handed a permit.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Adds a waiter, or `None` when the queue is full.
    pub(crate) fn push(&mut self, waker: Waker) -> Option<u64> {
        if self.waiting.len() >= self.capacity {
            return None;
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting.insert(ticket, waker);
        Some(ticket)
    }

    /// Hands a permit (admitted at `in_flight`) to the next waiter in the
    /// queue's order and wakes it. The caller has already taken the permit on
    /// the state word and knows the queue is not empty.
    pub(crate) fn grant_next(&mut self, in_flight: u32) {
        let next = match self.order {
            QueueOrder::Fifo => self.waiting.pop_first(),
            QueueOrder::Lifo => self.waiting.pop_last(),
        };
        if let Some((ticket, waker)) = next {
            self.granted.push((ticket, in_flight));
            waker.wake();
        }
    }

    /// Takes the permit handed to `ticket`, if any (its in-flight count).
    pub(crate) fn take_grant(&mut self, ticket: u64) -> Option<u32> {
        let i = self.granted.iter().position(|&(t, _)| t == ticket)?;
        Some(self.granted.swap_remove(i).1)
    }

    /// Replaces the waker of a waiting ticket (a poll from another task).
    pub(crate) fn update_waker(&mut self, ticket: u64, waker: &Waker) {
        if let Some(w) = self.waiting.get_mut(&ticket)
            && !w.will_wake(waker)
        {
            *w = waker.clone();
        }
    }

    /// Removes a waiting ticket; `false` if it was not waiting.
    pub(crate) fn remove(&mut self, ticket: u64) -> bool {
        self.waiting.remove(&ticket).is_some()
    }
}
