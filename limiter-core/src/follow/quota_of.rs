//! [`QuotaOf`]: the quota a cell decision reads, and the move of a cell to
//! the shared quota in force (rule 2 of the parent module's protocol).

use super::{CellQuota, Current, LOCKED, PINNED, SharedQuota};
use crate::gcra::Params;
use crate::quota::{MAX_SPAN, Quota};
use crate::sync::{AtomicU64, Ordering, spin_hint};

/// The quota a [`GcraCell`](crate::cell::GcraCell) decision is made under: one
/// the caller passes in (`Fixed`, the cell's original mode), or a cell
/// record that follows a [`SharedQuota`].
#[derive(Debug, Clone, Copy)]
pub enum QuotaOf<'a> {
    /// This quota, whatever the cell decided under before.
    Fixed(Quota),
    /// The shared quota in force, the cell moved to it first if its record
    /// is older (see the module docs of `follow`).
    Following {
        /// The quota every following cell moves to.
        shared: &'a SharedQuota,
        /// This cell's record.
        record: &'a CellQuota,
    },
}

impl From<Quota> for QuotaOf<'_> {
    fn from(quota: Quota) -> Self {
        QuotaOf::Fixed(quota)
    }
}

/// What a decision used, to check after its CAS.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp {
    /// The version decided under (0 for a fixed or pinned quota).
    pub(crate) version: u64,
    current: Option<Current>,
}

/// Why a decision cannot be made on the word loaded: load it again.
#[derive(Debug)]
pub(crate) struct LookAgain;

impl QuotaOf<'_> {
    /// The parameters to decide with on `word` (a `tat`), moving the cell
    /// to the shared quota first if its record is older.
    #[inline]
    pub(crate) fn prepare(self, cell: &AtomicU64, word: u64) -> Result<(Params, Stamp), LookAgain> {
        let (shared, record) = match self {
            QuotaOf::Fixed(quota) => {
                return Ok((
                    Params::from(quota),
                    Stamp {
                        version: 0,
                        current: None,
                    },
                ));
            }
            QuotaOf::Following { shared, record } => (shared, record),
        };
        if word == LOCKED {
            spin_hint();
            return Err(LookAgain);
        }
        // Acquire: pairs with the mover's release store of the version, so
        // its parameter stores are seen with it.
        let version = record.version.load(Ordering::Acquire);
        if version == PINNED {
            let stamp = Stamp {
                version: 0,
                current: None,
            };
            return Ok((record.params(), stamp));
        }
        let current = shared.current();
        let latest = current.version();
        if version == latest {
            let stamp = Stamp {
                version,
                current: Some(current),
            };
            return Ok((current.read.params, stamp));
        }
        if version < latest {
            move_cell(cell, shared, record, word, current);
        }
        // Moved (by us or another thread), or our read of the shared quota
        // predates the cell's: look again.
        Err(LookAgain)
    }

    /// Whether a decision whose CAS succeeded stands (module docs, rule 1).
    #[inline]
    pub(crate) fn stands(self, stamp: Stamp) -> bool {
        match (self, stamp.current) {
            (QuotaOf::Following { shared, record }, Some(current)) => {
                // Acquire: the successful CAS acquired the word; a mover
                // that stored a new version before that word is seen.
                record.version.load(Ordering::Acquire) == stamp.version
                    && shared.unchanged_since(current)
            }
            _ => true,
        }
    }

    /// The parameters the cell's state is in now (for a snapshot such as
    /// `available`): the fixed quota, or the record's.
    pub(crate) fn params_now(self) -> Params {
        match self {
            QuotaOf::Fixed(quota) => Params::from(quota),
            QuotaOf::Following { record, .. } => Params::from(record.quota()),
        }
    }

    /// The version a decision now is made under (0 for a fixed or pinned
    /// quota). For the refund table of a cell, which exists only with `std`.
    #[cfg(feature = "std")]
    pub(crate) fn version_now(self) -> u64 {
        match self {
            QuotaOf::Following { shared, record } if !record.is_pinned() => {
                shared.current().version()
            }
            _ => 0,
        }
    }

    /// Whether a reservation made under `version` may still be given back:
    /// no shared change since (always, for a fixed quota). For the refund
    /// table of a cell, which exists only with `std`.
    #[cfg(feature = "std")]
    pub(crate) fn still_in_force(self, version: u64) -> bool {
        match self {
            QuotaOf::Following { shared, record } if !record.is_pinned() => {
                shared.current().version() == version
            }
            _ => true,
        }
    }
}

/// Moves the cell from its record's quota to `current`, if its word is
/// still `word`: rule 2 of the module docs.
#[cold]
fn move_cell(
    cell: &AtomicU64,
    shared: &SharedQuota,
    record: &CellQuota,
    word: u64,
    current: Current,
) {
    #[cfg(loom)]
    if crate::__loom::BROKEN_MOVE.load(std::sync::atomic::Ordering::Relaxed) {
        return broken_move(cell, shared, record, word, current);
    }
    // Acquire: we read the record the previous mover published before the
    // word we replace (its release sequence). Relaxed on failure: we only
    // look again.
    if cell
        .compare_exchange(word, LOCKED, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // Apply each change since the record's version in turn, at its own
    // time, as an eager change would have (while the entries still hold
    // them); else the latest alone, at its time.
    let (from, to) = (record.version.load(Ordering::Relaxed), current.version());
    let mut params = record.params();
    let mut tat = word;
    let mut chain = true;
    for version in from + 1..=to {
        match shared.version_of(version) {
            Some((next, at)) => {
                tat = crate::limiter::moved_tat(tat, at, params, next, MAX_SPAN);
                params = next;
            }
            None => {
                chain = false;
                break;
            }
        }
    }
    let new = current.read.params;
    if !chain {
        let at = shared.version_of(to).map_or(0, |(_, at)| at);
        tat = crate::limiter::moved_tat(word, at, record.params(), new, MAX_SPAN);
    }
    // Relaxed: the release store of the word below publishes them.
    record.t.store(new.t, Ordering::Relaxed);
    record.burst.store(new.burst, Ordering::Relaxed);
    // Release: a decision that reads this version sees the parameters.
    record.version.store(current.version(), Ordering::Release);
    // Release: a decision that loads this word sees the record above.
    cell.store(tat, Ordering::Release);
}

/// The move without `LOCKED`, for the broken variant of the loom model: the
/// record is written first and the word CASed to the moved `tat` after, so a
/// decision can read the new version with the old `tat` and mix the two.
#[cfg(loom)]
fn broken_move(
    cell: &AtomicU64,
    shared: &SharedQuota,
    record: &CellQuota,
    word: u64,
    current: Current,
) {
    let at = shared.version_of(current.version()).map_or(0, |(_, at)| at);
    let tat = crate::limiter::moved_tat(word, at, record.params(), current.read.params, MAX_SPAN);
    record.t.store(current.read.params.t, Ordering::Relaxed);
    record
        .burst
        .store(current.read.params.burst, Ordering::Relaxed);
    record.version.store(current.version(), Ordering::Release);
    let _ = cell.compare_exchange(word, tat, Ordering::AcqRel, Ordering::Relaxed);
}
