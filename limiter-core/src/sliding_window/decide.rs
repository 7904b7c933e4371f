//! The CAS loop of [`SlidingWindow`] on its 128-bit word: admitting now or
//! never (a refusal writes nothing), cancelling out of a window's count,
//! and [`Decide`].

use core::time::Duration;

use super::SlidingWindow;
use super::estimate::Counts;
use crate::clock::Clock;
use crate::decision::{Decide, Denial, Grant, Policy};
use crate::error::AcquireError;
use crate::reservation::{Headroom, Reservation, Undo};

impl<C: Clock> SlidingWindow<C> {
    /// Limiter time at the clock reading `now`, `None` past the range.
    #[inline]
    pub(super) fn time(&self, now: u64) -> Option<u64> {
        let t = self.epoch.elapsed(now);
        (t <= self.epoch.limit()).then_some(t)
    }

    /// The decision at the clock reading `clock_now`.
    #[inline]
    pub(super) fn acquire_at(&self, clock_now: u64, n: u32) -> Result<Reservation, AcquireError> {
        self.acquire_with_counts(clock_now, n).map(|(r, _)| r)
    }

    /// The decision at the clock reading `clock_now`, with the [`Headroom`]
    /// it left, computed from the counts its CAS wrote.
    fn acquire_with_headroom(
        &self,
        clock_now: u64,
        n: u32,
    ) -> Result<(Reservation, Headroom), AcquireError> {
        let (reservation, (next, e, lag)) = self.acquire_with_counts(clock_now, n)?;
        let remaining = self.room(next, e);
        let refill_in = if remaining >= self.limit {
            0
        } else {
            self.wait(next, e, remaining + 1).saturating_add(lag)
        };
        Ok((
            reservation,
            Headroom {
                remaining,
                refill_in: Duration::from_nanos(refill_in),
            },
        ))
    }

    /// The decision, with the counts it wrote, the ns into their window and
    /// the lag of a clock that stepped back (see [`Counts::lag`]).
    #[inline]
    fn acquire_with_counts(
        &self,
        clock_now: u64,
        n: u32,
    ) -> Result<(Reservation, (Counts, u64, u64)), AcquireError> {
        if n > self.limit {
            return Err(AcquireError::InsufficientCapacity {
                requested: n,
                burst: self.limit,
            });
        }
        let now = self
            .time(clock_now)
            .ok_or(AcquireError::TimeOutOfRange { now: clock_now })?;
        self.state.update(|word| {
            let (c, e) = Counts::unpack(word).at(now, self.window);
            match self.wait(c, e, n) {
                0 => {
                    // curr + n ≤ limit ≤ u32::MAX by the admission test.
                    let next = Counts {
                        curr: c.curr + n,
                        ..c
                    };
                    let undo = if n == 0 {
                        Undo::Nothing
                    } else {
                        Undo::Window { window: c.window }
                    };
                    Ok((
                        next.pack(),
                        (
                            Reservation {
                                permits: n,
                                // now ≤ limit: converts back without overflow.
                                ready_at: self.epoch.to_clock(now),
                                wait: 0,
                                owner: self.owner,
                                undo,
                            },
                            (next, e, c.lag(now, self.window)),
                        ),
                    ))
                }
                wait => {
                    let wait = wait.saturating_add(c.lag(now, self.window));
                    Err(AcquireError::RateLimited {
                        wait: Duration::from_nanos(wait),
                    })
                }
            }
        })
    }

    /// Takes `n` permits out of the count of `window`, if it still counts.
    pub(super) fn cancel_in(&self, window: u64, n: u32) -> bool {
        // Past the range nothing is decided, so nothing needs giving back.
        let Some(now) = self.time(self.clock.now()) else {
            return false;
        };
        let refunded: Result<(), ()> = self.state.update(|word| {
            let (c, _) = Counts::unpack(word).at(now, self.window);
            let next = if c.window == window {
                Counts {
                    curr: c.curr.checked_sub(n).ok_or(())?,
                    ..c
                }
            } else if window.checked_add(1) == Some(c.window) {
                Counts {
                    prev: c.prev.checked_sub(n).ok_or(())?,
                    ..c
                }
            } else {
                return Err(());
            };
            Ok((next.pack(), ()))
        });
        refunded.is_ok()
    }
}

impl<C: Clock> SlidingWindow<C> {
    /// Grants `n` permits if they conform now, as a reservation that
    /// [`cancel`](SlidingWindow::cancel) can give back; `max_wait` is not
    /// used (see the module docs).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](SlidingWindow::try_acquire_n), even when the
    /// wait is within `max_wait`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let window = SlidingWindow::with_clock(2, Duration::from_secs(1), ManualClock::new())?;
    /// let r = window.reserve_n(2, Duration::MAX)?;
    /// assert!(window.reserve_n(1, Duration::MAX).is_err()); // no future slot
    /// assert!(window.cancel(r));
    /// assert_eq!(window.available(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(&self, n: u32, _max_wait: Duration) -> Result<Reservation, AcquireError> {
        self.acquire_at(self.clock.now(), n)
    }

    /// Takes a reservation's permits back out of their window's count while
    /// that window still counts (the current or the previous one); refuses
    /// another limiter's reservation.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        if reservation.owner != self.owner {
            return false;
        }
        match reservation.undo {
            Undo::Window { window } => self.cancel_in(window, reservation.permits),
            _ => false,
        }
    }
}

/// Exact headroom from the counts the decision wrote; grants only what
/// conforms now, as [`reserve_n`](SlidingWindow::reserve_n) does. The policy is `limit` per
/// `window`: a burst of `limit`, one permit per `window / limit`.
impl<C: Clock> Decide for SlidingWindow<C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        _max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let policy = Policy {
            burst: self.limit,
            interval: Duration::from_nanos(self.window / u64::from(self.limit)),
        };
        match self.acquire_with_headroom(self.clock.now(), cost) {
            Ok((ticket, headroom)) => Ok(Grant {
                wait: Duration::ZERO,
                ticket,
                headroom,
                policy,
            }),
            Err(error) => Err(Denial::refused(error, policy)),
        }
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        SlidingWindow::cancel(self, ticket)
    }
}
