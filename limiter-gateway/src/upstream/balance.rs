//! [`Balancer`]: the addresses of one upstream, the choice of one per
//! attempt, passive ejection, and the retry rule of the module `upstream`.
//!
//! The choice is the pure function [`pick`] of each address's
//! availability and in-flight count; [`Balancer`] keeps that state in
//! atomics. Time is tokio's clock (virtual in paused tests), in
//! nanoseconds since the balancer was built.
//!
//! Round robin takes the available addresses in turn: the k-th request
//! goes to available address `k mod count`, so with one of three ejected
//! the other two alternate.
//!
//! Ejection: an address whose connects fail `max_fails` times in a row is
//! skipped for `fail_timeout` (nginx's `max_fails`/`fail_timeout`); after
//! that it takes requests again, and its next failure ejects it again. A
//! successful response resets the count. Every connect failure counts,
//! also one a retry on another address hid from the client (those are
//! counted in `gateway_upstream_retries_total`). A passing active health
//! probe ends an ejection at once (as Envoy returns a host whose health
//! check passes). The gauge of available addresses follows every change:
//! ejection, its end (a timer per ejection) and the health verdict.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use super::Upstream;
use super::connect::{AddressClient, SendError, TlsTarget};
use super::{Balance, MAX_ATTEMPTS, PoolConfig};
use crate::response::ResponseBody;
use crate::settings::Timeouts;
use bytes::Bytes;
use futures::future::Either;
use http::{Request, Response, Uri};
use http_body_util::Empty;

/// The body sent upstream: the client's, or none (a request whose body is
/// empty is sent with `Empty`, which makes it replayable).
pub(crate) type UpstreamBody = http_body_util::Either<crate::body::ClientBody, Empty<Bytes>>;

/// What [`pick`] knows of one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    /// Neither ejected nor failing its health check.
    pub(crate) available: bool,
    /// Requests waiting for their response head.
    pub(crate) in_flight: usize,
    /// Already tried for this request.
    pub(crate) tried: bool,
}

/// The address for the next attempt of the `turn`-th request: among the
/// untried ones, the available ones if any (else all untried ones, failing
/// open); round robin takes candidate `turn mod count` (in address order),
/// least requests the one with the fewest in flight (among equals the first
/// from address `turn mod n` on). `None` when every address has been tried.
pub(crate) fn pick(views: &[View], turn: usize, balance: Balance) -> Option<usize> {
    let n = views.len();
    let untried = || (0..n).filter(|&i| !views[i].tried);
    let any_available = untried().any(|i| views[i].available);
    let candidates = || untried().filter(|&i| views[i].available || !any_available);
    match balance {
        Balance::RoundRobin => {
            let count = candidates().count();
            candidates().nth(turn.checked_rem(count)?)
        }
        Balance::LeastRequests => {
            let start = turn.checked_rem(n)?;
            candidates().min_by_key(|&i| (views[i].in_flight, (i + n - start) % n))
        }
    }
}

/// One address: its pool and its state.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) addr: Arc<str>,
    pub(crate) client: AddressClient,
    in_flight: AtomicUsize,
    fails: AtomicU32,
    /// Nanoseconds since `Balancer::epoch` until which it is ejected.
    ejected_until: AtomicU64,
    /// The health check's verdict (true without one).
    pub(crate) healthy: AtomicBool,
}

/// The addresses of one upstream.
#[derive(Debug)]
pub(crate) struct Balancer {
    pub(crate) name: String,
    pub(crate) endpoints: Box<[Endpoint]>,
    pub(crate) pool: PoolConfig,
    /// The URL's scheme and authority, for the URI of every request.
    pub(crate) origin: (http::uri::Scheme, http::uri::Authority),
    next: AtomicUsize,
    epoch: tokio::time::Instant,
    available_gauge: metrics::Gauge,
    retries: metrics::Counter,
    /// Itself, for the timers that end ejections.
    me: Weak<Balancer>,
}

/// Decrements an in-flight count when dropped (a cancelled request too).
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        // Relaxed: a load-balancing hint; no other memory depends on it.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn idempotent(method: &http::Method) -> bool {
    use http::Method;
    [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::TRACE,
        Method::PUT,
        Method::DELETE,
    ]
    .contains(method)
}

impl Balancer {
    /// The balancer of `upstream`; errors name the field.
    pub(crate) fn new(upstream: &Upstream, timeouts: &Timeouts) -> Result<Arc<Balancer>, String> {
        let pool = upstream.pool.clone();
        let scheme = upstream
            .url
            .scheme()
            .cloned()
            .unwrap_or(http::uri::Scheme::HTTP);
        let authority = upstream.url.authority().cloned().ok_or("no host")?;
        let tls = if scheme == http::uri::Scheme::HTTPS {
            let name = rustls::pki_types::ServerName::try_from(
                authority.host().trim_matches(['[', ']']).to_owned(),
            )
            .map_err(|e| format!("`{}`: {e}", authority.host()))?;
            Some(TlsTarget::new(&pool.ca, pool.protocol, name)?)
        } else {
            None
        };
        let default_port = if tls.is_some() { 443 } else { 80 };
        let addresses = if pool.addresses.is_empty() {
            vec![format!(
                "{}:{}",
                authority.host(),
                authority.port_u16().unwrap_or(default_port)
            )]
        } else {
            pool.addresses.clone()
        };
        let endpoints = addresses
            .into_iter()
            .map(|addr| {
                let addr: Arc<str> = addr.into();
                let client = AddressClient::new(
                    &upstream.name,
                    Arc::clone(&addr),
                    timeouts,
                    tls.clone(),
                    pool.protocol,
                );
                Endpoint {
                    addr,
                    client,
                    in_flight: AtomicUsize::new(0),
                    fails: AtomicU32::new(0),
                    ejected_until: AtomicU64::new(0),
                    healthy: AtomicBool::new(true),
                }
            })
            .collect::<Box<[_]>>();
        let available_gauge = metrics::gauge!("gateway_upstream_available_addresses", "upstream" => upstream.name.clone());
        available_gauge.set(endpoints.len() as f64);
        let retries = metrics::counter!("gateway_upstream_retries_total", "upstream" => upstream.name.clone());
        retries.increment(0);
        Ok(Arc::new_cyclic(|me| Balancer {
            name: upstream.name.clone(),
            endpoints,
            pool,
            origin: (scheme, authority),
            next: AtomicUsize::new(0),
            epoch: tokio::time::Instant::now(),
            available_gauge,
            retries,
            me: me.clone(),
        }))
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether address `i` takes requests now.
    pub(crate) fn available(&self, i: usize, now: u64) -> bool {
        let e = &self.endpoints[i];
        // Relaxed (both): verdicts of the health check and of ejection are
        // hints read on their own; nothing else is published through them.
        e.healthy.load(Ordering::Relaxed) && e.ejected_until.load(Ordering::Relaxed) <= now
    }

    /// Sets the gauge of available addresses.
    pub(crate) fn publish(&self) {
        let now = self.now();
        let n = (0..self.endpoints.len())
            .filter(|&i| self.available(i, now))
            .count();
        self.available_gauge.set(n as f64);
    }

    fn connect_failed(&self, i: usize) {
        let e = &self.endpoints[i];
        // Relaxed: a failure count; a race between two failures at most
        // ejects one attempt early or late.
        let fails = e.fails.fetch_add(1, Ordering::Relaxed) + 1;
        if fails >= self.pool.max_fails {
            e.fails.store(0, Ordering::Relaxed);
            let now = self.now();
            let until = now.saturating_add(
                u64::try_from(self.pool.fail_timeout.as_nanos()).unwrap_or(u64::MAX),
            );
            // Relaxed: see `available`.
            let before = e.ejected_until.swap(until, Ordering::Relaxed);
            tracing::warn!(upstream = %self.name, address = %e.addr, fail_timeout = ?self.pool.fail_timeout, "upstream address ejected after connect failures");
            self.publish();
            if before <= now {
                // Not ejected already: no timer is waiting for its end.
                tokio::spawn(end_of_ejection(self.me.clone(), i));
            }
        }
    }

    /// Ends the ejection of address `i`, if any (its health probe passed).
    pub(crate) fn readmit(&self, i: usize) {
        let e = &self.endpoints[i];
        // Relaxed: see `available` and `connect_failed`.
        if e.ejected_until.swap(0, Ordering::Relaxed) > self.now() {
            e.fails.store(0, Ordering::Relaxed);
            tracing::info!(upstream = %self.name, address = %e.addr, "ejected upstream address passed its health check: back in rotation");
            self.publish();
        }
    }

    /// Sends `request` (its URI already the upstream's) to an address,
    /// retrying as the module `upstream` says.
    pub(crate) fn send(
        &self,
        request: Request<UpstreamBody>,
    ) -> impl Future<Output = Result<Response<ResponseBody>, SendError>> + Send + '_ {
        if self.endpoints.len() == 1 {
            // Nothing to choose or fail over to: the fast path, whose
            // future is the address's own.
            Either::Left(self.endpoints[0].client.send(request))
        } else {
            // Boxed: the retry loop's state (the request and its copies)
            // would size, and be copied with, every request's future.
            Either::Right(Box::pin(self.send_any(request)))
        }
    }

    /// [`send`](Balancer::send) over several addresses.
    async fn send_any(
        &self,
        request: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, SendError> {
        let n = self.endpoints.len();
        // A copy to replay, kept only when there is another address to try.
        let replay = match request.body() {
            http_body_util::Either::Right(_) => Some(clone_request(&request)),
            http_body_util::Either::Left(_) => None,
        };
        let retry_after_send = idempotent(request.method());
        let mut request = Some(request);
        let mut tried = [false; 64];
        // Relaxed: a rotating turn; any value is a valid choice.
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let now = self.now();
            let views: Vec<View> = (0..n)
                .map(|i| View {
                    available: self.available(i, now),
                    // Relaxed: see `InFlight`.
                    in_flight: self.endpoints[i].in_flight.load(Ordering::Relaxed),
                    tried: tried.get(i).copied().unwrap_or(false),
                })
                .collect();
            let i = pick(&views, turn, self.pool.balance).unwrap_or(turn % n);
            if let Some(t) = tried.get_mut(i) {
                *t = true;
            }
            let endpoint = &self.endpoints[i];
            let last = attempt >= MAX_ATTEMPTS.min(n);
            // The original goes on the last attempt or the only one (no
            // copy: not retried); copies before it.
            let this = match (&replay, last, request.take()) {
                (Some(copy), false, original) => {
                    request = original;
                    clone_request(copy)
                }
                (_, _, Some(original)) => original,
                (Some(copy), true, None) => clone_request(copy),
                (None, _, None) => unreachable!("without a copy there is one attempt"),
            };
            // Relaxed: see `InFlight`.
            endpoint.in_flight.fetch_add(1, Ordering::Relaxed);
            let guard = InFlight(&endpoint.in_flight);
            let result = endpoint.client.send(this).await;
            drop(guard);
            match result {
                Ok(response) => {
                    // Relaxed: see `connect_failed`.
                    endpoint.fails.store(0, Ordering::Relaxed);
                    return Ok(response);
                }
                Err(error) => {
                    if error.is_connect() {
                        self.connect_failed(i);
                    }
                    let retryable = replay.is_some() && (error.is_connect() || retry_after_send);
                    if last || !retryable {
                        return Err(error);
                    }
                    self.retries.increment(1);
                    tracing::debug!(upstream = %self.name, address = %endpoint.addr, %error, "retrying on another address");
                }
            }
        }
    }

    /// The URI of a request for `path_and_query` on this upstream.
    pub(crate) fn uri(&self, path_and_query: &str) -> Option<Uri> {
        Uri::builder()
            .scheme(self.origin.0.clone())
            .authority(self.origin.1.clone())
            .path_and_query(path_and_query)
            .build()
            .ok()
    }
}

/// Waits for the ejection of address `i` to end (an ejection extended
/// meanwhile too), then publishes the gauge.
async fn end_of_ejection(balancer: Weak<Balancer>, i: usize) {
    loop {
        let wait = {
            let Some(b) = balancer.upgrade() else { return };
            // Relaxed: see `available`.
            let until = b.endpoints[i].ejected_until.load(Ordering::Relaxed);
            let now = b.now();
            if until <= now {
                b.publish();
                return;
            }
            std::time::Duration::from_nanos(until - now)
        };
        tokio::time::sleep(wait).await;
    }
}

fn clone_request(copy: &Request<UpstreamBody>) -> Request<UpstreamBody> {
    let mut r = Request::new(http_body_util::Either::Right(Empty::new()));
    *r.method_mut() = copy.method().clone();
    *r.uri_mut() = copy.uri().clone();
    *r.version_mut() = copy.version();
    *r.headers_mut() = copy.headers().clone();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(spec: &[(bool, usize, bool)]) -> Vec<View> {
        spec.iter()
            .map(|&(available, in_flight, tried)| View {
                available,
                in_flight,
                tried,
            })
            .collect()
    }

    #[test]
    fn round_robin_skips_unavailable_and_tried() {
        let v = views(&[(true, 0, false), (false, 0, false), (true, 0, false)]);
        // The two available addresses alternate: each has every other turn.
        let turns: Vec<_> = (0..6).map(|t| pick(&v, t, Balance::RoundRobin)).collect();
        assert_eq!(turns, [0, 2, 0, 2, 0, 2].map(Some));
        let v = views(&[(true, 0, false), (true, 0, false), (true, 0, false)]);
        let turns: Vec<_> = (0..6).map(|t| pick(&v, t, Balance::RoundRobin)).collect();
        assert_eq!(turns, [0, 1, 2, 0, 1, 2].map(Some));
        let v = views(&[(true, 0, true), (false, 0, false), (true, 0, false)]);
        assert_eq!(pick(&v, 0, Balance::RoundRobin), Some(2));
        let v = views(&[(true, 0, true), (false, 0, false), (true, 0, true)]);
        // Only an unavailable one is left untried: fail open.
        assert_eq!(pick(&v, 0, Balance::RoundRobin), Some(1));
        let v = views(&[(true, 0, true), (true, 0, true)]);
        assert_eq!(pick(&v, 0, Balance::RoundRobin), None);
    }

    #[test]
    fn all_unavailable_fails_open() {
        let v = views(&[(false, 0, false), (false, 0, false)]);
        assert_eq!(pick(&v, 1, Balance::RoundRobin), Some(1));
        assert_eq!(pick(&v, 1, Balance::LeastRequests), Some(1));
    }

    #[test]
    fn least_requests_takes_the_least_loaded_available() {
        let v = views(&[
            (true, 3, false),
            (true, 1, false),
            (false, 0, false),
            (true, 1, false),
        ]);
        assert_eq!(pick(&v, 0, Balance::LeastRequests), Some(1));
        // Equals in turn from `start`.
        assert_eq!(pick(&v, 2, Balance::LeastRequests), Some(3));
        let v = views(&[(true, 3, false), (true, 1, true), (true, 2, false)]);
        assert_eq!(pick(&v, 0, Balance::LeastRequests), Some(2));
    }

    #[test]
    fn idempotent_methods_are_rfc_9110s() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(idempotent(&m.parse().unwrap()), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT"] {
            assert!(!idempotent(&m.parse().unwrap()), "{m}");
        }
    }
}
