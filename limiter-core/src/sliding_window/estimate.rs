//! The two-counter estimate as pure arithmetic on [`Counts`]: how the
//! counts age at a reading, how many permits fit, and the exact wait until
//! `n` fit. All in `u128`, no floats, no rounding (module docs of
//! [`crate::SlidingWindow`]).

use super::SlidingWindow;
use crate::clock::Clock;

/// The counts of the current window and the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) window: u64,
    pub(super) prev: u32,
    pub(super) curr: u32,
}

impl Counts {
    pub(super) fn unpack(word: u128) -> Counts {
        Counts {
            window: (word >> 64) as u64,
            prev: (word >> 32) as u32,
            curr: word as u32,
        }
    }

    pub(super) fn pack(self) -> u128 {
        (u128::from(self.window) << 64) | (u128::from(self.prev) << 32) | u128::from(self.curr)
    }

    /// The counts as seen at limiter time `now`, and the ns elapsed in their
    /// window.
    pub(super) fn at(self, now: u64, w: u64) -> (Counts, u64) {
        let window = now / w;
        match window.checked_sub(self.window) {
            Some(0) => (self, now % w),
            Some(1) => (
                Counts {
                    window,
                    prev: self.curr,
                    curr: 0,
                },
                now % w,
            ),
            Some(_) => (
                Counts {
                    window,
                    prev: 0,
                    curr: 0,
                },
                now % w,
            ),
            // The clock stepped back before window k: the start of window k.
            None => (self, 0),
        }
    }

    /// Nanoseconds from limiter time `now` until the start of this window:
    /// zero unless the clock stepped back before it (then `at` reads it as
    /// that start).
    pub(super) fn lag(self, now: u64, w: u64) -> u64 {
        (u128::from(self.window) * u128::from(w))
            .saturating_sub(u128::from(now))
            .try_into()
            .unwrap_or(u64::MAX)
    }
}

impl<C: Clock> SlidingWindow<C> {
    /// The largest `n` that counts `c`, `e` ns into their window, admit.
    pub(super) fn room(&self, c: Counts, e: u64) -> u32 {
        // Largest n with prev·(W − e) + (curr + n)·W ≤ limit·W.
        let w = u128::from(self.window);
        let room =
            (u128::from(self.limit) * w).saturating_sub(u128::from(c.prev) * (w - u128::from(e)));
        let n = (room / w).saturating_sub(u128::from(c.curr));
        // n ≤ limit, a u32.
        n as u32
    }

    /// Nanoseconds from the decision until `n ≤ limit` permits conform,
    /// with counts `c` at `e` ns into their window (0 = now).
    pub(super) fn wait(&self, c: Counts, e: u64, n: u32) -> u64 {
        let w = u128::from(self.window);
        let fits = |prev: u32, curr: u32, e: u128| {
            u128::from(prev) * (w - e) + (u128::from(curr) + u128::from(n)) * w
                <= u128::from(self.limit) * w
        };
        let e = u128::from(e);
        if fits(c.prev, c.curr, e) {
            return 0;
        }
        // The earliest offset `x` into a window with counts (prev, curr) at
        // which they fit: prev·(W − x) ≤ (limit − curr − n)·W, or None if not
        // within that window.
        let earliest = |prev: u32, curr: u32| -> Option<u128> {
            let room = u128::from(self.limit).checked_sub(u128::from(curr) + u128::from(n))?;
            if prev == 0 {
                return Some(0);
            }
            let x = w.saturating_sub(room * w / u128::from(prev));
            (x < w).then_some(x)
        };
        // This window, else the next (prev ← curr, curr ← 0), else the one
        // after, when nothing counts any more.
        let offset = match earliest(c.prev, c.curr) {
            Some(x) => x - e,
            None => match earliest(c.curr, 0) {
                Some(x) => (w - e) + x,
                None => 2 * w - e,
            },
        };
        // offset < 2·W ≤ 2^61, a u64.
        offset as u64
    }
}
