use super::*;
use crate::clock::ManualClock;

const W: u64 = 1_000;

fn window(limit: u32) -> SlidingWindow<ManualClock> {
    SlidingWindow::with_clock(limit, Duration::from_nanos(W), ManualClock::new()).unwrap()
}

#[test]
fn the_estimate_weighs_the_previous_window() {
    let s = window(10);
    let c = Counts {
        window: 1,
        prev: 8,
        curr: 2,
    };
    // At e = 500: 8·500 + (2 + n)·1000 ≤ 10,000  ⇔  n ≤ 4.
    assert_eq!(s.wait(c, 500, 4), 0);
    // n = 5 needs 8·(1000 − x) ≤ 3·1000 ⇔ x ≥ 625: 125 ns more.
    assert_eq!(s.wait(c, 500, 5), 125);
}

#[test]
fn waits_cross_into_the_next_windows() {
    let s = window(10);
    // curr = 10: nothing fits in this window; next window prev = 10 and
    // n = 4 needs 10·(1000 − x) ≤ 6·1000 ⇔ x ≥ 400.
    assert_eq!(
        s.wait(
            Counts {
                window: 0,
                prev: 0,
                curr: 10
            },
            200,
            4
        ),
        800 + 400
    );
    // n = 10 needs the window after, when nothing counts.
    assert_eq!(
        s.wait(
            Counts {
                window: 0,
                prev: 0,
                curr: 10
            },
            200,
            10
        ),
        2 * W - 200
    );
}

#[test]
fn a_window_index_at_the_top_refunds_nothing_elsewhere() {
    let s = window(10);
    let start = Counts {
        window: 0,
        prev: 3,
        curr: 2,
    };
    s.state
        .update::<(), ()>(|_| Ok((start.pack(), ())))
        .unwrap();
    // Window u64::MAX is neither window 0 nor the one before it.
    assert!(!s.cancel_in(u64::MAX, 1));
    assert_eq!(Counts::unpack(s.state.load()), start);
}

#[test]
fn counts_age_by_window() {
    let c = Counts {
        window: 3,
        prev: 4,
        curr: 5,
    };
    assert_eq!(c.at(3_500, W), (c, 500));
    assert_eq!(
        c.at(4_100, W),
        (
            Counts {
                window: 4,
                prev: 5,
                curr: 0
            },
            100
        )
    );
    assert_eq!(
        c.at(9_000, W),
        (
            Counts {
                window: 9,
                prev: 0,
                curr: 0
            },
            0
        )
    );
    assert_eq!(
        c.at(1_200, W),
        (c, 0),
        "a backwards clock reads as the start of window k"
    );
}
