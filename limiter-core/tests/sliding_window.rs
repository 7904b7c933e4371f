//! `SlidingWindow`: the two-counter estimate, exact under a manual clock.

use std::time::Duration;

use limiter_core::{AcquireError, ManualClock, QuotaError, SlidingWindow, clock::MAX_SPAN};

const MS: Duration = Duration::from_millis(1);

fn window(limit: u32) -> (SlidingWindow<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (
        SlidingWindow::with_clock(limit, Duration::from_secs(1), clock.clone()).unwrap(),
        clock,
    )
}

fn limited(wait: Duration) -> Result<(), AcquireError> {
    Err(AcquireError::RateLimited { wait })
}

#[test]
fn the_limit_edge_within_one_window() {
    let (s, _clock) = window(100);
    assert_eq!(s.try_acquire_n(99), Ok(()));
    // Not in this window; in the next, 99·(1 s − x) ≤ 98·1 s ⇔ x ≥ 1/99 s,
    // rounded up to 10,101,011 ns.
    assert_eq!(
        s.try_acquire_n(2),
        limited(Duration::from_nanos(1_010_101_011))
    );
    assert_eq!(s.try_acquire(), Ok(()));
    assert_eq!(s.available(), 0);
    assert_eq!(
        s.try_acquire_n(101),
        Err(AcquireError::InsufficientCapacity {
            requested: 101,
            burst: 100
        })
    );
}

#[test]
fn the_previous_window_counts_by_its_remaining_share() {
    let (s, clock) = window(100);
    s.try_acquire_n(80).unwrap();
    clock.advance(Duration::from_millis(1_250)); // 250 ms into window 1
    // Estimate 80·0.75 = 60: 40 more fit, not 41.
    assert_eq!(s.available(), 40);
    assert_eq!(s.try_acquire_n(40), Ok(()));
    // 41st: 80·(1000 − x) + 41·1000 ≤ 100·1000 ⇔ x ≥ 262.5 → 263 ms, 13 ms on.
    assert_eq!(s.try_acquire(), limited(Duration::from_micros(12_500)));
    clock.advance(Duration::from_micros(12_500));
    assert_eq!(s.try_acquire(), Ok(()));
}

#[test]
fn across_a_boundary_the_current_window_becomes_the_previous() {
    let (s, clock) = window(10);
    clock.advance(900 * MS);
    s.try_acquire_n(10).unwrap();
    // 100 ms later window 1 begins with prev = 10: nothing fits yet.
    clock.advance(100 * MS);
    assert_eq!(s.available(), 0);
    // n = 5 needs 10·(1000 − x) ≤ 5·1000 ⇔ x ≥ 500 ms.
    assert_eq!(s.try_acquire_n(5), limited(500 * MS));
    clock.advance(500 * MS);
    assert_eq!(s.try_acquire_n(5), Ok(()));
}

#[test]
fn idle_windows_forget_everything() {
    let (s, clock) = window(10);
    s.try_acquire_n(10).unwrap();
    clock.advance(2_000 * MS);
    assert_eq!(s.available(), 10);
    clock.advance(Duration::from_secs(86_400 * 365));
    assert_eq!(s.try_acquire_n(10), Ok(()));
}

#[test]
fn a_backwards_clock_is_read_as_the_start_of_the_window() {
    let (s, clock) = window(10);
    clock.set(5_500_000_000);
    s.try_acquire_n(6).unwrap();
    clock.set(1_000_000_000);
    // Counts stay those of window 5, read at its start: 4 fit, not more.
    assert_eq!(s.available(), 4);
    // 4 s from now (1 s) to the start of window 5 (how now is read), then
    // window 6 at x ≥ 1/6 s: 6·(1 s − x) ≤ 5·1 s.
    assert_eq!(
        s.try_acquire_n(5),
        limited(Duration::from_nanos(
            4_000_000_000 + 1_000_000_000 + 166_666_667
        ))
    );
}

#[test]
fn a_denial_writes_nothing_and_cancel_gives_back() {
    let (s, clock) = window(10);
    let r = s.reserve_n(4, Duration::ZERO).unwrap();
    assert_eq!(r.wait(), Duration::ZERO);
    for _ in 0..10 {
        assert!(s.try_acquire_n(7).is_err());
    }
    assert_eq!(s.available(), 6);
    assert!(s.cancel(r));
    assert_eq!(s.available(), 10);
    // A reservation ages out with its window.
    let r = s.reserve_n(3, Duration::ZERO).unwrap();
    clock.advance(2_000 * MS);
    assert!(!s.cancel(r));
}

#[test]
fn reserve_grants_only_what_fits_now() {
    let (s, _clock) = window(2);
    s.try_acquire_n(2).unwrap();
    // Within max_wait, but the window cannot hold a future slot.
    assert_eq!(
        s.reserve_n(1, Duration::from_secs(10)).unwrap_err(),
        AcquireError::RateLimited { wait: 1_500 * MS }
    );
}

#[test]
fn limits_and_windows_are_validated() {
    let clock = ManualClock::new();
    assert_eq!(
        SlidingWindow::with_clock(0, Duration::from_secs(1), clock.clone()).unwrap_err(),
        QuotaError::ZeroRate
    );
    assert_eq!(
        SlidingWindow::with_clock(1, Duration::ZERO, clock.clone()).unwrap_err(),
        QuotaError::ZeroPeriod
    );
    assert!(matches!(
        SlidingWindow::with_clock(1, Duration::MAX, clock.clone()),
        Err(QuotaError::SpanTooLong { .. })
    ));
    let big = SlidingWindow::with_clock(u32::MAX, Duration::from_nanos(1), clock).unwrap();
    assert_eq!(big.try_acquire_n(u32::MAX), Ok(()));
    assert_eq!(big.available(), 0);
}

#[test]
fn a_reservation_from_another_window_is_refused() {
    let (a, _) = window(10);
    let (b, _) = window(10);
    let from_a = a.reserve_n(4, Duration::ZERO).unwrap();
    let on_b = b.reserve_n(4, Duration::ZERO).unwrap();
    assert_eq!(
        (from_a.permits(), from_a.ready_at()),
        (on_b.permits(), on_b.ready_at())
    );
    assert!(!b.cancel(from_a));
    assert_eq!(b.available(), 6);
    assert_eq!(b.try_acquire_n(7), limited(1_250 * MS));
    assert!(b.cancel(on_b));
    assert_eq!(b.available(), 10);
}

/// A script of decisions at clock readings `origin + offset`, its outcomes
/// with every instant given relative to `origin`.
fn window_script(origin: u64) -> Vec<String> {
    let clock = ManualClock::starting_at(origin);
    let s = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone()).unwrap();
    let mut out = Vec::new();
    clock.advance(300 * MS);
    out.push(format!("{:?}", s.try_acquire_n(8)));
    out.push(format!("{:?} {}", s.try_acquire_n(3), s.available()));
    // Into the next window: the 8 still count by their remaining share.
    clock.advance(900 * MS);
    out.push(format!("available {}", s.available()));
    let r = s.reserve_n(3, Duration::ZERO).unwrap();
    out.push(format!(
        "ready {} wait {:?}",
        r.ready_at() - origin,
        r.wait()
    ));
    out.push(format!("{:?}", s.try_acquire_n(5)));
    // The clock steps back into the previous window: read as this one's start.
    clock.set(origin + 900_000_000);
    out.push(format!("back {:?} {}", s.try_acquire_n(1), s.available()));
    clock.set(origin + 1_250_000_000);
    out.push(format!("cancel {} {}", s.cancel(r), s.available()));
    clock.advance(5_000 * MS);
    out.push(format!("idle {} {:?}", s.available(), s.try_acquire_n(10)));
    out
}

#[test]
fn any_clock_origin_decides_as_origin_zero() {
    let at_zero = window_script(0);
    for origin in [1_800_000_000_000_000_000, u64::MAX - 3_600_000_000_000] {
        assert_eq!(window_script(origin), at_zero, "origin {origin}");
    }
}

#[test]
fn past_the_span_nothing_is_available_and_tries_are_out_of_range() {
    let (s, clock) = window(10);
    clock.set(MAX_SPAN);
    assert_eq!(s.available(), 10);
    clock.set(MAX_SPAN + 1);
    assert_eq!(s.available(), 0);
    assert_eq!(
        s.try_acquire(),
        Err(AcquireError::TimeOutOfRange { now: MAX_SPAN + 1 })
    );
    // A clock an hour from its end gives the window an hour of range, up to
    // the clock's last reading.
    let clock = ManualClock::starting_at(u64::MAX - 3_600_000_000_000);
    let s = SlidingWindow::with_clock(10, Duration::from_nanos(1), clock.clone()).unwrap();
    clock.set(u64::MAX);
    assert_eq!(s.available(), 10);
    let r = s.reserve_n(3, Duration::ZERO).unwrap();
    assert_eq!(r.ready_at(), u64::MAX);
    assert!(s.cancel(r));
}

#[test]
fn available_is_the_largest_n_a_try_takes() {
    for limit in [1, 7, 10] {
        for first in 0..=limit {
            for second in [0, 1, 3] {
                for at in [0, 1, 250, 999, 1_000, 1_001, 1_500, 1_999, 2_000] {
                    let run = |n: u32| {
                        let clock = ManualClock::new();
                        let s = SlidingWindow::with_clock(
                            limit,
                            Duration::from_nanos(1_000),
                            clock.clone(),
                        )
                        .unwrap();
                        let _ = s.try_acquire_n(first);
                        clock.set(700);
                        let _ = s.try_acquire_n(second);
                        clock.set(at.max(700));
                        (s.available(), s.try_acquire_n(n))
                    };
                    let (available, _) = run(0);
                    let case = format!("limit {limit} first {first} second {second} at {at}");
                    assert_eq!(run(available).1, Ok(()), "{case}");
                    if available < limit {
                        assert!(run(available + 1).1.is_err(), "{case}");
                    }
                }
            }
        }
    }
}
