//! A quiet HTTP/1.1 client, the one that finds an answer held back by
//! Nagle's algorithm. On one keep-alive connection, each round sends a
//! request and reads its answer, then sends two requests in one write and
//! reads both answers, then pauses. Sending right after an answer makes
//! the client's kernel treat the connection as interactive and delay its
//! acknowledgements (to ride on the next request), and nothing is sent
//! while the pair's answers are due: a server without `TCP_NODELAY` holds
//! the second answer until that delayed acknowledgement (about 40 ms on
//! Linux).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long an answer may take: Envoy's default rate-limit timeout. A
/// held answer takes the peer's delayed acknowledgement, 40 ms or more;
/// an answer on a quiet loopback takes well under a millisecond.
pub const PROMPT: Duration = Duration::from_millis(20);

/// The pause after each round: longer than a delayed acknowledgement, so
/// each round starts on a quiet connection.
pub const PAUSE: Duration = Duration::from_millis(50);

/// Runs `rounds` rounds of `request` (a whole HTTP/1.1 request,
/// keep-alive) on one connection to `addr` with `TCP_NODELAY` on the
/// client's side, pausing [`PAUSE`] after each (module doc); returns every
/// answer's status and the time from its write to its last byte.
///
/// # Panics
///
/// The connection fails, or an answer is not a framed HTTP/1.1 response.
pub fn quiet_rounds(addr: SocketAddr, request: &[u8], rounds: usize) -> Vec<(u16, Duration)> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let pair = [request, request].concat();
    let mut answers = Vec::with_capacity(3 * rounds);
    let mut buf = Vec::new();
    for _ in 0..rounds {
        let sent = Instant::now();
        s.write_all(request).unwrap();
        let status = read_response(&mut s, &mut buf);
        answers.push((status, sent.elapsed()));
        let sent = Instant::now();
        s.write_all(&pair).unwrap();
        for _ in 0..2 {
            let status = read_response(&mut s, &mut buf);
            answers.push((status, sent.elapsed()));
        }
        std::thread::sleep(PAUSE);
    }
    answers
}

/// How many answers on one connection may come late anyway: a machine
/// loaded by parallel tests may deschedule a client or a server for 20 ms
/// now and then (every connection's answer due then is late), while a
/// server without `TCP_NODELAY` is late with the second answer of every
/// round (12 of a connection's 36 answers, measured).
pub const STALLS_ALLOWED: usize = 2;

/// Fails the test if more than [`STALLS_ALLOWED`] answers of one
/// connection took [`PROMPT`] or more; `connections` holds each
/// connection's answers (from [`quiet_rounds`] or a client of the same
/// rounds), `what` names the listener.
pub fn assert_prompt<T>(what: &str, connections: &[Vec<(T, Duration)>]) {
    for answers in connections {
        let late: Vec<Duration> = answers
            .iter()
            .map(|(_, d)| *d)
            .filter(|d| *d >= PROMPT)
            .collect();
        assert!(
            late.len() <= STALLS_ALLOWED,
            "{what}: {} of a connection's {} answers took {PROMPT:?} or more: {late:?}",
            late.len(),
            answers.len()
        );
    }
}

/// Reads one response framed by `Content-Length` from `s`, keeping in
/// `buf` whatever follows it; returns its status.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> u16 {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("no status line: {head:?}"));
            let length: usize = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .map(|(_, v)| v.trim().parse().unwrap())
                .unwrap_or_else(|| panic!("no content-length: {head:?}"));
            if buf.len() >= end + 4 + length {
                buf.drain(..end + 4 + length);
                return status;
            }
        }
        let n = s.read(&mut chunk).expect("read an answer");
        assert!(n > 0, "connection closed before an answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}
