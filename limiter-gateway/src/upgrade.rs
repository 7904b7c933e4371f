//! `Upgrade` (WebSocket and any other protocol except `h2c`) proxied as a
//! byte tunnel.
//!
//! An HTTP/1.1 request with `Connection: upgrade` and an `Upgrade` header
//! is limited like any other (the rules layer decides it before the
//! proxy sees it), then forwarded with those two headers restored after the
//! hop-by-hop strip. When the upstream answers `101 Switching Protocols`,
//! the client gets the `101` with the upstream's `Upgrade`, and a task
//! copies bytes both ways between the two upgraded connections until
//! either side closes: the request timeout bounds only the wait for the
//! `101`, never the tunnel. Any other answer is passed on as a normal
//! response and the client's connection stays HTTP. `Upgrade: h2c` is not
//! forwarded (the gateway speaks h2c itself): such a request goes on as a
//! plain HTTP/1.1 request. HTTP/2 clients have no `Upgrade` (extended
//! CONNECT, RFC 8441, is not supported).

use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

/// A client's pending upgrade: the protocol asked for and its connection.
#[derive(Debug)]
pub(crate) struct Upgrade {
    protocol: HeaderValue,
    client: OnUpgrade,
}

fn asks_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Takes the upgrade out of `request` if it asks for one (before its
/// hop-by-hop headers are stripped).
pub(crate) fn take<B>(request: &mut Request<B>) -> Option<Upgrade> {
    if request.version() != Version::HTTP_11 || !asks_upgrade(request.headers()) {
        return None;
    }
    let protocol = request.headers().get(header::UPGRADE)?.clone();
    let h2c = protocol.to_str().map_or(true, |p| {
        p.split(',').any(|t| t.trim().eq_ignore_ascii_case("h2c"))
    });
    if h2c {
        return None;
    }
    Some(Upgrade {
        protocol,
        client: hyper::upgrade::on(request),
    })
}

fn restore(headers: &mut HeaderMap, protocol: HeaderValue) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, protocol);
}

impl Upgrade {
    /// Puts `Connection: upgrade` and the client's `Upgrade` back on the
    /// request to the upstream.
    pub(crate) fn restore_request(&self, headers: &mut HeaderMap) {
        restore(headers, self.protocol.clone());
    }

    /// If `response` is the upstream's `101`, starts the tunnel and returns
    /// its `Upgrade` to put back on the client's response after the strip.
    pub(crate) fn accept<B>(self, response: &mut Response<B>) -> Option<HeaderValue> {
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            return None;
        }
        let protocol = response.headers().get(header::UPGRADE)?.clone();
        let upstream = hyper::upgrade::on(response);
        let client = self.client;
        tokio::spawn(async move {
            let (client, upstream) = match tokio::try_join!(client, upstream) {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::debug!(%error, "upgrade did not complete");
                    return;
                }
            };
            let (mut a, mut b) = (TokioIo::new(client), TokioIo::new(upstream));
            if let Err(error) = tokio::io::copy_bidirectional(&mut a, &mut b).await {
                tracing::debug!(%error, "upgraded tunnel ended with an error");
            }
        });
        Some(protocol)
    }
}

/// Restores the upgrade headers on the client's `101`.
pub(crate) fn restore_response(headers: &mut HeaderMap, protocol: HeaderValue) {
    restore(headers, protocol);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http11_connection_upgrade_and_not_h2c() {
        let req = |version, conn: &str, up: &str| {
            let mut r = Request::builder().version(version).uri("/ws");
            if !conn.is_empty() {
                r = r.header("connection", conn);
            }
            if !up.is_empty() {
                r = r.header("upgrade", up);
            }
            r.body(()).unwrap()
        };
        assert!(
            take(&mut req(
                Version::HTTP_11,
                "keep-alive, Upgrade",
                "websocket"
            ))
            .is_some()
        );
        assert!(take(&mut req(Version::HTTP_11, "keep-alive", "websocket")).is_none());
        assert!(take(&mut req(Version::HTTP_11, "upgrade", "")).is_none());
        assert!(take(&mut req(Version::HTTP_11, "upgrade", "h2c")).is_none());
        assert!(take(&mut req(Version::HTTP_11, "upgrade", "foo, H2C")).is_none());
        assert!(take(&mut req(Version::HTTP_10, "upgrade", "websocket")).is_none());
        assert!(take(&mut req(Version::HTTP_2, "upgrade", "websocket")).is_none());
        let mut h = HeaderMap::new();
        take(&mut req(Version::HTTP_11, "upgrade", "websocket"))
            .unwrap()
            .restore_request(&mut h);
        assert_eq!(h["connection"], "upgrade");
        assert_eq!(h["upgrade"], "websocket");
    }
}
