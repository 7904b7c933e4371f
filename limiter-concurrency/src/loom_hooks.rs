//! Deliberately broken variants of the protocol, selectable only under
//! `cfg(loom)`, which the loom models must catch.

/// Which step of the protocol to break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// The real protocol.
    None,
    /// Admission reads the word, decides, and stores the result instead of
    /// a CAS: the check-then-act gap.
    LoadStoreAdmit,
    /// A release decrements even when a waiter is queued (nobody is handed
    /// the permit, nobody is woken): a lost wake-up.
    ReleaseIgnoresQueue,
    /// A raise of the limit does not admit the waiters it frees.
    RaiseWakesNobody,
    /// A limit change reads the word and stores it back with the new limit
    /// instead of a CAS: a release, admission or queued flag written in
    /// between is overwritten.
    LimitLoadStore,
    /// A release hands its permit to a waiter whenever one is queued,
    /// without checking that the permit is free under the (lowered) limit.
    HandOffIgnoresLimit,
    /// A dropped waiter that had been handed a permit forgets it instead of
    /// releasing it: the permit leaks.
    CancelForgetsGrant,
    /// A partition admission checks the word, then adds its count in a
    /// second step (CAS on whatever the word is by then): the global limit
    /// and the partition count are checked apart from the increment.
    PartitionCheckThenAdd,
}
