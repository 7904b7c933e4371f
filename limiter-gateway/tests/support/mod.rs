//! Test helpers: a temp dir, a gateway in-process over a rules text, and a
//! client that can stream a body from a channel.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Either, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use limiter_config::RuleSet;
use limiter_gateway::echo::PatternBody;
use limiter_gateway::{Gateway, GatewayConfig, Running, metrics_handle};
use tokio::sync::mpsc;

/// A fresh directory under the system temp dir, removed when dropped.
pub(crate) struct TempDir(limiter_test_support::TempDir);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        TempDir(limiter_test_support::TempDir::new("gateway-test"))
    }

    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        self.0.write(name, text)
    }
}

/// A request body fed from a channel (no size hint: sent chunked).
pub(crate) struct ChannelBody(pub(crate) mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

pub(crate) type ClientBody = Either<Either<Empty<Bytes>, PatternBody>, ChannelBody>;

pub(crate) fn empty() -> ClientBody {
    Either::Left(Either::Left(Empty::new()))
}

pub(crate) fn pattern_body(len: u64, sized: bool) -> ClientBody {
    Either::Left(Either::Right(PatternBody::new(len, sized)))
}

/// A loopback address that refuses connections for as long as the
/// returned socket lives: bound, so no other test (they run in parallel)
/// can take the port, and never listening, so a connection gets a reset.
pub(crate) fn refusing_address() -> (std::net::SocketAddr, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    (socket.local_addr().unwrap(), socket)
}

pub(crate) fn client() -> Client<HttpConnector, ClientBody> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// A gateway over `rules` (YAML) in front of `upstream`.
pub(crate) struct Rig {
    pub(crate) running: Running,
    pub(crate) rules: RuleSet,
    pub(crate) dir: TempDir,
    pub(crate) file: PathBuf,
}

impl Rig {
    pub(crate) async fn start(
        rules: &str,
        upstream: &str,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> Rig {
        metrics_handle();
        let dir = TempDir::new();
        let file = dir.write("rules.yaml", rules);
        let rules = RuleSet::load(&file).expect("good rules");
        let mut config =
            GatewayConfig::single("127.0.0.1:0".parse().unwrap(), upstream.parse().unwrap());
        config.admin = Some("127.0.0.1:0".parse().unwrap());
        config.timeouts.drain = std::time::Duration::ZERO;
        tweak(&mut config);
        let running = Gateway::new(config, rules.clone())
            .start()
            .await
            .expect("gateway starts");
        Rig {
            running,
            rules,
            dir,
            file,
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.running.addrs()[0]
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr())
    }

    /// The admin endpoint's body.
    pub(crate) async fn admin(&self, path: &str) -> String {
        let admin = self.running.admin_addr().unwrap();
        let response = client()
            .request(
                Request::get(format!("http://{admin}{path}"))
                    .body(empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        text(response).await
    }
}

pub(crate) async fn text(response: Response<Incoming>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The value of the sample `name{labels}` in a Prometheus text, 0 if absent.
pub(crate) fn sample(metrics: &str, name_and_labels: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(name_and_labels)
                .and_then(|v| v.strip_prefix(' '))
        })
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

// Not every test binary that includes the support uses them.
#[allow(unused_imports)]
pub(crate) use limiter_test_support::patience::{PATIENCE, until, within};

/// An upstream that holds every request whose path starts with `held`
/// until the test calls [`Gated::open`], and answers `done` to it then
/// (other paths at once). Each held request is reported on `entered` as it
/// arrives. One gate for all: opening it lets every held request go at
/// once, so nothing depends on the order in which a loaded machine runs
/// their handlers.
pub(crate) struct Gated {
    pub(crate) addr: SocketAddr,
    pub(crate) entered: mpsc::UnboundedReceiver<()>,
    gate: tokio::sync::watch::Sender<bool>,
    requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Gated {
    pub(crate) async fn start(held: &'static str) -> Gated {
        use hyper::service::service_fn;
        use hyper_util::rt::TokioIo;
        use std::sync::Arc;
        use std::sync::atomic::AtomicU64;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, entered) = mpsc::unbounded_channel();
        let (gate, open) = tokio::sync::watch::channel(false);
        let requests = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (tx, open, counter) = (tx.clone(), open.clone(), Arc::clone(&counter));
                let svc = service_fn(move |request: Request<Incoming>| {
                    let (tx, mut open, counter) = (tx.clone(), open.clone(), Arc::clone(&counter));
                    async move {
                        // Relaxed: a count the test reads after the events
                        // that follow it (`entered`, the answers).
                        counter.fetch_add(1, Ordering::Relaxed);
                        if request.uri().path().starts_with(held) {
                            let _ = tx.send(());
                            // An error: the test (the sender) is gone.
                            let _ = open.wait_for(|&open| open).await;
                        }
                        Ok::<_, Infallible>(Response::new(http_body_util::Full::new(
                            Bytes::from_static(b"done"),
                        )))
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Gated {
            addr,
            entered,
            gate,
            requests,
            task,
        }
    }

    /// `http://ADDR`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests that reached the upstream, held or not.
    pub(crate) fn requests(&self) -> u64 {
        // Relaxed: see the handler.
        self.requests.load(Ordering::Relaxed)
    }

    /// Waits (bounded by [`PATIENCE`]) until `n` more held requests arrived.
    pub(crate) async fn entered(&mut self, n: usize) {
        for i in 0..n {
            within(
                &format!("held request {} of {n} at the upstream", i + 1),
                self.entered.recv(),
            )
            .await
            .expect("the upstream runs");
        }
    }

    /// Lets every held request go, and any later one through at once.
    pub(crate) fn open(&self) {
        self.gate.send_replace(true);
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sends `head` as is on a new connection and reads to the end (bounded):
/// the raw response.
pub(crate) async fn raw(addr: SocketAddr, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    within("the gateway answers and closes", s.read_to_end(&mut out))
        .await
        .ok();
    String::from_utf8_lossy(&out).into_owned()
}

/// A header's value in a raw response.
pub(crate) fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next()?;
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A raw response's status line up to its code (`HTTP/1.1 200`).
pub(crate) fn status(response: &str) -> &str {
    response.get(..12).unwrap_or(response)
}

/// The rule a raw response was decided by (its `RateLimit-Policy` key).
pub(crate) fn rule(response: &str) -> Option<&str> {
    header(response, "ratelimit-policy")?
        .strip_prefix('"')?
        .split('"')
        .next()
}
