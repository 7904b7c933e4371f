//! Several addresses per upstream on real sockets: round robin (the
//! available addresses in turn, one of three ejected too), least requests,
//! passive ejection of a dead address (a request with a body that meets it
//! first is the documented `502`; nothing after; a GET's connect failure
//! hidden by a retry counted and ejecting), an upstream killed mid-run
//! under concurrent GETs (no client error: the lost ones are retried), the
//! active health check taking an address out and bringing it back, and an
//! ejected address back in the gauge and in rotation when its ejection
//! ends or its health probe passes.

mod peers;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::Request;
use limiter_gateway::Running;
use peers::{Killable, NO_RULES, gateway};
use support::{Gated, TempDir, client, empty, pattern_body, refusing_address, sample, text, until};

fn file(name: &str, addrs: &[String], extra: &str) -> String {
    let list = addrs
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "listen = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n[[upstream]]\nname = \"{name}\"\nurl = \"http://app.internal\"\naddresses = [{list}]\n{extra}\n"
    )
}

async fn get(gw: &Running, path: &str) -> (u16, String) {
    let response = client()
        .request(
            Request::get(format!("http://{}{path}", gw.addrs()[0]))
                .body(empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, text(response).await)
}

/// The sample `family{upstream="name"...}` of the gateway's `/metrics`.
async fn metric(gw: &Running, family: &str, name: &str, labels: &str) -> f64 {
    let admin = gw.admin_addr().unwrap();
    let response = client()
        .request(
            Request::get(format!("http://{admin}/metrics"))
                .body(empty())
                .unwrap(),
        )
        .await
        .unwrap();
    sample(
        &text(response).await,
        &format!("{family}{{upstream=\"{name}\"{labels}}}"),
    )
}

async fn available(gw: &Running, name: &str) -> f64 {
    metric(gw, "gateway_upstream_available_addresses", name, "").await
}

/// Polls the gauge of available addresses until it reads `n` (bounded).
async fn until_available(gw: &Running, name: &str, n: f64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while available(gw, name).await != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {n} available"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_spreads_evenly() {
    let (a, b) = (Killable::start("a").await, Killable::start("b").await);
    let dir = TempDir::new();
    let gw = gateway(
        dir.path(),
        NO_RULES,
        &file("rr", &[a.addr.to_string(), b.addr.to_string()], ""),
    )
    .await;
    for _ in 0..10 {
        assert_eq!(get(&gw, "/x").await.0, 200);
    }
    assert_eq!((a.requests(), b.requests()), (5, 5));
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_requests_avoids_the_busy_address() {
    // Upstreams that hold `/hold` requests until opened: the slow ones stay
    // in flight however long a loaded machine takes over the quick ones.
    let mut a = Gated::start("/hold").await;
    let mut b = Gated::start("/hold").await;
    let dir = TempDir::new();
    let addrs = [a.addr.to_string(), b.addr.to_string()];
    let gw = Arc::new(
        gateway(
            dir.path(),
            NO_RULES,
            &file("least", &addrs, "balance = \"least_requests\""),
        )
        .await,
    );
    // Three slow requests in flight: two on one address, one on the other.
    let mut slow = Vec::new();
    for _ in 0..3 {
        let gw = Arc::clone(&gw);
        slow.push(tokio::spawn(async move { get(&gw, "/hold").await }));
    }
    until("three slow requests at the upstreams", || {
        a.requests() + b.requests() == 3
    })
    .await;
    let held = (a.requests(), b.requests());
    assert!(held == (2, 1) || held == (1, 2), "{held:?}");
    a.entered(held.0 as usize).await;
    b.entered(held.1 as usize).await;
    // Quick requests all go to the less busy address (round robin would
    // alternate).
    for _ in 0..4 {
        assert_eq!(get(&gw, "/quick").await.0, 200);
    }
    let expected = if held.0 == 1 { (5, 2) } else { (2, 5) };
    assert_eq!((a.requests(), b.requests()), expected);
    a.open();
    b.open();
    for s in slow {
        assert_eq!(s.await.unwrap(), (200, "done".to_owned()));
    }
    Arc::into_inner(gw).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_address_is_ejected_after_one_connect_failure() {
    let a = Killable::start("a").await;
    let (dead, _refusing) = refusing_address();
    let dead = dead.to_string();
    let dir = TempDir::new();
    let gw = gateway(
        dir.path(),
        NO_RULES,
        &file(
            "eject",
            &[dead, a.addr.to_string()],
            "fail_timeout = \"1h\"",
        ),
    )
    .await;
    assert_eq!(available(&gw, "eject").await, 2.0);
    let mut statuses = Vec::new();
    for _ in 0..6 {
        // A body: not replayable, so a connect failure cannot be retried.
        let response = client()
            .request(
                Request::post(format!("http://{}/up", gw.addrs()[0]))
                    .body(pattern_body(1000, true))
                    .unwrap(),
            )
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    // The first request tried the dead address (502, documented); it is
    // ejected and nothing after goes there.
    assert_eq!(statuses, [502, 200, 200, 200, 200, 200]);
    assert_eq!(available(&gw, "eject").await, 1.0);
    // Bodiless requests never see it, even when it is tried first.
    for _ in 0..6 {
        assert_eq!(get(&gw, "/x").await, (200, "a".to_owned()));
    }
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_dying_mid_run_costs_no_client_a_get() {
    let a = Killable::start("a").await;
    let mut b = Killable::start("b").await;
    let dir = TempDir::new();
    let gw = Arc::new(
        gateway(
            dir.path(),
            NO_RULES,
            &file("midrun", &[a.addr.to_string(), b.addr.to_string()], ""),
        )
        .await,
    );
    let (done, errors, ok) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (gw, done, errors, ok) = (
            Arc::clone(&gw),
            Arc::clone(&done),
            Arc::clone(&errors),
            Arc::clone(&ok),
        );
        clients.push(tokio::spawn(async move {
            // Relaxed (all): statistics and a stop flag; joined below.
            while !done.load(Ordering::Relaxed) {
                match get(&gw, "/x").await.0 {
                    200 => ok.fetch_add(1, Ordering::Relaxed),
                    _ => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    while b.requests() < 200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    b.kill().await;
    let after_kill = ok.load(Ordering::Relaxed);
    while ok.load(Ordering::Relaxed) < after_kill + 400 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    done.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(errors.load(Ordering::Relaxed), 0, "a GET failed");
    assert_eq!(available(&gw, "midrun").await, 1.0);
    assert!(a.requests() >= 400);
    Arc::into_inner(gw).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_check_takes_an_address_out_and_back() {
    let a = Killable::start("a").await;
    let b = Killable::start("b").await;
    let dir = TempDir::new();
    let extra = "[upstream.health_check]\npath = \"/healthz\"\ninterval = \"50ms\"\ntimeout = \"1s\"\nunhealthy = 1\nhealthy = 2\n";
    let gw = gateway(
        dir.path(),
        NO_RULES,
        &file("health", &[a.addr.to_string(), b.addr.to_string()], extra),
    )
    .await;
    // Relaxed: a switch read by the upstream.
    a.healthy.store(false, Ordering::Relaxed);
    until_available(&gw, "health", 1.0).await;
    let before = a.requests();
    for _ in 0..10 {
        assert_eq!(get(&gw, "/x").await, (200, "b".to_owned()));
    }
    assert_eq!(a.requests(), before);
    a.healthy.store(true, Ordering::Relaxed);
    until_available(&gw, "health", 2.0).await;
    for _ in 0..10 {
        assert_eq!(get(&gw, "/x").await.0, 200);
    }
    assert!(a.requests() >= before + 4, "a is back in rotation");
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_with_one_of_three_ejected_alternates_the_other_two() {
    let (a, c) = (Killable::start("a").await, Killable::start("c").await);
    let (dead, _refusing) = refusing_address();
    let dir = TempDir::new();
    let addrs = [a.addr.to_string(), dead.to_string(), c.addr.to_string()];
    let gw = gateway(
        dir.path(),
        NO_RULES,
        &file("rr3", &addrs, "fail_timeout = \"1h\""),
    )
    .await;
    // Turn 0 goes to `a`, turn 1 to the dead address: its GET is retried
    // on another address and it is ejected.
    for _ in 0..2 {
        assert_eq!(get(&gw, "/x").await.0, 200);
    }
    assert_eq!(available(&gw, "rr3").await, 2.0);
    let mut answers = Vec::new();
    for _ in 0..8 {
        let (status, body) = get(&gw, "/x").await;
        assert_eq!(status, 200);
        answers.push(body);
    }
    let first = answers[0].clone();
    let other = if first == "a" { "c" } else { "a" };
    let expected: Vec<String> = (0..8)
        .map(|k| {
            if k % 2 == 0 {
                first.clone()
            } else {
                other.to_owned()
            }
        })
        .collect();
    assert_eq!(answers, expected);
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_failure_hidden_by_a_retry_is_counted_and_ejects() {
    let a = Killable::start("a").await;
    let (dead, _refusing) = refusing_address();
    let dir = TempDir::new();
    let gw = gateway(
        dir.path(),
        NO_RULES,
        &file(
            "hidden",
            &[dead.to_string(), a.addr.to_string()],
            "fail_timeout = \"1h\"",
        ),
    )
    .await;
    const RETRIES: &str = "gateway_upstream_retries_total";
    assert_eq!(metric(&gw, RETRIES, "hidden", "").await, 0.0);
    // Turn 0 is the dead address: refused, retried on `a`, unseen.
    for _ in 0..5 {
        assert_eq!(get(&gw, "/x").await, (200, "a".to_owned()));
    }
    assert_eq!(metric(&gw, RETRIES, "hidden", "").await, 1.0);
    let errors = metric(
        &gw,
        "gateway_upstream_errors_total",
        "hidden",
        ",kind=\"connect\"",
    );
    assert_eq!(errors.await, 0.0);
    assert_eq!(available(&gw, "hidden").await, 1.0);
    gw.shutdown().await;
}

/// Turn 0 goes to the first address: when it refuses, the GET is retried
/// on `a` and the first address ejected.
async fn eject_the_first(gw: &Running) {
    assert_eq!(get(gw, "/x").await, (200, "a".to_owned()));
}

/// Four GETs in a row: two each on `d` and `a`, alternating.
async fn both_in_rotation(gw: &Running, d: &Killable) {
    for _ in 0..4 {
        assert_eq!(get(gw, "/x").await.0, 200);
    }
    assert_eq!(d.requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_address_is_counted_available_again_when_its_ejection_ends() {
    let a = Killable::start("a").await;
    let (dead, refusing) = refusing_address();
    let dir = TempDir::new();
    let gw = gateway(
        dir.path(),
        NO_RULES,
        &file(
            "expiry",
            &[dead.to_string(), a.addr.to_string()],
            "fail_timeout = \"2s\"",
        ),
    )
    .await;
    // No check that the gauge dropped: the ejection may have ended by
    // then on a loaded machine (the other tests check the drop).
    eject_the_first(&gw).await;
    let d = Killable::serve(refusing.listen(128).unwrap(), "d");
    until_available(&gw, "expiry", 2.0).await;
    both_in_rotation(&gw, &d).await;
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_health_check_readmits_an_ejected_address_at_once() {
    let a = Killable::start("a").await;
    let (dead, refusing) = refusing_address();
    let dir = TempDir::new();
    // Failed probes never take an address out here (unhealthy = 1000):
    // only the passive ejection (for an hour) keeps `dead` out.
    let extra = "fail_timeout = \"1h\"\n[upstream.health_check]\ninterval = \"100ms\"\nunhealthy = 1000\nhealthy = 1\n";
    let gw = gateway(
        dir.path(),
        NO_RULES,
        &file("readmit", &[dead.to_string(), a.addr.to_string()], extra),
    )
    .await;
    eject_the_first(&gw).await;
    assert_eq!(available(&gw, "readmit").await, 1.0);
    let d = Killable::serve(refusing.listen(128).unwrap(), "d");
    until_available(&gw, "readmit", 2.0).await;
    both_in_rotation(&gw, &d).await;
    gw.shutdown().await;
}
