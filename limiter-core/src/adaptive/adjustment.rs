//! [`Adjustment`]: what the last adjustment did and why, and the seqlock that
//! publishes it to readers without a lock.
//!
//! Only the thread holding the interval claim writes (so there is one writer
//! at a time); any thread may read. Every field is an atomic, so a reader
//! racing the writer reads no torn *value*, only possibly a mix of two
//! decisions, which the sequence check detects: the writer makes `seq` odd,
//! writes the fields, makes it even again; a reader retries unless it saw
//! the same even `seq` before and after reading (Boehm's seqlock with
//! fences). `seq / 2` is the number of decisions made.

use core::time::Duration;

use super::controller::Reason;
use crate::sync::{AtomicU32, AtomicU64, Ordering, fence, spin_hint};

/// One adjustment: the rate before and after, the policy's proposal and
/// reason, and what the app-limited guard saw.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Adjustment {
    /// When it was made, in the limiter clock's nanoseconds.
    pub at: u64,
    /// The rate before, in permits per second.
    pub previous_rate: f64,
    /// What the policy proposed, before clamping and the guard.
    pub proposed_rate: f64,
    /// The rate in force after it.
    pub rate: f64,
    /// Why the policy proposed what it did.
    pub reason: Reason,
    /// Whether the app-limited guard refused a raise (the limiter admitted
    /// less than half of what the rate allowed in the interval).
    pub app_limited: bool,
    /// Permits admitted in the interval.
    pub admitted: u64,
    /// Permits the rate allowed in the interval: `rate · elapsed`, rounded
    /// down.
    pub allowed: u64,
}

/// `Reason` as a code and a payload word.
fn encode(reason: Reason) -> (u32, u64) {
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    match reason {
        Reason::LatencyAbove { observed } => (1, nanos(observed)),
        Reason::LatencyBelow { observed } => (2, nanos(observed)),
        Reason::LatencyWithin { observed } => (3, nanos(observed)),
        Reason::Dropped { count } => (4, count),
        Reason::LoadHigh { load } => (5, load.to_bits()),
        Reason::LoadLow { load } => (6, load.to_bits()),
        Reason::LoadNormal { load } => (7, load.to_bits()),
        Reason::NoSignal => (0, 0),
    }
}

fn decode(code: u32, payload: u64) -> Reason {
    let observed = Duration::from_nanos(payload);
    let load = f64::from_bits(payload);
    match code {
        1 => Reason::LatencyAbove { observed },
        2 => Reason::LatencyBelow { observed },
        3 => Reason::LatencyWithin { observed },
        4 => Reason::Dropped { count: payload },
        5 => Reason::LoadHigh { load },
        6 => Reason::LoadLow { load },
        7 => Reason::LoadNormal { load },
        _ => Reason::NoSignal,
    }
}

/// The last decision, published by a seqlock of atomics.
#[derive(Debug)]
pub(crate) struct AdjustmentLog {
    seq: AtomicU64,
    at: AtomicU64,
    previous: AtomicU64,
    proposed: AtomicU64,
    rate: AtomicU64,
    /// Reason code, with bit 31 for `app_limited`.
    code: AtomicU32,
    payload: AtomicU64,
    admitted: AtomicU64,
    allowed: AtomicU64,
}

const APP_LIMITED: u32 = 1 << 31;

impl AdjustmentLog {
    pub(crate) fn new() -> AdjustmentLog {
        AdjustmentLog {
            seq: AtomicU64::new(0),
            at: AtomicU64::new(0),
            previous: AtomicU64::new(0),
            proposed: AtomicU64::new(0),
            rate: AtomicU64::new(0),
            code: AtomicU32::new(0),
            payload: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
        }
    }

    /// Publishes `d`. The caller holds the interval claim: one writer.
    pub(crate) fn write(&self, d: &Adjustment) {
        // Relaxed: only claim holders write seq, and the claim's
        // acquire/release orders them.
        let seq = self.seq.load(Ordering::Relaxed);
        // Relaxed store then a release fence: no field write below can be
        // seen by a reader that does not also see the odd seq.
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let (code, payload) = encode(d.reason);
        let code = code | if d.app_limited { APP_LIMITED } else { 0 };
        // Relaxed: published by the release store of the even seq below.
        self.at.store(d.at, Ordering::Relaxed);
        self.previous
            .store(d.previous_rate.to_bits(), Ordering::Relaxed);
        self.proposed
            .store(d.proposed_rate.to_bits(), Ordering::Relaxed);
        self.rate.store(d.rate.to_bits(), Ordering::Relaxed);
        self.code.store(code, Ordering::Relaxed);
        self.payload.store(payload, Ordering::Relaxed);
        self.admitted.store(d.admitted, Ordering::Relaxed);
        self.allowed.store(d.allowed, Ordering::Relaxed);
        // Release: a reader that acquires this seq sees every field above.
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// How many decisions were published.
    pub(crate) fn count(&self) -> u64 {
        // Acquire: pairs with the writer's release of the even seq.
        self.seq.load(Ordering::Acquire) / 2
    }

    /// The last decision, `None` before the first.
    pub(crate) fn read(&self) -> Option<Adjustment> {
        loop {
            // Acquire: if even, the fields of that decision are visible.
            let before = self.seq.load(Ordering::Acquire);
            if before == 0 {
                return None;
            }
            if before % 2 == 1 {
                spin_hint();
                continue;
            }
            // Relaxed: validated by the seq check after the acquire fence.
            let code = self.code.load(Ordering::Relaxed);
            let d = Adjustment {
                at: self.at.load(Ordering::Relaxed),
                previous_rate: f64::from_bits(self.previous.load(Ordering::Relaxed)),
                proposed_rate: f64::from_bits(self.proposed.load(Ordering::Relaxed)),
                rate: f64::from_bits(self.rate.load(Ordering::Relaxed)),
                reason: decode(code & !APP_LIMITED, self.payload.load(Ordering::Relaxed)),
                app_limited: code & APP_LIMITED != 0,
                admitted: self.admitted.load(Ordering::Relaxed),
                allowed: self.allowed.load(Ordering::Relaxed),
            };
            // Acquire fence: the field loads above happen before the seq
            // re-load, so a writer that started meanwhile changes seq.
            fence(Ordering::Acquire);
            // Relaxed: ordered by the fence.
            if self.seq.load(Ordering::Relaxed) == before {
                return Some(d);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips() {
        let ms = Duration::from_millis(7);
        for reason in [
            Reason::LatencyAbove { observed: ms },
            Reason::LatencyBelow { observed: ms },
            Reason::LatencyWithin { observed: ms },
            Reason::Dropped { count: 3 },
            Reason::LoadHigh { load: 0.9 },
            Reason::LoadLow { load: 0.1 },
            Reason::LoadNormal { load: 0.5 },
            Reason::NoSignal,
        ] {
            let (code, payload) = encode(reason);
            assert_eq!(decode(code, payload), reason);
        }
    }

    #[test]
    fn the_log_holds_the_last_decision() {
        let log = AdjustmentLog::new();
        assert_eq!(log.read(), None);
        let d = Adjustment {
            at: 5,
            previous_rate: 1000.0,
            proposed_rate: 1100.0,
            rate: 1000.0,
            reason: Reason::LatencyBelow {
                observed: Duration::from_millis(1),
            },
            app_limited: true,
            admitted: 10,
            allowed: 1000,
        };
        log.write(&d);
        log.write(&Adjustment { at: 6, ..d });
        assert_eq!(log.read(), Some(Adjustment { at: 6, ..d }));
        assert_eq!(log.count(), 2);
    }
}
