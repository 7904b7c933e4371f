//! Model check of the adaptive limiter's interval claim: recording calls
//! that race across the end of an interval adjust the rate exactly once,
//! adjustments never overlap, and a reader of the last decision never sees
//! a torn one.
#![cfg(loom)]

use core::time::Duration;

use limiter_core::{
    ManualClock, adaptive::AdaptiveBuilder, adaptive::Completion, adaptive::Proposal,
    adaptive::RateController, adaptive::Reason,
};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::thread;
use loom_tests::check;

/// A policy that halves the rate and counts its proposals, failing if two
/// ever overlap.
#[derive(Debug, Default)]
struct Halving {
    inside: AtomicU32,
    proposals: AtomicU32,
}

impl RateController for Halving {
    fn interval(&self) -> Duration {
        Duration::from_nanos(10)
    }
    fn observe(&self, _latency: Duration, _outcome: Completion) {}
    fn propose(&self, current: f64) -> Proposal {
        assert_eq!(self.inside.fetch_add(1, Ordering::SeqCst), 0, "overlap");
        self.proposals.fetch_add(1, Ordering::SeqCst);
        self.inside.fetch_sub(1, Ordering::SeqCst);
        Proposal {
            rate: current / 2.0,
            reason: Reason::NoSignal,
        }
    }
}

#[test]
fn racing_recorders_adjust_an_interval_once() {
    check(
        "2 x record across the interval end",
        &["adjusted once"],
        || {
            // Built at 0 ns, recorded at 10 ns: the first interval is over.
            let clock = ManualClock::new();
            let adaptive = AdaptiveBuilder::with_clock(Halving::default(), clock.clone())
                .min_rate(1.0)
                .max_rate(1_000.0)
                .build()
                .unwrap();
            clock.set(10);
            let adaptive = Arc::new(adaptive);
            let recorders: Vec<_> = (0..2)
                .map(|_| {
                    let a = adaptive.clone();
                    thread::spawn(move || a.record(Duration::from_nanos(1)))
                })
                .collect();
            for r in recorders {
                r.join().unwrap();
            }
            assert_eq!(adaptive.policy().proposals.load(Ordering::SeqCst), 1);
            assert_eq!(adaptive.decisions(), 1);
            assert_eq!(adaptive.current_rate(), 500.0);
            "adjusted once".to_string()
        },
    );
}

#[test]
fn a_reader_sees_no_decision_or_a_whole_one() {
    check("record vs last_decision", &["none", "whole"], || {
        let clock = ManualClock::new();
        let adaptive = AdaptiveBuilder::with_clock(Halving::default(), clock.clone())
            .min_rate(1.0)
            .max_rate(1_000.0)
            .build()
            .unwrap();
        clock.set(10);
        let adaptive = Arc::new(adaptive);
        let a = adaptive.clone();
        let recorder = thread::spawn(move || a.record(Duration::from_nanos(1)));
        let a = adaptive.clone();
        let reader = thread::spawn(move || a.last_decision());
        recorder.join().unwrap();
        match reader.join().unwrap() {
            None => "none".to_string(),
            Some(d) => {
                assert_eq!((d.previous_rate, d.rate, d.at), (1_000.0, 500.0, 10));
                "whole".to_string()
            }
        }
    });
}

#[test]
fn a_reader_that_sees_the_new_rate_sees_its_quota() {
    check("record vs current_rate", &["old rate", "new rate"], || {
        let clock = ManualClock::new();
        let adaptive = AdaptiveBuilder::with_clock(Halving::default(), clock.clone())
            .min_rate(1.0)
            .max_rate(1_000.0)
            .build()
            .unwrap();
        clock.set(10);
        let adaptive = Arc::new(adaptive);
        let a = adaptive.clone();
        let recorder = thread::spawn(move || a.record(Duration::from_nanos(1)));
        let a = adaptive.clone();
        let reader = thread::spawn(move || {
            let rate = a.current_rate();
            (rate, a.limiter().quota().period_nanos())
        });
        recorder.join().unwrap();
        match reader.join().unwrap() {
            (1_000.0, _) => "old rate".to_string(),
            (rate, period) => {
                // 500 permits per second: one every 2 ms.
                assert_eq!((rate, period), (500.0, 2_000_000));
                "new rate".to_string()
            }
        }
    });
}
