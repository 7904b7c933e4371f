//! The crate root stays small enough for a newcomer to hold: at most 30
//! public names (types, traits, functions, constants and modules), counted
//! from `src/lib.rs`'s `pub use` and `pub mod` items under every feature.
//! Building blocks for other crates' authors live in modules (`cell`,
//! `clock`, `composite`, `debt`, `adaptive`), not at the root.

/// The public names the root declares; `cfg(loom)` internals excluded.
fn root_names() -> Vec<String> {
    let lib = include_str!("../src/lib.rs");
    let mut names = Vec::new();
    let mut loom_only = false;
    let mut lines = lib.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if line == "#[cfg(loom)]" {
            loom_only = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub mod ") {
            if !loom_only {
                names.push(rest.trim_end_matches([';', '{', ' ']).to_owned());
            }
        } else if let Some(rest) = line.strip_prefix("pub use ") {
            let mut item = rest.to_owned();
            while !item.ends_with(';') {
                item.push_str(lines.next().expect("a `pub use` ends with `;`").trim());
            }
            names.extend(used_names(&item));
        }
        loom_only = false;
    }
    names
}

/// The names one `pub use path::{A, B as C};` item brings in.
fn used_names(item: &str) -> Vec<String> {
    let item = item.trim_end_matches(';');
    let list = match item.split_once('{') {
        Some((_, group)) => group.trim_end_matches('}').to_owned(),
        None => item.rsplit("::").next().unwrap_or(item).to_owned(),
    };
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| name.rsplit(' ').next().unwrap_or(name).to_owned())
        .collect()
}

#[test]
fn the_root_has_at_most_thirty_public_names() {
    let names = root_names();
    assert!(
        names.len() <= 30,
        "{} public names at the root (at most 30): {names:?}",
        names.len()
    );
}

#[test]
fn the_count_sees_every_kind_of_root_item() {
    let names = root_names();
    for expected in [
        "RateLimiter",
        "Decide",
        "cell",
        "MonotonicClock",
        "Headroom",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    // Each name once: a duplicate would mean the parser misread an item.
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "{names:?}");
}

/// The building blocks are reachable where the module docs say.
#[test]
fn building_blocks_live_in_their_modules() {
    use limiter_core::cell::{CellClock, CellQuota, GcraCell, QuotaOf, SharedQuota};
    use limiter_core::clock::MAX_SPAN;
    use limiter_core::composite::{Limit, try_acquire_all};
    use limiter_core::debt::{ChargeAfter, Debt};
    use limiter_core::{ManualClock, Quota, RateLimiter};

    let quota = Quota::per_second(10).unwrap();
    let shared = SharedQuota::new(quota);
    let record = CellQuota::following(&shared);
    let cell = GcraCell::new();
    let clock = ManualClock::new();
    let at = CellClock {
        clock: &clock,
        origin: 0,
    };
    let of = QuotaOf::Following {
        shared: &shared,
        record: &record,
    };
    let decided = cell.reserve_n_on(at, of, 1, core::time::Duration::ZERO);
    assert!(matches!(decided, Some(Ok(_))));
    assert_eq!(MAX_SPAN, (1 << 60) - 1);

    let a = RateLimiter::with_clock(quota, clock.clone());
    let part: &dyn Limit = &a;
    assert!(try_acquire_all(&[(part, 1)]).is_ok());
    let debt: Debt = ChargeAfter::charge_after(&a, 1, core::time::Duration::from_secs(1));
    assert_eq!(debt.charged, 1);
}
