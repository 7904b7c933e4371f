//! The HTTP/1 exchange in the request's own task, on a per-thread pool of
//! idle upstream connections.
//!
//! Guarantees, for a request to an HTTP/1 address (plain or TLS) that is
//! not an upgrade:
//! * it is written and its response read by the task that polls the
//!   request and then the response body: hyper's `client::conn::http1`
//!   connection is polled beside them (as Pingora joins both halves of a
//!   proxied request), never spawned; no channel to another task, no lock
//!   and nothing spawned per request;
//! * an idle connection waits in the pool of the thread that finished its
//!   last response (a `thread_local`: each worker runtime is one thread, so
//!   this is the worker's own pool), most recent on top; it is reused only
//!   when polling it shows it open and ready for a request, otherwise it is
//!   closed and the next one (or a new one) is tried. A request that a
//!   stale pooled connection gave back unsent goes on the next one;
//! * a connection returns to the pool only when its response body has
//!   ended; a body dropped before its end closes it. At most [`MAX_IDLE`]
//!   wait per address and thread, none longer than `timeouts.idle`
//!   (checked at checkout and by [`sweep`]);
//! * a thread whose pool is empty takes a connection another worker has
//!   not needed for a while (module `spare`), or else asks the other
//!   workers for their idle ones ([`serve_asks`]), before it dials;
//! * every new connection is counted in
//!   `gateway_upstream_connections_opened_total{upstream}`.
//!
//! h2 and `auto` addresses and upgrades keep hyper-util's pooled client
//! (module `connect`), which multiplexes h2 and hands over upgraded
//! connections.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker, ready};
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use super::balance::UpstreamBody;
use super::connect::{Connector, SendError, UpstreamStream};
use super::salvage::{Remains, spawn_salvage};
use super::spare::{self, SPARE_AFTER};
use crate::response::{Carrier, ResponseBody};

/// The most idle connections one thread keeps for one address.
pub(crate) const MAX_IDLE: usize = 1024;

type Conn = http1::Connection<UpstreamStream, UpstreamBody>;

/// One upstream connection: its request handle and its state machine,
/// which whoever holds it polls.
pub(super) struct Held {
    send: http1::SendRequest<UpstreamBody>,
    conn: Conn,
    /// The address's pool key.
    key: u64,
    /// How long it may idle in the pool.
    idle: Duration,
    /// Counts it each time it is kept after its client went away.
    pub(super) kept: metrics::Counter,
    /// Plain TCP (it may move to another worker, module `spare`).
    plain: bool,
}

struct Idle {
    held: Box<Held>,
    since: Instant,
}

thread_local! {
    /// This thread's idle connections by address key.
    static POOL: RefCell<HashMap<u64, Vec<Idle>>> = RefCell::new(HashMap::new());
}

/// Pool keys, one per address of every balancer built.
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// One address's per-thread pools and their settings.
#[derive(Debug)]
pub(crate) struct LocalPool {
    key: u64,
    idle: Duration,
    opened: metrics::Counter,
    kept: metrics::Counter,
}

impl LocalPool {
    /// The pools of a new address of `upstream`, whose connections idle at
    /// most `idle`.
    pub(crate) fn new(upstream: &str, idle: Duration) -> LocalPool {
        let opened = metrics::counter!("gateway_upstream_connections_opened_total", "upstream" => upstream.to_owned());
        opened.increment(0);
        let kept = metrics::counter!("gateway_upstream_connections_kept_total", "upstream" => upstream.to_owned());
        kept.increment(0);
        LocalPool {
            // Relaxed: a unique number; nothing is published with it.
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            idle,
            opened,
            kept,
        }
    }

    /// The most recent idle connection of this thread that is open and
    /// ready; the stale ones above it are closed.
    ///
    /// Polled without the task's waker: the connection returned is polled
    /// again at once, with it, by the exchange (`send`), and the others are
    /// closed; the task's waker would only make the request's handover wake
    /// the task that is sending it, a needless second poll of the whole
    /// connection.
    fn checkout(&self) -> Option<Box<Held>> {
        let mut quiet = Context::from_waker(Waker::noop());
        let cx = &mut quiet;
        POOL.try_with(|pool| {
            let mut pool = pool.borrow_mut();
            let idle = pool.get_mut(&self.key)?;
            while let Some(Idle {
                mut held, since, ..
            }) = idle.pop()
            {
                if since.elapsed() >= self.idle {
                    // The ones below waited longer still.
                    idle.clear();
                    return None;
                }
                if Pin::new(&mut held.conn).poll(cx).is_ready() {
                    continue;
                }
                if let Poll::Ready(Ok(())) = held.send.poll_ready(cx) {
                    return Some(held);
                }
            }
            None
        })
        .ok()
        .flatten()
    }

    /// A connection another worker gave up (module `spare`), on this
    /// thread's reactor.
    async fn adopt(&self) -> Option<Box<Held>> {
        let stream = spare::take(self.key)?;
        let stream = tokio::net::TcpStream::from_std(stream).ok()?;
        self.held(UpstreamStream::Plain(TokioIo::new(stream)))
            .await
            .ok()
    }

    /// A connection for a thread whose pool is empty: a spare, else one
    /// the other workers give when asked, else a new one (`true`).
    async fn dry(&self, connector: &Connector) -> Result<(Box<Held>, bool), SendError> {
        if let Some(held) = self.adopt().await {
            return Ok((held, false));
        }
        if connector.plain() {
            spare::ask(self.key).await;
            if let Some(held) = self.adopt().await {
                return Ok((held, false));
            }
        }
        Ok((self.open(connector).await?, true))
    }

    async fn open(&self, connector: &Connector) -> Result<Box<Held>, SendError> {
        let stream = connector.dial().await.map_err(SendError::Connect)?;
        let held = self.held(stream).await?;
        self.opened.increment(1);
        Ok(held)
    }

    /// A new HTTP/1 state machine on `stream` (no I/O).
    async fn held(&self, stream: UpstreamStream) -> Result<Box<Held>, SendError> {
        let plain = matches!(stream, UpstreamStream::Plain(_));
        let (send, conn) = http1::Builder::new()
            .handshake(stream)
            .await
            .map_err(SendError::Exchange)?;
        Ok(Box::new(Held {
            send,
            conn,
            key: self.key,
            idle: self.idle,
            kept: self.kept.clone(),
            plain,
        }))
    }

    /// Sends `request` (its URI the upstream's) on an idle connection of
    /// this thread or a new one, polling the connection in this task.
    ///
    /// # Errors
    ///
    /// No connection ([`SendError::Connect`]), or none that gave a
    /// response head.
    pub(crate) async fn send(
        &self,
        connector: &Connector,
        mut request: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, SendError> {
        origin_form(&mut request);
        loop {
            let pooled = self.checkout();
            let (mut held, fresh) = match pooled {
                Some(held) => (held, false),
                // Boxed: the dial (a TLS handshake's state included) would
                // otherwise size, and be copied with, every request's future.
                None => Box::pin(self.dry(connector)).await?,
            };
            let head: Head = Box::pin(held.send.try_send_request(request));
            let mut exchange = Exchange {
                held: Some(held),
                head: Some(head),
                polled: false,
            };
            match poll_fn(|cx| exchange.poll_head(cx)).await {
                Ok((response, held)) => {
                    let held = held.map(|h| h as Box<dyn Carrier>);
                    return Ok(response.map(|body| ResponseBody::carried(body, held)));
                }
                Err(mut error) => match error.take_message() {
                    // A stale pooled connection gave the request back unsent.
                    Some(unsent) if !fresh => request = unsent,
                    _ => return Err(SendError::Exchange(error.into_error())),
                },
            }
        }
    }
}

/// The request target in origin form (`/path?query`), as an HTTP/1 origin
/// server expects it (RFC 9112 §3.2.1), and `Host` from the URI if the
/// request has none.
fn origin_form(request: &mut Request<UpstreamBody>) {
    if !request.headers().contains_key(http::header::HOST)
        && let Some(host) = request.uri().authority()
        && let Ok(value) = http::HeaderValue::from_str(host.as_str())
    {
        request.headers_mut().insert(http::header::HOST, value);
    }
    if let Some(pq) = request.uri().path_and_query().cloned() {
        *request.uri_mut() = http::Uri::from(pq);
    }
}

pub(super) fn checkin(held: Box<Held>) {
    // A thread being torn down keeps nothing: the connection closes.
    let _ = POOL.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        let idle = pool.entry(held.key).or_default();
        if idle.len() < MAX_IDLE {
            idle.push(Idle {
                held,
                since: Instant::now(),
            });
        }
    });
}

/// Closes this thread's idle connections that waited past their idle
/// timeout or that their upstream closed, and gives those idle for
/// [`SPARE_AFTER`] to the other workers (module `spare`). Each worker runs
/// it now and then, so an address no request uses any more holds no
/// socket for long.
pub(crate) fn sweep() {
    sweep_giving(SPARE_AFTER);
}

/// [`sweep`], giving away the connections idle for `after`.
pub(super) fn sweep_giving(after: Duration) {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut given = Vec::new();
    let _ = POOL.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        for idle in pool.values_mut() {
            idle.retain_mut(|i| {
                i.since.elapsed() < i.held.idle
                    && Pin::new(&mut i.held.conn).poll(&mut cx).is_pending()
            });
            // Most recent on top: the long idle ones are at the bottom.
            let long = idle.partition_point(|i| i.since.elapsed() >= after);
            let (plain, tls): (Vec<_>, Vec<_>) = idle.drain(..long).partition(|i| i.held.plain);
            given.extend(plain.into_iter().filter_map(bare));
            // TLS connections stay with their worker, still the longest idle.
            idle.splice(0..0, tls);
        }
        pool.retain(|_, idle| !idle.is_empty());
    });
    spare::give(given);
}

/// Answers the other workers' asks (module `spare`) for as long as it is
/// polled: gives every idle plain-TCP connection of each address asked
/// for. Each worker polls it in its loop.
pub(crate) async fn serve_asks() {
    let mailbox = spare::Mailbox::open();
    loop {
        let asks = mailbox.asked().await;
        let mut given = Vec::new();
        let _ = POOL.try_with(|pool| {
            let mut pool = pool.borrow_mut();
            for (key, _) in &asks {
                if let Some(idle) = pool.get_mut(key) {
                    let (plain, tls): (Vec<_>, Vec<_>) = idle.drain(..).partition(|i| i.held.plain);
                    given.extend(plain.into_iter().filter_map(bare));
                    *idle = tls;
                }
            }
            pool.retain(|_, idle| !idle.is_empty());
        });
        spare::give(given);
        // Given: the answers go as `asks` drops.
        drop(asks);
    }
}

/// An idle plain-TCP connection as a socket off this thread's reactor.
fn bare(idle: Idle) -> Option<(u64, std::net::TcpStream, Instant, Duration)> {
    let Held {
        conn,
        key,
        idle: timeout,
        ..
    } = *idle.held;
    let parts = conn.into_parts();
    let UpstreamStream::Plain(io) = parts.io else {
        return None;
    };
    if !parts.read_buf.is_empty() {
        return None;
    }
    let stream = io.into_inner().into_std().ok()?;
    Some((key, stream, idle.since, timeout))
}

/// A request a connection gave back, with why.
type Unsent = hyper::client::conn::TrySendError<Request<UpstreamBody>>;

/// A response head, with its connection unless that has ended.
type Answered = (Response<Incoming>, Option<Box<Held>>);

/// The response head of a request written on a [`Held`] connection.
pub(super) type Head = Pin<Box<dyn Future<Output = Result<Response<Incoming>, Unsent>> + Send>>;

/// A request on its way: the connection (polled beside the head, as it
/// writes the request and reads the head) and the head to come. Dropped
/// before the head (the client went, or the request timed out), it hands
/// both to [`salvage`].
struct Exchange {
    held: Option<Box<Held>>,
    head: Option<Head>,
    /// Polled before: the request is written, the head may be there.
    polled: bool,
}

impl Exchange {
    /// The response head, with the connection unless it has ended.
    fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<Answered, Unsent>> {
        // Once the request is written, first without the task's waker: the
        // connection reading the head hands the body its first frame and
        // registers for its taking, which would wake the task that takes
        // it (a second poll). The task's waker only while nothing came.
        let mut quiet = Context::from_waker(Waker::noop());
        if std::mem::replace(&mut self.polled, true)
            && let Poll::Ready(answered) = self.step(&mut quiet)
        {
            return Poll::Ready(answered);
        }
        self.step(cx)
    }

    /// Polls the connection with `cx` (it writes the request and reads the
    /// head), then the head: with no waker, as only the connection, polled
    /// just before in this task, completes it (or fails it by ending).
    fn step(&mut self, cx: &mut Context<'_>) -> Poll<Result<Answered, Unsent>> {
        if let Some(held) = &mut self.held
            && Pin::new(&mut held.conn).poll(cx).is_ready()
        {
            self.held = None;
        }
        let Some(head) = &mut self.head else {
            return Poll::Pending;
        };
        let result = ready!(head.as_mut().poll(&mut Context::from_waker(Waker::noop())));
        self.head = None;
        Poll::Ready(result.map(|response| (response, self.held.take())))
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        if let (Some(held), Some(head)) = (self.held.take(), self.head.take()) {
            spawn_salvage(held, Remains::Head(head));
        }
    }
}

impl Carrier for Held {
    fn poll_conn(&mut self, cx: &mut Context<'_>) -> bool {
        Pin::new(&mut self.conn).poll(cx).is_ready()
    }

    fn release(self: Box<Self>) {
        checkin(self);
    }

    fn abandon(self: Box<Self>, body: Incoming) {
        spawn_salvage(self, Remains::Body(body));
    }
}
