//! The layer's metrics, read from a debugging recorder (metrics-util):
//! the limit, the in-flight count on admission, rejection and completion,
//! rejections, the queue wait and the minimum RTT; and the estimator fed
//! through the layer end to end: Gradient2 in front of a service whose
//! latency is raised mid-run cuts its limit and sheds (paused time).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use limiter_concurrency::http::ConcurrencyLimitLayer;
use limiter_concurrency::{Bounds, ConcurrencyLimiter, Gradient2, QueueOrder, Vegas};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tower::{Layer, Service, ServiceExt, service_fn};

/// The inner service: answers (an empty body) after the number of
/// milliseconds its path names (`/25`).
fn sleeper()
-> impl Service<Request<()>, Response = Response<Full<Bytes>>, Error = Infallible, Future = impl Send>
+ Clone
+ Send
+ 'static {
    service_fn(|request: Request<()>| async move {
        let ms: u64 = request.uri().path()[1..].parse().unwrap();
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, Infallible>(Response::new(Full::default()))
    })
}

/// The layer's metrics (label `limiter="api"`) set since the previous
/// call: the debugging recorder's snapshot swaps every counter and gauge
/// to 0, so a value here proves it was written since the last look.
fn written(snapshotter: &Snapshotter) -> HashMap<String, DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, _)| key.key().labels().any(|l| l.value() == "api"))
        .map(|(key, _, _, v)| (key.key().name().to_owned(), v))
        .collect()
}

fn gauge(v: f64) -> DebugValue {
    DebugValue::Gauge(v.into())
}

#[tokio::test(start_paused = true)]
async fn every_metric_moves_when_its_event_happens() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let limiter = ConcurrencyLimiter::adaptive(Vegas::new(Bounds::new(2, 2, 2).unwrap()))
        .queue(1, QueueOrder::Fifo)
        .build()
        .unwrap();
    let layer = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimitLayer::new("api", limiter.clone()).wait(Duration::from_millis(100))
    });
    let service = layer.layer(sleeper());
    let call = |ms: u64| {
        let service = service.clone();
        tokio::spawn(async move {
            let request = Request::get(format!("/{ms}")).body(()).unwrap();
            service.oneshot(request).await.unwrap().status()
        })
    };
    // Published when the layer is built: the limit, nothing in flight.
    let m = written(&snapshotter);
    assert_eq!(m["concurrency_limit"], gauge(2.0));
    assert_eq!(m["concurrency_in_flight"], gauge(0.0));

    // Two admitted: the gauge is written on each admission, while they run.
    let a = call(10);
    tokio::task::yield_now().await;
    assert_eq!(written(&snapshotter)["concurrency_in_flight"], gauge(1.0));
    let b = call(30);
    tokio::task::yield_now().await;
    assert_eq!(written(&snapshotter)["concurrency_in_flight"], gauge(2.0));
    // A third waits in the queue (nothing written); a fourth finds the
    // queue full and is refused: counted, its (zero) wait recorded, the
    // in-flight gauge written on the rejection too.
    let c = call(10);
    tokio::task::yield_now().await;
    assert_eq!(limiter.waiting(), 1);
    assert_eq!(written(&snapshotter)["concurrency_in_flight"], gauge(0.0));
    let d = call(10);
    assert_eq!(d.await.unwrap(), StatusCode::SERVICE_UNAVAILABLE);
    let m = written(&snapshotter);
    assert_eq!(m["concurrency_rejected_total"], DebugValue::Counter(1));
    assert_eq!(m["concurrency_in_flight"], gauge(2.0));
    assert_eq!(
        m["concurrency_queue_wait_seconds"],
        DebugValue::Histogram(vec![0.0.into()])
    );

    // `a` finishes at 10 ms and hands its permit to `c`, which waited
    // exactly 10 ms; all three finish and the gauges end at the limit and
    // nothing in flight.
    assert_eq!(a.await.unwrap(), StatusCode::OK);
    assert_eq!(c.await.unwrap(), StatusCode::OK);
    assert_eq!(b.await.unwrap(), StatusCode::OK);
    let m = written(&snapshotter);
    assert_eq!(
        m["concurrency_queue_wait_seconds"],
        DebugValue::Histogram(vec![0.01.into()])
    );
    assert_eq!(m["concurrency_in_flight"], gauge(0.0));
    assert_eq!(m["concurrency_limit"], gauge(2.0));
    assert_eq!(m["concurrency_rejected_total"], DebugValue::Counter(0));
    // No window complete yet: no minimum RTT published.
    assert_eq!(limiter.min_rtt(), None);
    assert_eq!(m["concurrency_min_rtt_seconds"], gauge(0.0));

    // Vegas's first window is 30 samples: the three above (10, 30 and
    // 10 ms) and 27 of 7 ms. It completes with the 27th; its mean RTT,
    // 239/30 ms, is the first no-load RTT, published in seconds.
    for _ in 0..26 {
        assert_eq!(call(7).await.unwrap(), StatusCode::OK);
    }
    assert_eq!(limiter.min_rtt(), None);
    assert_eq!(call(7).await.unwrap(), StatusCode::OK);
    let rtt = Duration::from_nanos(239_000_000 / 30);
    assert_eq!(limiter.min_rtt(), Some(rtt));
    assert_eq!(
        written(&snapshotter)["concurrency_min_rtt_seconds"],
        gauge(rtt.as_secs_f64())
    );
}

/// Gradient2 through the layer: an open loop of one request per
/// millisecond; the inner latency rises from 10 ms to 100 ms at 2 s. The
/// longer RTT cuts the limit (the gradient reads queueing) and requests
/// beyond it are shed at once, where before the raise none were.
#[tokio::test(start_paused = true)]
async fn raised_inner_latency_cuts_a_gradient2_limit_and_sheds() {
    let limiter = ConcurrencyLimiter::adaptive(Gradient2::new(Bounds::new(20, 4, 200).unwrap()))
        .build()
        .unwrap();
    let service = ConcurrencyLimitLayer::new("e2e", limiter.clone()).layer(sleeper());
    let latency = Arc::new(AtomicU64::new(10));
    let shed = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let mut limit_before = 0;
    let mut lowest_after = u32::MAX;
    let mut shed_before = 0;
    for ms in 0..4000u64 {
        if ms == 2000 {
            limit_before = limiter.limit();
            shed_before = shed.load(Ordering::Relaxed);
            latency.store(100, Ordering::Relaxed);
        }
        if ms > 2000 {
            lowest_after = lowest_after.min(limiter.limit());
        }
        let service = service.clone();
        let (latency, shed) = (latency.clone(), shed.clone());
        tasks.push(tokio::spawn(async move {
            let path = format!("/{}", latency.load(Ordering::Relaxed));
            let request = Request::get(path).body(()).unwrap();
            if service.oneshot(request).await.unwrap().status() != StatusCode::OK {
                // Relaxed: read after the tasks are joined or between steps
                // of this single-threaded runtime.
                shed.fetch_add(1, Ordering::Relaxed);
            }
        }));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let shed_after = shed.load(Ordering::Relaxed) - shed_before;
    // At 10 ms and 1/ms about 10 are in flight: the limit stays above that
    // and nothing is shed.
    assert_eq!(shed_before, 0);
    assert!(limit_before > 10, "limit before the raise: {limit_before}");
    // At 100 ms the same load needs 100 in flight; the limit is cut
    // instead, below where it was, and the excess is shed.
    assert!(
        lowest_after < limit_before,
        "limit before {limit_before}, lowest after {lowest_after}"
    );
    assert!(shed_after > 500, "shed after the raise: {shed_after}");
    assert_eq!(limiter.in_flight(), 0);
}
