//! A plain HTTP/1.1 client (one request per connection, `Connection:
//! close`) and an upstream that answers 200 to everything, on std threads:
//! no runtime, so tests on real processes (Envoy, the binaries) can use
//! them from any thread.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// An HTTP reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Header names lowercased.
    pub headers: HashMap<String, String>,
    /// The body.
    pub body: String,
}

/// One HTTP/1.1 request to `127.0.0.1:port` on a new connection.
///
/// # Errors
///
/// The connection fails, or the answer has no status line.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line: {head:?}")))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: body.to_owned(),
    })
}

/// `GET path` on `127.0.0.1:port`.
///
/// # Errors
///
/// As [`request`].
pub fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Reply> {
    request(port, "GET", path, headers, "")
}

/// An upstream on a free loopback port that answers 200 with `body` to
/// every request, on its own threads (for the rest of the process).
pub fn upstream_saying(body: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    let port = l.local_addr().expect("local addr").port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || answer_all(s, body));
        }
    });
    port
}

/// Answers every request on `s` with 200 `body` until the peer closes.
fn answer_all(mut s: TcpStream, body: &str) {
    let Ok(read_half) = s.try_clone() else { return };
    let mut r = BufReader::new(read_half);
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut request_body = vec![0; len];
        if r.read_exact(&mut request_body).is_err() {
            return;
        }
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if s.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
