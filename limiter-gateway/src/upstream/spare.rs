//! Idle plain-TCP upstream connections that one worker has not needed for
//! [`SPARE_AFTER`], left for any worker whose own pool runs dry.
//!
//! Why: each worker keeps its own pool (module `local`), and the kernel
//! spreads client connections over the workers' sockets by a hash, so one
//! round of clients may put 18 on a worker and 14 on the other, the next
//! 14 and 18: without this list the second worker would open 4 new
//! upstream connections while the first kept 4 idle ones.
//!
//! Guarantees:
//! * nothing here is touched per request: a worker gives connections in
//!   its periodic sweep and takes one only when its own pool is empty;
//! * a worker whose pool is empty and finds no spare asks every other
//!   worker ([`ask`]) before it dials: each gives all its idle plain-TCP
//!   connections of that address here and answers (a worker that stops
//!   answers what it was asked), so no worker dials while another holds
//!   an idle connection to the same address;
//! * a connection is given only with nothing unread and no request in
//!   flight, as a bare socket taken off the giver's reactor; the taker
//!   registers it with its own, checks that the upstream has not closed
//!   it (a non-blocking peek) and starts a new HTTP/1 state machine on it;
//! * a spare waits at most its address's idle timeout (pruned at every
//!   sweep and take); TLS connections are never given (their session
//!   state stays with the worker that owns it).

use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long an idle connection stays in its worker's own pool before the
/// sweep gives it away.
pub(crate) const SPARE_AFTER: Duration = Duration::from_secs(1);

struct Spare {
    stream: TcpStream,
    /// Idle since then.
    since: Instant,
    /// Its address's idle timeout.
    idle: Duration,
}

/// The spares by address pool key.
static SPARES: Mutex<Vec<(u64, Vec<Spare>)>> = Mutex::new(Vec::new());

fn fresh(spare: &Spare) -> bool {
    spare.since.elapsed() < spare.idle
}

/// Adds connections given by a sweep (`(key, socket, idle since, idle
/// timeout)`), pruning the expired ones of every address.
pub(crate) fn give(given: impl IntoIterator<Item = (u64, TcpStream, Instant, Duration)>) {
    let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
    for (_, list) in spares.iter_mut() {
        list.retain(fresh);
    }
    for (key, stream, since, idle) in given {
        let spare = Spare {
            stream,
            since,
            idle,
        };
        match spares.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(spare),
            None => spares.push((key, vec![spare])),
        }
    }
    spares.retain(|(_, list)| !list.is_empty());
}

/// The most recently idle spare of address `key` that its upstream has
/// not closed; the closed and expired ones met on the way are dropped.
pub(crate) fn take(key: u64) -> Option<TcpStream> {
    let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
    let (_, list) = spares.iter_mut().find(|(k, _)| *k == key)?;
    while let Some(spare) = list.pop() {
        // Ok(0): closed by the upstream; Ok(_): bytes nobody asked for.
        let open = matches!(spare.stream.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        if fresh(&spare) && open {
            return Some(spare.stream);
        }
    }
    None
}

/// The longest a dry worker waits for the others' answers before it dials
/// anyway (a worker answers at its next turn of its loop, microseconds
/// unless its thread is descheduled).
const ASK_WITHIN: Duration = Duration::from_millis(100);

/// Where the other workers post their asks to one worker.
struct Inbox {
    thread: ThreadId,
    asks: Mutex<Vec<(u64, Answer)>>,
    posted: Notify,
}

/// The workers that answer asks.
static INBOXES: Mutex<Vec<Arc<Inbox>>> = Mutex::new(Vec::new());

/// One ask: how many workers have yet to answer it, and its asker's wake-up.
struct Ask {
    left: AtomicUsize,
    answered: Notify,
}

/// One worker's answer to an ask, given when dropped (after the worker has
/// given its idle connections of the address, or when it stops).
pub(crate) struct Answer(Arc<Ask>);

impl Drop for Answer {
    fn drop(&mut self) {
        // AcqRel: the last answer sees every earlier one's gift, and the
        // asker's Acquire load sees this one's (the gifts are under SPARES'
        // lock as well).
        if self.0.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            // A stored permit if the asker is not waiting yet.
            self.0.answered.notify_one();
        }
    }
}

/// The current thread's inbox: while it lives, other workers' [`ask`]s
/// wait for this thread's answers.
pub(crate) struct Mailbox(Arc<Inbox>);

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Mailbox").field(&self.0.thread).finish()
    }
}

impl Mailbox {
    /// Opens the current thread's inbox.
    pub(crate) fn open() -> Mailbox {
        let inbox = Arc::new(Inbox {
            thread: std::thread::current().id(),
            asks: Mutex::new(Vec::new()),
            posted: Notify::new(),
        });
        let mut inboxes = INBOXES.lock().unwrap_or_else(PoisonError::into_inner);
        inboxes.push(Arc::clone(&inbox));
        Mailbox(inbox)
    }

    /// The asks posted since the last call, each an address key and the
    /// answer to drop once its idle connections are given (waits for one).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: asks are taken only when returned.
    pub(crate) async fn asked(&self) -> Vec<(u64, Answer)> {
        loop {
            let asks =
                std::mem::take(&mut *self.0.asks.lock().unwrap_or_else(PoisonError::into_inner));
            if !asks.is_empty() {
                return asks;
            }
            self.0.posted.notified().await;
        }
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let mut inboxes = INBOXES.lock().unwrap_or_else(PoisonError::into_inner);
        inboxes.retain(|i| !Arc::ptr_eq(i, &self.0));
        drop(inboxes);
        // No more asks come; the pending ones are answered as they drop.
        self.0
            .asks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Asks every other worker to give its idle connections of address `key`
/// here and waits (at most [`ASK_WITHIN`]) for all the answers.
pub(crate) async fn ask(key: u64) {
    let me = std::thread::current().id();
    let ask = Arc::new(Ask {
        left: AtomicUsize::new(0),
        answered: Notify::new(),
    });
    {
        let inboxes = INBOXES.lock().unwrap_or_else(PoisonError::into_inner);
        let others = inboxes.iter().filter(|i| i.thread != me);
        // Relaxed: set before any answer can exist (they are posted below).
        ask.left.store(others.clone().count(), Ordering::Relaxed);
        for inbox in others {
            let answer = Answer(Arc::clone(&ask));
            inbox
                .asks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((key, answer));
            // A stored permit if the worker is busy: it answers at its next turn.
            inbox.posted.notify_one();
        }
    }
    let answered = async {
        // Acquire: pairs with the answers' AcqRel decrements.
        while ask.left.load(Ordering::Acquire) != 0 {
            ask.answered.notified().await;
        }
    };
    let _ = tokio::time::timeout(ASK_WITHIN, answered).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client.set_nonblocking(true).unwrap();
        (client, listener.accept().unwrap().0)
    }

    #[test]
    fn a_spare_is_taken_once_and_only_while_open_and_fresh() {
        let long = Duration::from_secs(60);
        let (a, _a_peer) = pair();
        let (b, b_peer) = pair();
        let (c, mut c_peer) = pair();
        let (d, _d_peer) = pair();
        let (a_port, d_port) = (a.local_addr().unwrap(), d.local_addr().unwrap());
        let now = Instant::now();
        give([
            (901, a, now, long),
            (901, b, now, long),
            (901, c, now, long),
        ]);
        give([(902, d, now, Duration::ZERO)]);
        drop(b_peer);
        c_peer.write_all(b"x").unwrap();
        // (On loopback the close and the byte arrive within the calls.)
        // c has an unasked-for byte and b is closed: both dropped; a is taken.
        let taken = take(901).expect("the open spare");
        assert_eq!(taken.local_addr().unwrap(), a_port);
        assert!(take(901).is_none(), "each spare is taken once");
        // d's idle timeout has passed.
        assert!(take(902).is_none(), "{d_port} expired");
    }

    /// An HTTP/1.1 upstream on its own thread that answers `ok` once `hold`
    /// requests wait for their answer together, and counts the connections
    /// it accepts.
    fn upstream(
        hold: usize,
    ) -> (
        std::net::SocketAddr,
        std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&accepted);
        let barrier = Arc::new(tokio::sync::Barrier::new(hold));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((stream, _)) = listener.accept().await {
                    // Relaxed: read after the exchanges that follow it.
                    count.fetch_add(1, Ordering::Relaxed);
                    let barrier = Arc::clone(&barrier);
                    let svc = hyper::service::service_fn(move |_| {
                        let barrier = Arc::clone(&barrier);
                        async move {
                            barrier.wait().await;
                            Ok::<_, std::convert::Infallible>(http::Response::new(
                                http_body_util::Full::new(bytes::Bytes::from_static(b"ok")),
                            ))
                        }
                    });
                    tokio::spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc),
                    );
                }
            });
        });
        (addr, accepted)
    }

    #[test]
    fn a_connection_one_worker_gave_serves_another_without_a_new_one() {
        use super::super::connect::AddressClient;
        use std::sync::Arc;
        let (addr, accepted) = upstream(1);
        let client = Arc::new(AddressClient::new(
            "spare-test",
            addr.to_string().into(),
            &crate::settings::Timeouts::default(),
            None,
            crate::upstream::Protocol::Http1,
        ));
        // Each call a worker of its own: a thread with a current-thread runtime.
        let worker = |client: Arc<AddressClient>, give: bool| {
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    ok(&client, addr).await;
                    if give {
                        super::super::local::sweep_giving(Duration::ZERO);
                    }
                });
            })
            .join()
            .unwrap();
        };
        worker(Arc::clone(&client), true);
        worker(Arc::clone(&client), false);
        // Relaxed: read after both exchanges have completed.
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "upstream connections"
        );
    }

    /// A GET of `/` through `client`, on the current runtime.
    async fn ok(client: &super::super::connect::AddressClient, addr: std::net::SocketAddr) {
        use http_body_util::BodyExt;
        let request = http::Request::get(format!("http://{addr}/"))
            .body(http_body_util::Either::Right(http_body_util::Empty::new()))
            .unwrap();
        let response = client.send(request).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");
    }

    #[test]
    fn a_dry_worker_takes_the_idle_connections_of_another_before_dialling() {
        use super::super::connect::AddressClient;
        use std::sync::Arc;
        use std::sync::atomic::Ordering::Relaxed;
        // Four requests at a time, each answered only once all four wait.
        let (addr, accepted) = upstream(4);
        let client = Arc::new(AddressClient::new(
            "ask-test",
            addr.to_string().into(),
            &crate::settings::Timeouts::default(),
            None,
            crate::upstream::Protocol::Http1,
        ));
        let workers = crate::workers::Workers::start(2).unwrap();
        let [a, b] = workers.handles() else {
            unreachable!("two workers")
        };
        let driver = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // `n` requests at once on each worker of `on`, all completed.
        let round = |on: &[(&tokio::runtime::Handle, usize)]| {
            let mut tasks = Vec::new();
            for (worker, n) in on {
                for _ in 0..*n {
                    let client = Arc::clone(&client);
                    tasks.push(worker.spawn(async move { ok(&client, addr).await }));
                }
            }
            driver.block_on(async {
                for task in tasks {
                    task.await.unwrap();
                }
            });
        };
        round(&[(a, 4)]);
        // Relaxed: read after the exchanges have completed.
        assert_eq!(accepted.load(Relaxed), 4, "warm-up on worker a");
        // At once, well within SPARE_AFTER: b's pool is dry, a holds four idle.
        round(&[(b, 4)]);
        assert_eq!(accepted.load(Relaxed), 4, "b took a's idle connections");
        round(&[(a, 1), (b, 3)]);
        round(&[(a, 3), (b, 1)]);
        round(&[(a, 4)]);
        assert_eq!(
            accepted.load(Relaxed),
            4,
            "every split served by the same four"
        );
    }
}
