use std::sync::Arc;

use limiter_core::ManualClock;
use proptest::prelude::*;

use super::*;

const SEC: Duration = Duration::from_secs(1);

fn three_in_a_minute() -> Penalty {
    Penalty::new(3, Duration::from_secs(60), Duration::from_secs(300)).unwrap()
}

#[test]
fn the_third_strike_in_a_minute_blocks_for_five_minutes_exactly() {
    let clock = ManualClock::new();
    let jail = PenaltyBox::with_clock(three_in_a_minute(), 100, clock.clone());
    assert_eq!(jail.strike(&1), Strike::Counted { strikes: 1 });
    clock.advance(10 * SEC);
    assert_eq!(jail.strike(&1), Strike::Counted { strikes: 2 });
    assert_eq!(jail.strikes(&1), 2);
    clock.advance(10 * SEC);
    assert_eq!(
        jail.strike(&1),
        Strike::Penalized {
            retry_after: 300 * SEC
        }
    );
    // A strike during the block does not extend it.
    clock.advance(100 * SEC);
    assert_eq!(
        jail.strike(&1),
        Strike::Blocked {
            retry_after: 200 * SEC
        }
    );
    clock.advance(200 * SEC - Duration::from_nanos(1));
    assert_eq!(jail.blocked(&1), Some(Duration::from_nanos(1)));
    clock.advance(Duration::from_nanos(1));
    assert_eq!(jail.blocked(&1), None);
    // After the block the count starts again.
    assert_eq!(jail.strike(&1), Strike::Counted { strikes: 1 });
    assert_eq!(jail.blocked(&2), None);
}

#[test]
fn strikes_outside_the_window_start_a_new_one() {
    let clock = ManualClock::new();
    let jail = PenaltyBox::with_clock(three_in_a_minute(), 100, clock.clone());
    jail.strike(&"k");
    clock.advance(30 * SEC);
    jail.strike(&"k");
    clock.advance(30 * SEC); // 60 s after the first: the window has closed
    assert_eq!(jail.strike(&"k"), Strike::Counted { strikes: 1 });
    assert_eq!(jail.blocked(&"k"), None);
}

#[test]
fn after_one_blocks_on_the_first_strike_and_release_ends_it() {
    let clock = ManualClock::new();
    let penalty = Penalty::new(1, SEC, 10 * SEC).unwrap();
    let jail = PenaltyBox::with_clock(penalty, 100, clock.clone());
    assert_eq!(
        jail.strike(&7),
        Strike::Penalized {
            retry_after: 10 * SEC
        }
    );
    assert_eq!(jail.len(), 1);
    assert!(jail.release(&7));
    assert!(!jail.release(&7));
    assert_eq!(jail.blocked(&7), None);
    assert!(jail.is_empty());
}

#[test]
fn a_full_table_sweeps_idle_keys_and_refuses_to_grow() {
    let clock = ManualClock::new();
    let jail = PenaltyBox::with_clock(three_in_a_minute(), 2, clock.clone());
    jail.strike(&1);
    jail.strike(&2);
    // Both live: the third key is not tracked, and the table does not grow.
    assert_eq!(jail.strike(&3), Strike::Untracked);
    assert_eq!(jail.len(), 2);
    // The windows close; the next new key triggers a sweep once the last
    // pass is a second old.
    clock.advance(61 * SEC);
    assert_eq!(jail.strike(&3), Strike::Counted { strikes: 1 });
    assert_eq!(jail.len(), 1);
    assert_eq!(jail.strikes(&1), 0);
    // A block is never swept while it lasts.
    let penalty = Penalty::new(1, SEC, 600 * SEC).unwrap();
    let jail = PenaltyBox::with_clock(penalty, 1, clock.clone());
    jail.strike(&1);
    clock.advance(300 * SEC);
    assert_eq!(jail.strike(&2), Strike::Untracked);
    assert_eq!(jail.blocked(&1), Some(300 * SEC));
}

#[test]
fn racing_strikes_block_exactly_once() {
    let clock = ManualClock::new();
    let penalty = Penalty::new(100, Duration::from_secs(60), Duration::from_secs(60)).unwrap();
    let jail = Arc::new(PenaltyBox::with_clock(penalty, 10, clock));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let jail = jail.clone();
            std::thread::spawn(move || (0..50).map(|_| jail.strike(&"hot")).collect::<Vec<_>>())
        })
        .collect();
    let all: Vec<Strike> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let penalized = all
        .iter()
        .filter(|s| matches!(s, Strike::Penalized { .. }))
        .count();
    let counted = all
        .iter()
        .filter(|s| matches!(s, Strike::Counted { .. }))
        .count();
    let blocked = all
        .iter()
        .filter(|s| matches!(s, Strike::Blocked { .. }))
        .count();
    assert_eq!((counted, penalized, blocked), (99, 1, 100));
}

#[test]
fn bad_penalties_are_typed_errors() {
    assert_eq!(
        Penalty::new(0, SEC, SEC),
        Err(PenaltyError::After { after: 0 })
    );
    assert_eq!(
        Penalty::new(MAX_STRIKES + 1, SEC, SEC),
        Err(PenaltyError::After {
            after: MAX_STRIKES + 1
        })
    );
    let within = Duration::from_micros(999);
    assert_eq!(
        Penalty::new(1, within, SEC),
        Err(PenaltyError::Within { within })
    );
    assert_eq!(
        Penalty::new(1, SEC, Duration::ZERO),
        Err(PenaltyError::Block {
            block: Duration::ZERO
        })
    );
    assert_eq!(
        Penalty::new(1, SEC, Duration::ZERO)
            .unwrap_err()
            .to_string(),
        "penalty `block: 0ns` must be longer than 0 and at most 36 years"
    );
}

/// The specification, written plainly: a window opened by the first strike,
/// a block set by the `after`-th, strikes during a block ignored.
#[derive(Debug, Default)]
struct Model {
    window: Option<(u64, u32)>,
    blocked_until: Option<u64>,
}

impl Model {
    fn strike(&mut self, p: &Penalty, now: u64) -> Strike {
        if let Some(until) = self.blocked_until {
            if now < until {
                return Strike::Blocked {
                    retry_after: Duration::from_nanos(until - now),
                };
            }
            self.blocked_until = None;
            self.window = None;
        }
        let now_ms = now / 1_000_000;
        let within = p.within().as_millis() as u64;
        let (start, count) = match self.window {
            Some((start, count)) if now_ms < start + within => (start, count + 1),
            _ => (now_ms, 1),
        };
        if count >= p.after() {
            let until = now + p.block().as_nanos() as u64;
            self.blocked_until = Some(until);
            self.window = None;
            Strike::Penalized {
                retry_after: p.block(),
            }
        } else {
            self.window = Some((start, count));
            Strike::Counted { strikes: count }
        }
    }
}

proptest! {
    #[test]
    fn matches_the_plain_model(
        after in 1u32..5,
        within_ms in 1u64..50,
        block_ms in 1u64..50,
        steps in proptest::collection::vec(0u64..20_000_000, 1..80),
    ) {
        let p = Penalty::new(after, Duration::from_millis(within_ms), Duration::from_millis(block_ms)).unwrap();
        let clock = ManualClock::new();
        let jail = PenaltyBox::with_clock(p, 4, clock.clone());
        let mut model = Model::default();
        let mut now = 0;
        for step in steps {
            now += step;
            clock.set(now);
            prop_assert_eq!(jail.strike(&0u8), model.strike(&p, now));
            let expect = model.blocked_until.filter(|&u| now < u).map(|u| Duration::from_nanos(u - now));
            prop_assert_eq!(jail.blocked(&0u8), expect);
        }
    }
}
