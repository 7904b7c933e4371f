//! The types the keyed limiter and its eviction share: a key's entry in
//! the map, what a full map does with a new key, and the sweep's cursor.
//! Both `limiter` and `eviction` depend on this module; it depends on
//! neither, so the dependency between the two goes one way (`eviction`
//! extends `KeyedLimiter`; `limiter` names nothing of `eviction`).

use limiter_core::{cell::CellQuota, cell::GcraCell};

/// What a full limiter does with a new key when no key is idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenFull {
    /// Refuse the new key with [`KeyedError::TooManyKeys`](crate::KeyedError::TooManyKeys) (the default):
    /// forgetting a limited key would let a client who floods new keys reset
    /// someone else's limit.
    #[default]
    RejectNewKeys,
    /// Evict a key to make room, forgetting its debt (an evicted key comes
    /// back full): among the keys a bounded step examines, the one whose
    /// debt is the fewest permits under its own quota, so forgetting it
    /// admits the fewest extra permits (under one quota: the least recently
    /// used). A new key is never refused.
    EvictLeastRecent,
}

/// One key's state: its cell and the quota its `tat` is expressed in (the
/// shared one it follows, or its pinned override). Held boxed in the map,
/// so that resizing moves a pointer, never the cell (see the module doc).
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) cell: GcraCell,
    pub(crate) quota: CellQuota,
}

/// Where the sweep stands; held under the limiter's cursor lock.
#[derive(Debug)]
pub(crate) struct Cursor<K> {
    /// The next entry to examine; `None`: start a pass at the table's first.
    pub(crate) next: Option<K>,
    /// The smallest `tat` of the keys kept so far in this pass.
    pub(crate) pass_min: u64,
}

impl<K> Cursor<K> {
    pub(crate) fn new() -> Cursor<K> {
        Cursor {
            next: None,
            pass_min: u64::MAX,
        }
    }
}

/// What a new key got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// Room in the key count, claimed: insert the key.
    Claimed,
    /// No room could be had without waiting for another insertion: decide
    /// on a fresh cell and keep it nowhere (eviction only).
    Unkept,
}
