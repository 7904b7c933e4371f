//! Bounded waits for tests on real time: [`within`] a future, [`until`] a
//! condition, both failing the test after [`PATIENCE`].

/// How long a test waits for an event the code under test should cause
/// before failing: generous, because a loaded machine may be slow; bounded,
/// so that a bug fails the test instead of hanging it.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

/// Awaits `future`, failing the test (naming `what`) if it has not finished
/// within [`PATIENCE`] of real time.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {PATIENCE:?}"))
}

/// Polls `done()` every millisecond until it holds, failing the test
/// (naming `what`) after [`PATIENCE`] of real time. For tests on real
/// time: under paused time each poll would move the clock. Sleeps rather
/// than spins, so the wait leaves the cores to what it waits for.
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {PATIENCE:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}
