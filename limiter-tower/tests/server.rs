//! A real axum server on an ephemeral loopback port, a real HTTP client
//! (hyper-util's), real sockets. Quotas are long (per hour) so that no
//! expectation depends on how fast the machine is; waits are observed
//! through the backend, never timed.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use limiter_async::AsyncDecide;
use limiter_core::{Decide, Denial, Grant, Quota, RateLimiter, Reservation};
use limiter_keyed::KeyedLimiter;
use limiter_tower::{ClientIp, Global, Header, Mode, PeerIp, RateLimitLayer, Route};
use tokio::sync::mpsc;

use crate::support::http::{client_from, get_from, hello, per_hour, serve};

#[tokio::test]
async fn over_the_limit_is_429_with_retry_after_and_problem_json() {
    let layer = RateLimitLayer::new(RateLimiter::new(per_hour(2)), Global);
    let addr = serve(hello().layer(layer)).await;
    let client = client_from("127.0.0.1");
    let first = get_from(&client, addr, "/", &[]).await;
    assert_eq!(
        (first.status, first.body.as_str()),
        (StatusCode::OK, "hello")
    );
    assert_eq!(first.headers["ratelimit-policy"], "\"default\";q=2;w=3600");
    assert_eq!(first.headers["ratelimit"], "\"default\";r=1;t=1800");
    get_from(&client, addr, "/", &[]).await;
    let third = get_from(&client, addr, "/", &[]).await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    // 30 minutes, less the milliseconds this test took, rounded up.
    assert_eq!(third.headers["retry-after"], "1800");
    assert_eq!(third.headers["ratelimit"], "\"default\";r=0;t=1800");
    assert_eq!(third.headers["content-type"], "application/problem+json");
    assert!(third.body.contains("\"status\":429"));
}

#[tokio::test]
async fn each_peer_address_has_its_own_limit() {
    let layer = RateLimitLayer::new(KeyedLimiter::new(per_hour(1)), PeerIp::new());
    let addr = serve(hello().layer(layer)).await;
    let (one, two) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    assert_eq!(get_from(&one, addr, "/", &[]).await.status, 200);
    assert_eq!(get_from(&one, addr, "/", &[]).await.status, 429);
    assert_eq!(get_from(&two, addr, "/", &[]).await.status, 200);
    assert_eq!(get_from(&two, addr, "/", &[]).await.status, 429);
}

#[tokio::test]
async fn a_server_without_connect_info_answers_500_naming_the_fix() {
    let layer = RateLimitLayer::new(KeyedLimiter::new(per_hour(1)), PeerIp::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, hello().layer(layer)).await.unwrap() });
    let answer = get_from(&client_from("127.0.0.1"), addr, "/", &[]).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        answer
            .body
            .contains("into_make_service_with_connect_info::<SocketAddr>()")
    );
}

#[tokio::test]
async fn trusted_proxy_headers_cannot_be_spoofed() {
    // 127.0.0.1 is the trusted proxy; 127.0.0.2 is a client connecting
    // directly. One request per key per hour.
    let x = ClientIp::x_forwarded_for(["127.0.0.1/32".parse().unwrap()]);
    let f = ClientIp::forwarded(["127.0.0.1/32".parse().unwrap()]);
    let app = Router::new()
        .route(
            "/x",
            get(|| async { "x" }).layer(RateLimitLayer::new(KeyedLimiter::new(per_hour(1)), x)),
        )
        .route(
            "/f",
            get(|| async { "f" }).layer(RateLimitLayer::new(KeyedLimiter::new(per_hour(1)), f)),
        );
    let addr = serve(app).await;
    let proxy = client_from("127.0.0.1");
    let status = |path: &'static str, headers: Vec<(&'static str, &'static str)>| {
        let proxy = proxy.clone();
        async move { get_from(&proxy, addr, path, &headers).await.status }
    };
    let xff = "x-forwarded-for";

    // The proxy appended 203.0.113.9; whatever the client wrote to the left
    // of it changes nothing.
    assert_eq!(status("/x", vec![(xff, "6.6.6.6, 203.0.113.9")]).await, 200);
    assert_eq!(status("/x", vec![(xff, "7.7.7.7, 203.0.113.9")]).await, 429);
    assert_eq!(status("/x", vec![(xff, "203.0.113.9")]).await, 429);
    // `unknown` stops the walk at the proxy: a bucket of its own, shared by
    // every such request, whatever precedes it.
    assert_eq!(status("/x", vec![(xff, "1.1.1.1, unknown")]).await, 200);
    assert_eq!(status("/x", vec![(xff, "2.2.2.2, unknown")]).await, 429);
    // IPv6 with a port, in the RFC 7239 syntax, by its /64.
    let v6 = "for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\"";
    assert_eq!(status("/f", vec![("forwarded", v6)]).await, 200);
    let same_64 = "for=\"[2001:db8:cafe::18]:80\"";
    assert_eq!(status("/f", vec![("forwarded", same_64)]).await, 429);
    // An obfuscated identifier stops the walk too.
    assert_eq!(
        status("/f", vec![("forwarded", "for=1.1.1.1, for=_abc")]).await,
        200
    );
    assert_eq!(status("/f", vec![("forwarded", "for=_xyz")]).await, 429);

    // A client that is no proxy is keyed by its own address, whatever it
    // claims.
    let direct = client_from("127.0.0.2");
    let claims = [(xff, "198.51.100.1")];
    assert_eq!(get_from(&direct, addr, "/x", &claims).await.status, 200);
    let claims = [(xff, "198.51.100.2")];
    assert_eq!(get_from(&direct, addr, "/x", &claims).await.status, 429);
}

#[tokio::test]
async fn one_layer_on_several_routes_shares_its_state() {
    let layer = RateLimitLayer::new(RateLimiter::new(per_hour(2)), Global);
    let app = Router::new()
        .route("/a", get(|| async { "a" }).layer(layer.clone()))
        .route("/b", get(|| async { "b" }).layer(layer.clone()))
        .route("/free", get(|| async { "free" }));
    let addr = serve(app).await;
    let client = client_from("127.0.0.1");
    assert_eq!(get_from(&client, addr, "/a", &[]).await.status, 200);
    assert_eq!(get_from(&client, addr, "/b", &[]).await.status, 200);
    assert_eq!(get_from(&client, addr, "/a", &[]).await.status, 429);
    assert_eq!(get_from(&client, addr, "/b", &[]).await.status, 429);
    assert_eq!(get_from(&client, addr, "/free", &[]).await.status, 200);
}

#[tokio::test]
async fn user_and_route_template_make_the_key() {
    let key = (Header::new(http::HeaderName::from_static("x-user")), Route);
    let app = Router::new()
        .route("/users/{id}", get(|| async { "user" }))
        .route("/orders", get(|| async { "orders" }))
        .layer(RateLimitLayer::new(KeyedLimiter::new(per_hour(1)), key));
    let addr = serve(app).await;
    let client = client_from("127.0.0.1");
    let alice = [("x-user", "alice")];
    assert_eq!(
        get_from(&client, addr, "/users/1", &alice).await.status,
        200
    );
    // Another id, the same template: the same key.
    assert_eq!(
        get_from(&client, addr, "/users/2", &alice).await.status,
        429
    );
    assert_eq!(get_from(&client, addr, "/orders", &alice).await.status, 200);
    let bob = [("x-user", "bob")];
    assert_eq!(get_from(&client, addr, "/users/3", &bob).await.status, 200);
}

/// What the observed backend did.
#[derive(Debug, PartialEq)]
enum Event {
    Granted { wait: Duration },
    Cancelled { given_back: bool },
}

/// A backend that reports each grant and cancellation.
struct Observed {
    limiter: RateLimiter,
    events: mpsc::UnboundedSender<Event>,
}

/// Decided through a future (no `decide_ready`): the layer's asynchronous
/// path.
impl AsyncDecide for Observed {
    type Key = ();
    type Ticket = Reservation;

    fn cancel(&self, key: &(), ticket: Reservation) -> bool {
        let given_back = Decide::cancel(&self.limiter, key, ticket);
        let _ = self.events.send(Event::Cancelled { given_back });
        given_back
    }

    fn decide_async(
        &self,
        key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<Reservation>, Denial>> + Send {
        let decision = Decide::decide(&self.limiter, key, cost, max_wait);
        async move {
            if let Ok(grant) = &decision {
                let _ = self.events.send(Event::Granted { wait: grant.wait });
            }
            decision
        }
    }
}

async fn next(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("the backend reports within 10 s")
        .unwrap()
}

#[tokio::test]
async fn delay_mode_holds_a_request_and_a_disconnect_refunds_it() {
    let (events, mut seen) = mpsc::unbounded_channel();
    // One request per 30 minutes; held up to 45 minutes.
    let backend = Observed {
        limiter: RateLimiter::new(Quota::with_period(Duration::from_secs(1800)).unwrap()),
        events,
    };
    let layer = RateLimitLayer::builder(backend, Global)
        .mode(Mode::Delay {
            max_delay: Duration::from_secs(2700),
        })
        .build()
        .unwrap();
    let addr = serve(hello().layer(layer)).await;
    let client = client_from("127.0.0.1");
    assert_eq!(get_from(&client, addr, "/", &[]).await.status, 200);
    assert_eq!(
        next(&mut seen).await,
        Event::Granted {
            wait: Duration::ZERO
        }
    );

    // Held for its slot ~30 min away; the client gives up.
    let held = {
        let client = client.clone();
        tokio::spawn(async move { get_from(&client, addr, "/", &[]).await })
    };
    let Event::Granted { wait } = next(&mut seen).await else {
        panic!("expected a grant")
    };
    assert!(wait > Duration::from_secs(1700), "{wait:?}");
    held.abort();
    assert_eq!(next(&mut seen).await, Event::Cancelled { given_back: true });

    // The next request gets that slot back, not the one after it (an hour
    // away, past the 45 minutes a request may be held: refused).
    let again = {
        let client = client.clone();
        tokio::spawn(async move { get_from(&client, addr, "/", &[]).await })
    };
    let Event::Granted { wait: again_wait } = next(&mut seen).await else {
        panic!("expected a grant")
    };
    assert!(again_wait <= wait, "{again_wait:?} > {wait:?}");
    let refused = get_from(&client, addr, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers["retry-after"], "3600");
    again.abort();
}

#[tokio::test]
async fn delay_mode_serves_a_held_request_at_its_slot() {
    // Two requests at once, one per second: the second is held for its
    // slot (up to a second away), then served.
    let (events, mut seen) = mpsc::unbounded_channel();
    let backend = Observed {
        limiter: RateLimiter::new(Quota::with_period(Duration::from_secs(1)).unwrap()),
        events,
    };
    let layer = RateLimitLayer::builder(backend, Global)
        .mode(Mode::Delay {
            max_delay: Duration::from_secs(60),
        })
        .build()
        .unwrap();
    let addr = serve(hello().layer(layer)).await;
    let client = client_from("127.0.0.1");
    let (a, b) = tokio::join!(
        get_from(&client, addr, "/", &[]),
        get_from(&client, addr, "/", &[])
    );
    assert_eq!((a.status, b.status), (StatusCode::OK, StatusCode::OK));
    let mut waits = [next(&mut seen).await, next(&mut seen).await];
    waits.sort_by_key(|e| match e {
        Event::Granted { wait } => *wait,
        Event::Cancelled { .. } => Duration::MAX,
    });
    assert_eq!(
        waits[0],
        Event::Granted {
            wait: Duration::ZERO
        }
    );
    assert!(matches!(waits[1], Event::Granted { wait } if wait > Duration::ZERO));
    // The held one was told none remain.
    assert!(
        [&a, &b]
            .iter()
            .any(|r| r.headers["ratelimit"] == "\"default\";r=0;t=1")
    );
}
