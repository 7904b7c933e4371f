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
}
