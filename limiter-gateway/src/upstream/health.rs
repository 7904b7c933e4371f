//! The active health check: one task per address probing
//! `GET {health_check.path}` every `interval` through the address's own
//! pool (so a probe exercises the same TLS and protocol as a request).
//!
//! A `2xx` within `timeout` passes; anything else fails. `unhealthy`
//! failures in a row take the address out ([`Endpoint::healthy`] false),
//! `healthy` passes in a row bring it back. Addresses start healthy, so a
//! starting gateway serves at once. A passing probe of an address that is
//! healthy by this count ends its passive ejection at once
//! ([`Balancer::readmit`]). The tasks hold the balancer weakly and end when
//! the proxy is dropped.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use http::Request;
use http_body_util::{BodyExt, Either, Empty};

use super::HealthCheck;
use super::balance::Balancer;

/// Starts the probes of every address of `balancer`, if it has a health
/// check and a tokio runtime is running.
pub(crate) fn spawn(balancer: &Arc<Balancer>) {
    let Some(check) = balancer.pool.health_check.clone() else {
        return;
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(upstream = %balancer.name, "no runtime: health checks not started");
        return;
    };
    for i in 0..balancer.endpoints.len() {
        runtime.spawn(probe_loop(Arc::downgrade(balancer), i, check.clone()));
    }
}

async fn probe(balancer: &Balancer, i: usize, check: &HealthCheck) -> bool {
    let Some(uri) = balancer.uri(&check.path) else {
        return false;
    };
    let mut request = Request::new(Either::Right(Empty::new()));
    *request.uri_mut() = uri;
    if let Ok(host) = http::HeaderValue::from_str(balancer.origin.1.as_str()) {
        request.headers_mut().insert(http::header::HOST, host);
    }
    let client = &balancer.endpoints[i].client;
    let exchange = async move {
        let response = client.request(request).await.ok()?;
        let ok = response.status().is_success();
        // Read the body so that the connection goes back to the pool.
        response.into_body().collect().await.ok()?;
        Some(ok)
    };
    matches!(
        tokio::time::timeout(check.timeout, exchange).await,
        Ok(Some(true))
    )
}

async fn probe_loop(balancer: Weak<Balancer>, i: usize, check: HealthCheck) {
    let mut tick = limiter_async::interval(check.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut passes, mut fails) = (0u32, 0u32);
    loop {
        tick.tick().await;
        let Some(b) = balancer.upgrade() else { return };
        let passed = probe(&b, i, &check).await;
        let endpoint = &b.endpoints[i];
        // Relaxed: this task is the only writer; readers take it as a hint.
        let healthy = endpoint.healthy.load(Ordering::Relaxed);
        if passed {
            (passes, fails) = (passes.saturating_add(1), 0);
        } else {
            (passes, fails) = (0, fails.saturating_add(1));
        }
        let verdict = if healthy {
            fails < check.unhealthy
        } else {
            passes >= check.healthy
        };
        if verdict != healthy {
            // Relaxed: as above.
            endpoint.healthy.store(verdict, Ordering::Relaxed);
            if verdict {
                tracing::info!(upstream = %b.name, address = %endpoint.addr, "upstream address healthy again");
            } else {
                tracing::warn!(upstream = %b.name, address = %endpoint.addr, path = %check.path, "upstream address failed its health check");
            }
            b.publish();
        }
        if passed && verdict {
            b.readmit(i);
        }
    }
}
