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
//!   its periodic sweep and takes one only when its own pool is empty,
//!   instead of dialling;
//! * a connection is given only with nothing unread and no request in
//!   flight, as a bare socket taken off the giver's reactor; the taker
//!   registers it with its own, checks that the upstream has not closed
//!   it (a non-blocking peek) and starts a new HTTP/1 state machine on it;
//! * a spare waits at most its address's idle timeout (pruned at every
//!   sweep and take); TLS connections are never given (their session
//!   state stays with the worker that owns it).

use std::net::TcpStream;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

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

    /// An HTTP/1.1 upstream on its own thread that answers `ok` and counts
    /// the connections it accepts.
    fn upstream() -> (
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
                    let svc = hyper::service::service_fn(|_| async {
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from_static(b"ok")),
                        ))
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
        use http_body_util::BodyExt;
        use std::sync::Arc;
        let (addr, accepted) = upstream();
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
                    let request = http::Request::get(format!("http://{addr}/"))
                        .body(http_body_util::Either::Right(http_body_util::Empty::new()))
                        .unwrap();
                    let response = client.send(request).await.unwrap();
                    let body = response.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(&body[..], b"ok");
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
}
