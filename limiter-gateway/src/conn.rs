//! Connections that cannot hold the gateway: a deadline from accept to the
//! first complete request head, an idle deadline between requests, caps on
//! open connections per listener and per client address, and accept errors
//! that back off and log once per interval.
//!
//! # The deadlines
//!
//! Each accepted socket is wrapped in a [`Guarded`] stream, which hyper
//! reads and writes. It knows three phases, from the connection's
//! [`Activity`] (requests started and in flight, kept by the service):
//!
//! * **head**: from accept, or from the first byte after an idle spell, to
//!   the next request head: at most `head_timeout` (default 60 s, nginx's
//!   `client_header_timeout`);
//! * **busy**: a request is in flight (its response body included): no
//!   deadline here (the proxy's own timeouts and the shutdown deadline bound
//!   it);
//! * **idle**: after the last response, waiting for a byte: at most
//!   `idle_timeout` (default 75 s, nginx's `keepalive_timeout`).
//!
//! A deadline that passes closes the connection. An HTTP/1 client that has
//! sent part of a head gets `408 Request Timeout` first (RFC 9110 §15.5.9);
//! a silent one, an idle one and an HTTP/2 one (sniffed by its preface) are
//! closed without an answer, as nginx does. The deadline is checked when
//! hyper polls the socket, so it costs nothing per byte: one timer per
//! connection, reset only on phase changes. HTTP/2 connections also get
//! keep-alive pings (`h2_ping_interval`, closed after `h2_ping_timeout`
//! without the answer).
//!
//! # The caps
//!
//! A listener holds at most `max_per_listener` connections (default 10,000,
//! lowered at start to what the process's open-file limit leaves: each
//! client connection may need an upstream one, and 64 descriptors stay free
//! for the admin listener, logs and reloads); at the cap each worker's
//! socket holds the one connection it accepted last, unserved, until a
//! slot frees, and stops accepting: new connections wait in the kernel's
//! backlog instead of failing an `accept` for want of descriptors. A client address holds at most
//! `max_per_client` (default 1,024; 0 for no cap): one more is closed at
//! accept and counted.
//!
//! # Memory ordering
//!
//! [`Activity`]'s counters are read by the connection's task and written by
//! request tasks (HTTP/2 runs each stream on its own task). The writer
//! decrements `in_flight` with `Release` and then wakes the registered
//! reader; the reader registers its waker before loading with `Acquire`, so
//! either it sees the decrement or the wake finds its waker
//! ([`AtomicWaker`]'s contract).
//!
//! The last request's end wakes the connection's task only when that task
//! is not polling its connection ([`Activity::poll_connection`]): an
//! HTTP/1 response body ends inside that poll, and hyper flushes the
//! stream after it, which observes the end (the wake cost one more poll of
//! the whole connection, several thousand instructions a request). If the
//! stream has not observed it when the poll returns, the task wakes itself.
//! One word holds both bits (`POLLING`, `ENDED`), changed by
//! read-modify-writes with `AcqRel`: the poll's clearing swap and the
//! request end's `fetch_or` are ordered one way or the other, so either the
//! end sees `POLLING` clear and wakes, or the swap sees `ENDED` and wakes.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::framing::{Ambiguity, FramingScan};

/// The limits of client connections (the gateway file's `[connections]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From accept (or the end of an idle spell) to a complete request head.
    pub head_timeout: Duration,
    /// From the end of a response to the next byte.
    pub idle_timeout: Duration,
    /// How often an idle HTTP/2 connection is pinged.
    pub h2_ping_interval: Duration,
    /// How long a ping may go unanswered before the connection is closed.
    pub h2_ping_timeout: Duration,
    /// Open connections per listener (lowered to the open-file limit).
    pub max_per_listener: usize,
    /// Open connections per client address; 0 for no cap.
    pub max_per_client: usize,
    /// Header fields per request (HTTP/1), beyond which `431`.
    pub max_headers: usize,
    /// The whole request head in bytes (HTTP/1 buffer, HTTP/2 header
    /// list), beyond which `431`.
    pub max_head_bytes: usize,
    /// One header field (name and value) or the request target in bytes,
    /// beyond which `431` (`414` for the target).
    pub max_field_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            head_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(75),
            h2_ping_interval: Duration::from_secs(20),
            h2_ping_timeout: Duration::from_secs(20),
            max_per_listener: 10_000,
            max_per_client: 1_024,
            max_headers: 100,
            max_head_bytes: 32 * 1024,
            max_field_bytes: 8 * 1024,
        }
    }
}

/// The descriptors kept free beside client and upstream connections.
const RESERVED_FDS: usize = 64;

/// The soft open-file limit of this process (Linux `/proc/self/limits`).
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `configured` lowered to what the open-file limit leaves for `listeners`
/// listeners: every client connection may need an upstream one.
pub(crate) fn listener_cap(configured: usize, listeners: usize) -> usize {
    let Some(limit) = open_file_limit() else {
        return configured;
    };
    let fits = limit.saturating_sub(RESERVED_FDS) / 2 / listeners.max(1);
    if fits < configured {
        tracing::warn!(
            configured,
            cap = fits,
            open_file_limit = limit,
            "connections per listener lowered to fit the open-file limit (raise it with ulimit -n)"
        );
    }
    configured.min(fits).max(1)
}

/// A connection's requests, kept by its service, read by its stream.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    started: AtomicU64,
    in_flight: AtomicUsize,
    /// The connection became a tunnel (`101 Switching Protocols`): no
    /// deadline applies any more; the tunnel ends when either side closes.
    tunnel: AtomicBool,
    /// The first head with ambiguous framing (module `framing`): its
    /// ordinal times two, plus one for `LengthRepeated`; 0 for none.
    ambiguous: AtomicU64,
    waker: AtomicWaker,
    /// `POLLING` and `ENDED` (module doc).
    wake: AtomicU8,
}

/// The connection's task is polling its connection.
const POLLING: u8 = 1;
/// The last request in flight ended during that poll, unobserved so far.
const ENDED: u8 = 2;

/// A request in flight; its drop ends it (held by the response body).
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl Activity {
    /// The connection turns into a tunnel after this response: its bytes
    /// are no longer HTTP, so the head and idle deadlines stop.
    pub(crate) fn tunnel(&self) {
        // Relaxed: a flag read by the stream's own polls; nothing else is
        // published with it.
        self.tunnel.store(true, Ordering::Relaxed);
    }

    /// The request that just began (the last [`begin`](Activity::begin))
    /// has a head with ambiguous framing: it is refused, never forwarded.
    pub(crate) fn ambiguous_framing(&self) -> Option<Ambiguity> {
        // Relaxed: HTTP/1's stream and service run on the connection's one
        // task, the stream's store before the service's load.
        let (ambiguous, started) = (
            self.ambiguous.load(Ordering::Relaxed),
            self.started.load(Ordering::Relaxed),
        );
        (ambiguous != 0 && ambiguous / 2 == started).then_some(if ambiguous % 2 == 0 {
            Ambiguity::LengthAndCoding
        } else {
            Ambiguity::LengthRepeated
        })
    }

    /// A request begins (its head is complete).
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        // Relaxed: `started` only tells the stream that a request came; the
        // in-flight count below carries the ordering.
        self.started.fetch_add(1, Ordering::Relaxed);
        // Release: see the module doc.
        self.in_flight.fetch_add(1, Ordering::Release);
        InFlight(Arc::clone(self))
    }

    /// Polls `connection`, the future this activity's stream belongs to,
    /// from its task (module doc: the request ends it saves a wake for).
    pub(crate) fn poll_connection<F: Future>(
        &self,
        connection: Pin<&mut F>,
        cx: &mut Context<'_>,
    ) -> Poll<F::Output> {
        // AcqRel: the module doc's protocol.
        self.wake.swap(POLLING, Ordering::AcqRel);
        let polled = connection.poll(cx);
        // AcqRel: the module doc's protocol.
        if self.wake.swap(0, Ordering::AcqRel) & ENDED != 0 {
            cx.waker().wake_by_ref();
        }
        polled
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Release, then wake: the module doc's protocol.
        if self.0.in_flight.fetch_sub(1, Ordering::Release) == 1
            // AcqRel: the module doc's protocol.
            && self.0.wake.fetch_or(ENDED, Ordering::AcqRel) & POLLING == 0
        {
            self.0.waker.wake();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head,
    Busy,
    Idle,
}

/// What ended a connection early, for the metric and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// No complete head in time.
    Head,
    /// Idle too long.
    Idle,
}

const REQUEST_TIMEOUT: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

/// A client socket with the module doc's deadlines.
pub(crate) struct Guarded<S> {
    inner: S,
    activity: Arc<Activity>,
    limits: ConnectionLimits,
    timer: Pin<Box<Sleep>>,
    phase: Phase,
    seen_started: u64,
    /// Bytes arrived in this head phase.
    partial: bool,
    /// `timer` holds this phase's deadline. A head phase arms it only when
    /// a read waits: most heads arrive whole, and their phase ends in the
    /// poll that began it (one timer reset a request instead of two).
    armed: bool,
    /// The first bytes were the HTTP/2 preface (`None` before any byte).
    h2: Option<bool>,
    expired: Option<Expiry>,
    on_expiry: fn(Expiry),
    framing: FramingScan,
}

impl<S> std::fmt::Debug for Guarded<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("phase", &self.phase)
            .field("expired", &self.expired)
            .finish()
    }
}

impl<S> Guarded<S> {
    pub(crate) fn new(
        inner: S,
        activity: Arc<Activity>,
        limits: ConnectionLimits,
        on_expiry: fn(Expiry),
    ) -> Guarded<S> {
        Guarded {
            inner,
            activity,
            timer: Box::pin(tokio::time::sleep(limits.head_timeout)),
            limits,
            phase: Phase::Head,
            seen_started: 0,
            partial: false,
            armed: true,
            h2: None,
            expired: None,
            on_expiry,
            framing: FramingScan::new(limits.max_head_bytes),
        }
    }

    fn reset(&mut self, after: Duration) {
        self.timer.as_mut().reset(limiter_async::deadline_after(
            tokio::time::Instant::now(),
            after,
        ));
    }

    /// Moves the phase on from what the service and the read tell.
    fn observe(&mut self, got_bytes: bool) {
        let was_busy = self.phase == Phase::Busy;
        self.observe_phase(got_bytes);
        if was_busy && self.phase != Phase::Busy {
            // Relaxed: the stream saw the end itself; a flag for the poll
            // that ends on this thread (module doc).
            self.activity.wake.fetch_and(!ENDED, Ordering::Relaxed);
        }
    }

    fn observe_phase(&mut self, got_bytes: bool) {
        // Relaxed: see Activity::tunnel.
        if self.activity.tunnel.load(Ordering::Relaxed) {
            self.phase = Phase::Busy;
            return;
        }
        // Relaxed: see Activity::begin.
        let started = self.activity.started.load(Ordering::Relaxed);
        // Acquire: the module doc's protocol.
        let busy = self.activity.in_flight.load(Ordering::Acquire) > 0;
        if started != self.seen_started || busy {
            self.seen_started = started;
            if busy {
                self.phase = Phase::Busy;
                return;
            }
            // A request came and went between two polls.
            self.phase = Phase::Busy;
        }
        match self.phase {
            Phase::Busy if got_bytes => {
                self.phase = Phase::Head;
                self.partial = true;
                self.armed = false;
            }
            Phase::Busy => {
                self.phase = Phase::Idle;
                self.partial = false;
                self.reset(self.limits.idle_timeout);
                self.armed = true;
            }
            Phase::Idle if got_bytes => {
                self.phase = Phase::Head;
                self.partial = true;
                self.armed = false;
            }
            Phase::Head if got_bytes => self.partial = true,
            Phase::Idle | Phase::Head => {}
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.expired.is_some() {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        let got = &buf.filled()[before..];
        if this.h2.is_none() && !got.is_empty() {
            let n = got.len().min(H2_PREFACE.len());
            this.h2 = Some(got[..n] == H2_PREFACE[..n]);
        }
        // Relaxed: see Activity::tunnel. A tunnel's bytes are not HTTP.
        if !got.is_empty()
            && !this.activity.tunnel.load(Ordering::Relaxed)
            && let Some((ordinal, ambiguity)) = this.framing.feed(got)
        {
            let odd = u64::from(ambiguity == Ambiguity::LengthRepeated);
            // Relaxed: see Activity::ambiguous_framing.
            this.activity
                .ambiguous
                .store(ordinal.saturating_mul(2) + odd, Ordering::Relaxed);
        }
        let got_bytes = !got.is_empty();
        // Register before reading the counters (module doc).
        this.activity.waker.register(cx.waker());
        this.observe(got_bytes);
        if result.is_pending() && this.phase != Phase::Busy && !this.armed {
            this.reset(this.limits.head_timeout);
            this.armed = true;
        }
        if result.is_pending()
            && this.phase != Phase::Busy
            && this.timer.as_mut().poll(cx).is_ready()
        {
            let expiry = match this.phase {
                Phase::Idle => Expiry::Idle,
                _ => Expiry::Head,
            };
            if expiry == Expiry::Head && this.partial && this.h2 == Some(false) {
                // Best effort: the socket's buffer is empty at this point of
                // an HTTP/1 exchange, so the write completes or is dropped.
                let _ = Pin::new(&mut this.inner).poll_write(cx, REQUEST_TIMEOUT);
                let _ = Pin::new(&mut this.inner).poll_flush(cx);
            }
            this.expired = Some(expiry);
            (this.on_expiry)(expiry);
            // End of stream: hyper ends the connection and drops the socket.
            return Poll::Ready(Ok(()));
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.expired.is_some() {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.expired.is_some() {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.phase == Phase::Busy && this.expired.is_none() {
            // hyper flushes after a response's end: the idle deadline
            // starts here, in the poll that ended it (module doc).
            this.observe(false);
            if this.phase != Phase::Busy && this.timer.as_mut().poll(cx).is_ready() {
                // Already due: the next read expires it.
                cx.waker().wake_by_ref();
            }
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Open connections per client address, for `max_per_client`.
#[derive(Debug, Default)]
pub(crate) struct ClientCounts {
    counts: Mutex<HashMap<IpAddr, usize>>,
}

/// One counted connection; its drop uncounts it.
#[derive(Debug)]
pub(crate) struct CountedConnection {
    counts: Arc<ClientCounts>,
    ip: IpAddr,
    counted: bool,
}

impl ClientCounts {
    /// Counts a connection from `ip`, or `None` at the cap (`cap` 0: none).
    /// Taken once per connection, never per request.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<CountedConnection> {
        if cap == 0 {
            return Some(CountedConnection {
                counts: Arc::clone(self),
                ip,
                counted: false,
            });
        }
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = counts.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(CountedConnection {
            counts: Arc::clone(self),
            ip,
            counted: true,
        })
    }
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut counts = self
            .counts
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// One log line per interval for a repeating event, with the count of the
/// interval before.
#[derive(Debug)]
pub(crate) struct Throttled {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    pub(crate) fn new(every: Duration) -> Throttled {
        Throttled {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(count since the last line)` when a line is due now.
    pub(crate) fn due(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.duration_since(last) < self.every => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// The pause after a failed `accept`: 10 ms doubling to 1 s while they keep
/// failing, back to 10 ms after a success.
#[derive(Debug)]
pub(crate) struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(Self::FIRST)
    }
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    pub(crate) fn failed(&mut self) -> Duration {
        let now = self.0;
        self.0 = (self.0 * 2).min(Self::MAX);
        now
    }

    pub(crate) fn succeeded(&mut self) {
        self.0 = Self::FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_logs_once_per_interval_with_the_count() {
        let mut t = Throttled::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(t.due(t0), Some(0));
        assert_eq!(t.due(t0 + Duration::from_secs(1)), None);
        assert_eq!(t.due(t0 + Duration::from_secs(4)), None);
        assert_eq!(t.due(t0 + Duration::from_secs(5)), Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn timeouts_no_instant_can_hold_never_expire() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(64);
        let activity = Arc::new(Activity::default());
        let limits = ConnectionLimits {
            head_timeout: Duration::MAX,
            idle_timeout: Duration::MAX,
            ..ConnectionLimits::default()
        };
        let mut guarded = Guarded::new(server, Arc::clone(&activity), limits, |_| {});
        // A request came and went: the next bytes go idle, then start a
        // head (both deadlines set from the configured durations).
        // Relaxed: a single-threaded test.
        activity.started.fetch_add(1, Ordering::Relaxed);
        client.write_all(b"GET").await.unwrap();
        let mut buf = [0u8; 3];
        guarded.read_exact(&mut buf).await.unwrap();
        tokio::time::advance(Duration::from_secs(365 * 86_400)).await;
        client.write_all(b" /").await.unwrap();
        let mut more = [0u8; 2];
        guarded.read_exact(&mut more).await.unwrap();
        assert_eq!(&more, b" /");
        assert!(guarded.expired.is_none(), "a year on, still open");
    }

    #[test]
    fn backoff_doubles_to_a_second_and_resets() {
        let mut b = Backoff::default();
        let waits: Vec<_> = (0..9).map(|_| b.failed().as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed().as_millis(), 10);
    }

    #[test]
    fn the_per_client_cap_counts_and_uncounts() {
        let counts = Arc::new(ClientCounts::default());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let a = counts.admit(ip, 2).unwrap();
        let _b = counts.admit(ip, 2).unwrap();
        assert!(counts.admit(ip, 2).is_none());
        assert!(counts.admit("192.0.2.2".parse().unwrap(), 2).is_some());
        drop(a);
        assert!(counts.admit(ip, 2).is_some());
    }

    /// Counts its wakes.
    struct Wakes(AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            // Relaxed: a single-threaded test.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_end_wakes_the_task_only_when_its_stream_cannot_see_it() {
        let (_client, server) = tokio::io::duplex(64);
        let activity = Arc::new(Activity::default());
        let limits = ConnectionLimits::default();
        let mut guarded = Guarded::new(server, Arc::clone(&activity), limits, |_| {});
        let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(Arc::clone(&wakes));
        let mut cx = Context::from_waker(&waker);
        // Relaxed: a single-threaded test.
        let count = || wakes.0.load(Ordering::Relaxed);
        let mut byte = [0u8; 1];
        // A request in flight: the stream turns busy (and registers).
        let mut request = Some(activity.begin());
        let mut buf = ReadBuf::new(&mut byte);
        assert!(
            Pin::new(&mut guarded)
                .poll_read(&mut cx, &mut buf)
                .is_pending()
        );
        assert_eq!(guarded.phase, Phase::Busy);
        // It ends inside the connection's poll, the stream flushed after
        // it (HTTP/1): no wake, and the stream is idle.
        {
            let mut connection = std::pin::pin!(std::future::poll_fn(|cx| {
                drop(request.take());
                let _ = Pin::new(&mut guarded).poll_flush(cx);
                Poll::<()>::Pending
            }));
            let _ = activity.poll_connection(connection.as_mut(), &mut cx);
        }
        assert_eq!(count(), 0);
        assert_eq!(guarded.phase, Phase::Idle);
        // Inside it, the stream not flushed: the task wakes itself.
        let mut request = Some(activity.begin());
        let mut connection = std::pin::pin!(std::future::poll_fn(|_| {
            drop(request.take());
            Poll::<()>::Pending
        }));
        let _ = activity.poll_connection(connection.as_mut(), &mut cx);
        assert_eq!(count(), 1);
        // Outside it (an HTTP/2 stream's own task): the end wakes it.
        drop(activity.begin());
        assert_eq!(count(), 2);
    }

    /// A second head that stops halfway is held to the head deadline from
    /// the read that waits for the rest (the deadline is armed there).
    #[tokio::test(start_paused = true)]
    async fn a_second_head_cut_short_expires_with_408() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(256);
        let activity = Arc::new(Activity::default());
        let limits = ConnectionLimits {
            head_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            ..ConnectionLimits::default()
        };
        let mut guarded = Guarded::new(server, Arc::clone(&activity), limits, |_| {});
        // A first request came and went, half a minute ago.
        drop(activity.begin());
        tokio::time::advance(Duration::from_secs(30)).await;
        client.write_all(b"GET /b HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = guarded.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"GET /b HTTP/1.1\r\n");
        assert_eq!(guarded.phase, Phase::Head);
        // The rest never comes: expired after the head timeout, not the
        // idle one, with a 408.
        let started = tokio::time::Instant::now();
        assert_eq!(guarded.read(&mut buf).await.unwrap(), 0);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(guarded.expired, Some(Expiry::Head));
        let mut answer = vec![0u8; REQUEST_TIMEOUT.len()];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer, REQUEST_TIMEOUT);
    }
}
