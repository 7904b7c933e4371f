//! `sliding_window`: at most `limit` per `window`, the previous window
//! weighted in. Global only, local only; a reload with other numbers
//! replaces the limiter.

use limiter_core::{ManualClock, SlidingWindow};

use super::reader::required;
use super::{Algorithm, Definition, Reader};

/// `sliding_window`.
pub(crate) const SLIDING_WINDOW: Definition = Definition {
    name: "sliding_window",
    fields: &["limit", "window"],
    parse,
    delay_by_default: false,
    keyed: false,
    redis: false,
    calendar: false,
    not_taken: &[],
};

fn parse(r: &mut dyn Reader) -> Option<Algorithm> {
    let limit = r.count("limit");
    let limit = required(r, "limit", limit);
    let window = r.duration("window");
    let window = required(r, "window", window);
    let (limit, window) = (limit?, window?);
    if let Err(e) = SlidingWindow::with_clock(limit, window, ManualClock::new()) {
        r.core_error("window", e);
        return None;
    }
    Some(Algorithm::SlidingWindow { limit, window })
}
