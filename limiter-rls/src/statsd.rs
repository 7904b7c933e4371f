//! A statsd counter sink: counters aggregated in memory and flushed as
//! `name:value|c` lines over UDP every flush interval (the way
//! envoyproxy/ratelimit's gostats store sends them), several lines per
//! datagram up to 1,432 bytes (a safe payload under a 1,500-byte MTU).
//!
//! Sending never blocks a decision: `add` takes a short mutex on the
//! aggregate; the flush task swaps it out and sends. A counter that did not
//! move since the last flush is not sent. Lost datagrams lose counts (UDP).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MAX_DATAGRAM: usize = 1_432;

/// The sink; cheap to clone (shared aggregate).
#[derive(Debug, Clone, Default)]
pub struct Statsd {
    pending: Arc<Mutex<HashMap<String, u64>>>,
}

impl Statsd {
    /// A sink whose flush task sends to `addr` every `every`; the task runs
    /// on the current tokio runtime until the process ends.
    ///
    /// # Errors
    ///
    /// Binding the UDP socket failed.
    pub async fn start(addr: SocketAddr, every: Duration) -> std::io::Result<Statsd> {
        let bind: SocketAddr = if addr.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = tokio::net::UdpSocket::bind(bind).await?;
        let sink = Statsd::default();
        let pending = Arc::clone(&sink.pending);
        tokio::spawn(async move {
            let mut tick = limiter_async::interval(every.max(Duration::from_millis(1)));
            loop {
                tick.tick().await;
                let batch = std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
                for datagram in lines(&batch) {
                    // A send error (no listener) only loses this batch.
                    let _ = socket.send_to(datagram.as_bytes(), addr).await;
                }
            }
        });
        Ok(sink)
    }

    /// Adds `value` to counter `name` (0 is ignored).
    pub fn add(&self, name: &str, value: u64) {
        if value == 0 {
            return;
        }
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        match p.get_mut(name) {
            Some(v) => *v = v.saturating_add(value),
            None => {
                p.insert(name.to_owned(), value);
            }
        }
    }
}

/// The aggregate as datagrams of newline-separated `name:value|c` lines.
fn lines(batch: &HashMap<String, u64>) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for (name, v) in batch {
        let line = format!("{name}:{v}|c");
        if !cur.is_empty() && cur.len() + 1 + line.len() > MAX_DATAGRAM {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(&line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_under_the_datagram_size() {
        let batch: HashMap<String, u64> = (0..100)
            .map(|i| {
                (
                    format!("ratelimit.service.rate_limit.d.k_{i:04}.total_hits"),
                    7,
                )
            })
            .collect();
        let datagrams = lines(&batch);
        assert!(datagrams.len() > 1);
        assert!(datagrams.iter().all(|d| d.len() <= MAX_DATAGRAM));
        let n: usize = datagrams.iter().map(|d| d.lines().count()).sum();
        assert_eq!(n, 100);
        assert!(
            datagrams
                .iter()
                .flat_map(|d| d.lines())
                .all(|l| l.ends_with(":7|c"))
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_flush_interval_no_instant_can_hold_still_flushes_once() {
        let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sink = Statsd::start(udp.local_addr().unwrap(), Duration::MAX)
            .await
            .unwrap();
        // Added before the flushing task first runs: its first tick, at
        // once, sends it (the tick that would overflow an instant).
        sink.add("hits", 3);
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(10), udp.recv(&mut buf))
            .await
            .expect("the first flush")
            .unwrap();
        assert_eq!(&buf[..n], b"hits:3|c");
    }
}
