//! [`Echo`]: the built-in upstream of the demo, the benchmark and the
//! tests, a small hyper server on a loopback port.
//!
//! | path | answer |
//! |---|---|
//! | `/slow` | nothing, ever (an upstream timeout) |
//! | `/hold/MS` | `held` after `MS` milliseconds |
//! | `/headers` (or any path ending in it) | the request's headers, one `name: value` line each; the response carries hop-by-hop headers of its own (`Connection: x-up`, `X-Up`, `Keep-Alive`) |
//! | `/tokens/VALUE` | `tokens` with `x-tokens-used: VALUE` (the path segment as it is: a cost after the response, well-formed or not) |
//! | `/gen/LEN` | `LEN` bytes of [`pattern`] with `Content-Length`, or chunked with `?chunked` |
//! | anything else | the request body streamed back as it arrives, with `x-req-length` (its `Content-Length` or `none`), `x-req-te` (its `Transfer-Encoding` or `none`) and `x-id` (its `x-id`) |
//!
//! [`Echo::requests`] counts requests as they arrive (before any hold).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The byte at `offset` of the test pattern: position-dependent, so a
/// lost, repeated or reordered chunk shows.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset.wrapping_mul(2_654_435_761) >> 13) as u8 ^ (offset >> 20) as u8
}

/// `len` bytes of the pattern from `offset`.
pub fn pattern(offset: u64, len: usize) -> Bytes {
    (0..len as u64).map(|i| pattern_byte(offset + i)).collect()
}

/// A body of `len` pattern bytes in 64 KiB frames, generated as it is
/// polled; `sized` makes its size hint exact (then hyper sends
/// `Content-Length`), otherwise it is sent chunked.
#[derive(Debug)]
pub struct PatternBody {
    sent: u64,
    len: u64,
    sized: bool,
}

impl PatternBody {
    /// The frame size.
    pub const FRAME: usize = 64 * 1024;

    /// A body of `len` bytes.
    pub fn new(len: u64, sized: bool) -> PatternBody {
        PatternBody {
            sent: 0,
            len,
            sized,
        }
    }
}

impl Body for PatternBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.sent >= self.len {
            return Poll::Ready(None);
        }
        let n = (self.len - self.sent).min(Self::FRAME as u64);
        let chunk = pattern(self.sent, n as usize);
        self.sent += n;
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent >= self.len
    }

    fn size_hint(&self) -> SizeHint {
        if self.sized {
            SizeHint::with_exact(self.len - self.sent)
        } else {
            SizeHint::default()
        }
    }
}

type EchoBody = http_body_util::Either<http_body_util::Either<Incoming, PatternBody>, Full<Bytes>>;

/// A running echo upstream.
#[derive(Debug)]
pub struct Echo {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Echo {
    /// Starts an echo upstream on `addr` (port 0 for any).
    ///
    /// # Errors
    ///
    /// The address cannot be bound.
    pub async fn start(addr: SocketAddr) -> std::io::Result<Echo> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let counter = Arc::clone(&counter);
                let svc = service_fn(move |request: Request<Incoming>| {
                    // Relaxed: a statistic; readers poll it.
                    counter.fetch_add(1, Ordering::Relaxed);
                    answer(request)
                });
                tokio::spawn(async move {
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Ok(Echo {
            addr,
            requests,
            task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        // Relaxed: a statistic.
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn full(text: String) -> EchoBody {
    http_body_util::Either::Right(Full::new(Bytes::from(text)))
}

fn header_or_none(request: &Request<Incoming>, name: &str) -> HeaderValue {
    request
        .headers()
        .get(name)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("none"))
}

async fn answer(request: Request<Incoming>) -> Result<Response<EchoBody>, Infallible> {
    let path = request.uri().path().to_owned();
    if path == "/slow" {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if let Some(ms) = path.strip_prefix("/hold/").and_then(|s| s.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let _ = request.into_body().collect().await;
        return Ok(Response::new(full("held".into())));
    }
    if path.ends_with("/headers") {
        let mut text = String::new();
        for (name, value) in request.headers() {
            text.push_str(&format!(
                "{}: {}\n",
                name,
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        let mut response = Response::new(full(text));
        let h = response.headers_mut();
        h.insert("connection", HeaderValue::from_static("x-up"));
        h.insert("x-up", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-end-to-end", HeaderValue::from_static("1"));
        return Ok(response);
    }
    if let Some(value) = path.strip_prefix("/tokens/") {
        let mut response = Response::new(full("tokens".into()));
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert("x-tokens-used", value);
        }
        return Ok(response);
    }
    if let Some(len) = path.strip_prefix("/gen/").and_then(|s| s.parse().ok()) {
        let sized = request.uri().query() != Some("chunked");
        let body = PatternBody::new(len, sized);
        return Ok(Response::new(http_body_util::Either::Left(
            http_body_util::Either::Right(body),
        )));
    }
    let length = header_or_none(&request, "content-length");
    let te = header_or_none(&request, "transfer-encoding");
    let id = header_or_none(&request, "x-id");
    let mut response = Response::new(http_body_util::Either::Left(http_body_util::Either::Left(
        request.into_body(),
    )));
    let h = response.headers_mut();
    if length != "none" {
        h.insert("content-length", length.clone());
    }
    h.insert("x-req-length", length);
    h.insert("x-req-te", te);
    h.insert("x-id", id);
    h.insert(
        "x-path",
        HeaderValue::from_str(&path).unwrap_or(HeaderValue::from_static("?")),
    );
    Ok(response)
}
