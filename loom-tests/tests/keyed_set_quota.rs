//! Model checks of a keyed quota change (`SharedQuota::set`, then each
//! cell moving itself to it under `LOCKED` on its next decision) racing a
//! decision on a cell in debt, and a broken variant of the move (no
//! `LOCKED`: the record is written, then the word) that the same check must
//! catch.
//!
//! Old quota t = 10 ns, burst 2, both permits taken at `NOW` (debt 20 ns);
//! new quota t = 30 ns, burst 3, changed at `NOW` (the debt becomes 60 ns:
//! still two permits owed, one free). A try of one permit decided before
//! the change is refused with the old wait (10 ns) and leaves debt 60; one
//! decided after it is admitted and leaves debt 90. A decision that mixed
//! the quotas ends elsewhere: the old `t` on the moved `tat` refuses with a
//! wait of 50, the new `t` on the old `tat` admits and leaves debt 50.
#![cfg(loom)]

use loom_tests::check;
use loom_tests::scenarios::keyed_decision_racing_a_change;

#[test]
fn a_decision_racing_a_keyed_quota_change_uses_one_quota() {
    check(
        "SharedQuota::set + move vs a decision",
        &[
            "admitted under the new quota",
            "refused under the old quota",
        ],
        keyed_decision_racing_a_change,
    );
}
