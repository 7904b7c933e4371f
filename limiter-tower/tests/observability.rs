//! Metrics (through metrics-util's debugging recorder) and the one tracing
//! error for a missing peer address.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use limiter_async::TokioClock;
use limiter_core::{Quota, RateLimiter};
use limiter_keyed::{KeyedLimiter, WhenFull};
use limiter_tower::{Global, Header, Mode, PeerIp, RateLimitLayer};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tower::{Layer, ServiceExt, service_fn};

type Body = Full<Bytes>;

fn ok_service() -> impl tower::Service<
    Request<Body>,
    Response = Response<Body>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
+ Send
+ 'static {
    service_fn(|_r: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::default())) })
}

/// Sums of every snapshot taken so far: the debugging recorder resets each
/// value when it is read, so counters and gauges add up across snapshots.
#[derive(Default)]
struct Totals {
    counters: HashMap<(String, String), u64>,
    gauges: HashMap<(String, String), f64>,
    histograms: HashMap<(String, String), Vec<f64>>,
    labels: Vec<Vec<String>>,
}

impl Totals {
    fn take(&mut self, snapshotter: &Snapshotter) {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let key = key.key();
            let limiter = key
                .labels()
                .find(|l| l.key() == "limiter")
                .map(|l| l.value().to_owned())
                .unwrap_or_default();
            self.labels
                .push(key.labels().map(|l| l.key().to_owned()).collect());
            let id = (key.name().to_owned(), limiter);
            match value {
                DebugValue::Counter(n) => *self.counters.entry(id).or_default() += n,
                DebugValue::Gauge(g) => *self.gauges.entry(id).or_default() += g.into_inner(),
                DebugValue::Histogram(h) => self
                    .histograms
                    .entry(id)
                    .or_default()
                    .extend(h.into_iter().map(|v| v.into_inner())),
            }
        }
    }

    fn counter(&self, name: &str, limiter: &str) -> u64 {
        self.counters[&(name.to_owned(), limiter.to_owned())]
    }

    fn gauge(&self, name: &str, limiter: &str) -> f64 {
        self.gauges[&(name.to_owned(), limiter.to_owned())]
    }
}

#[tokio::test(start_paused = true)]
async fn decisions_are_counted_by_limiter_name() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let limiter = RateLimiter::with_clock(
        Quota::with_period(Duration::from_millis(500)).unwrap(),
        TokioClock::new(),
    );
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(limiter, Global)
            .name("m")
            .mode(Mode::Delay {
                max_delay: Duration::from_millis(500),
            })
            .bypass(|head| head.uri().path() == "/health")
            .build()
            .unwrap()
    });
    let svc = layer.layer(ok_service());
    let request = || Request::new(Body::default());

    assert_eq!(svc.clone().oneshot(request()).await.unwrap().status(), 200);
    let delayed = tokio::spawn(svc.clone().oneshot(request()));
    tokio::task::yield_now().await;
    let mut totals = Totals::default();
    totals.take(&snapshotter);
    assert_eq!(totals.gauge("rate_limit_queue_size", "m"), 1.0);
    assert_eq!(svc.clone().oneshot(request()).await.unwrap().status(), 429);
    let health = Request::builder()
        .uri("/health")
        .body(Body::default())
        .unwrap();
    assert_eq!(svc.clone().oneshot(health).await.unwrap().status(), 200);
    assert_eq!(delayed.await.unwrap().unwrap().status(), 200);

    totals.take(&snapshotter);
    assert_eq!(totals.counter("rate_limit_allowed_total", "m"), 2);
    assert_eq!(totals.counter("rate_limit_delayed_total", "m"), 1);
    assert_eq!(totals.counter("rate_limit_rejected_total", "m"), 1);
    assert_eq!(totals.counter("rate_limit_bypassed_total", "m"), 1);
    assert_eq!(totals.counter("rate_limit_backend_errors_total", "m"), 0);
    assert_eq!(totals.gauge("rate_limit_queue_size", "m"), 0.0);
    assert_eq!(
        totals.histograms[&("rate_limit_wait_seconds".to_owned(), "m".to_owned())],
        [0.5]
    );
    // No series is labelled by key.
    assert!(totals.labels.iter().all(|l| l == &["limiter"]));
}

#[tokio::test(start_paused = true)]
async fn backend_errors_are_counted_open_or_closed() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    for (name, fail_open) in [("open", true), ("closed", false)] {
        let table: KeyedLimiter<http::HeaderValue, TokioClock> =
            KeyedLimiter::builder(Quota::per_hour(1).unwrap())
                .clock(TokioClock::new())
                .max_keys(1)
                .when_full(WhenFull::RejectNewKeys)
                .build()
                .unwrap();
        let layer = metrics::with_local_recorder(&recorder, || {
            RateLimitLayer::builder(table, Header::new(http::HeaderName::from_static("x-user")))
                .name(name)
                .fail_open(fail_open)
                .build()
                .unwrap()
        });
        let svc = layer.layer(ok_service());
        for user in ["a", "b", "c"] {
            let r = Request::builder()
                .header("x-user", user)
                .body(Body::default())
                .unwrap();
            let status = svc.clone().oneshot(r).await.unwrap().status();
            let expected = if user == "a" || fail_open { 200 } else { 503 };
            assert_eq!(status, expected, "{name} {user}");
        }
        let mut totals = Totals::default();
        totals.take(&snapshotter);
        assert_eq!(totals.counter("rate_limit_backend_errors_total", name), 2);
        assert_eq!(totals.counter("rate_limit_allowed_total", name), 1);
    }
}

/// Counts ERROR events.
struct Errors(Arc<AtomicUsize>);

impl tracing::Subscriber for Errors {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::ERROR {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(start_paused = true)]
async fn a_missing_peer_is_logged_once() {
    let errors = Arc::new(AtomicUsize::new(0));
    let _default =
        tracing::dispatcher::set_default(&tracing::Dispatch::new(Errors(Arc::clone(&errors))));
    let limiter = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let svc = RateLimitLayer::new(limiter, PeerIp::new()).layer(ok_service());
    for _ in 0..3 {
        let response = svc
            .clone()
            .oneshot(Request::new(Body::default()))
            .await
            .unwrap();
        assert_eq!(response.status(), 500);
    }
    assert_eq!(errors.load(Ordering::SeqCst), 1);
}

/// A series: its name, its labels, its value.
type Series = (String, Vec<(String, String)>, DebugValue);

#[tokio::test(start_paused = true)]
async fn routes_are_labelled_when_asked() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // Per-request handles resolve with the recorder current then.
    let _local = metrics::set_default_local_recorder(&recorder);
    let limiter = RateLimiter::with_clock(Quota::per_hour(1).unwrap(), TokioClock::new());
    let layer = RateLimitLayer::builder(limiter, Global)
        .name("r")
        .label_routes(true)
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/a/{id}", axum::routing::get(|| async { "a" }))
        .route("/b", axum::routing::get(|| async { "b" }))
        .layer(layer);
    let get = |uri: &str| Request::get(uri).body(axum::body::Body::empty()).unwrap();
    assert_eq!(
        app.clone().oneshot(get("/a/1")).await.unwrap().status(),
        200
    );
    assert_eq!(
        app.clone().oneshot(get("/a/2")).await.unwrap().status(),
        429
    );
    assert_eq!(app.oneshot(get("/b")).await.unwrap().status(), 429);

    let series: Vec<Series> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let labels = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            (key.key().name().to_owned(), labels, value)
        })
        .collect();
    let count = |name: &str, route: &str| {
        series
            .iter()
            .find(|(n, labels, _)| {
                n == name
                    && labels.contains(&("limiter".to_owned(), "r".to_owned()))
                    && labels.contains(&("route".to_owned(), route.to_owned()))
            })
            .map(|(_, _, v)| v)
    };
    assert_eq!(
        count("rate_limit_allowed_total", "/a/{id}"),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        count("rate_limit_rejected_total", "/a/{id}"),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        count("rate_limit_rejected_total", "/b"),
        Some(&DebugValue::Counter(1))
    );
    // The raw path never becomes a label.
    assert!(series.iter().all(|(_, labels, _)| {
        labels
            .iter()
            .all(|(_, v)| !v.starts_with("/a/1") && !v.starts_with("/a/2"))
    }));
}
