//! [`SlotTimer`]: one timer reused across waits, on the timer a wait's
//! [`Waking`] picks (the precise wake-up or tokio's). Used by every
//! poll-based waiter ([`crate::slot_wait::SlotWait`], the throttled stream)
//! and by the retry loop of [`crate::wait`].

use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::future::Future;

use tokio::time::{Instant, Sleep, sleep_until};

use crate::precise::PreciseSleep;
use crate::wake::Waking;

/// One timer reused across waits, for poll-based waiters (a stream) that
/// cannot hold an `async` block: armed with an absolute deadline per wait.
/// tokio's `Sleep` is allocated on the first wait that uses it and then
/// reset; a precise sleep is registered per wait.
#[derive(Debug, Default)]
pub(crate) struct SlotTimer {
    tokio: Option<Pin<Box<Sleep>>>,
    /// `Some` while the armed wait is on the precise timer.
    precise: Option<PreciseSleep>,
}

impl SlotTimer {
    /// Sets the timer to fire at `deadline`, `wait` from now, on the timer
    /// `wake` picks.
    pub(crate) fn arm(&mut self, wake: Waking, deadline: Instant, wait: Duration) {
        self.precise = wake.precise(deadline, wait);
        if self.precise.is_none() {
            match &mut self.tokio {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.tokio = Some(Box::pin(sleep_until(deadline))),
            }
        }
    }

    /// Polls the armed timer; an unarmed timer is ready.
    pub(crate) fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(precise) = &mut self.precise {
            return Pin::new(precise).poll(cx);
        }
        match &mut self.tokio {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}
