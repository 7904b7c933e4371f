//! The broken variant of the fast read (design.md §5, "The fast read"): a
//! decision that loads the copy of the quota in force beside the state word
//! but does not check that the copy is of the generation the word names
//! (`limiter_core::__loom::BROKEN_FAST_READ`). In the window between a
//! change's write of the copy and its word CAS it decides with the new
//! quota on the old word; the model that the real limiter passes
//! (`gcra_set_quota.rs`, `a_try_in_the_window_between_a_changes_copy_and_its_word`)
//! must catch it. Its own binary: the flag is process-wide.
#![cfg(loom)]

#[test]
#[should_panic]
fn a_fast_read_without_its_generation_check_is_caught() {
    limiter_core::__loom::BROKEN_FAST_READ.store(true, std::sync::atomic::Ordering::Relaxed);
    loom_tests::check(
        "broken fast read (no generation check) vs set_quota",
        &["refused, debt 30", "admitted, debt 90"],
        loom_tests::scenarios::try_in_the_change_window,
    );
}
