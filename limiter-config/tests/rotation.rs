//! A client rotating its source address through the HTTP layer: 200,000
//! distinct peers (IPv4 addresses and IPv6 /64s) against a `per_ip` rule
//! holding at most 10,000 keys. Every
//! request is answered by the rule (200 for a key's first request, 429 for
//! its second: none is refused for want of room), and the rule never holds
//! more than its cap. Driven in process with `tower::ServiceExt`, on a
//! `ManualClock` that does not move (so no key ever becomes idle: room is
//! made by evicting limited keys).

use crate::support;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use limiter_config::RuleSet;
use limiter_core::ManualClock;
use limiter_tower::PeerAddr;
use support::TempDir;
use tower::{Layer, ServiceExt, service_fn};

const ADDRESSES: u32 = 200_000;
const MAX_KEYS: usize = 10_000;

#[tokio::test(flavor = "current_thread")]
async fn a_rotating_source_is_always_answered_by_the_rule_within_max_keys() {
    let dir = TempDir::new();
    let path = dir.write(
        "rules.yaml",
        &format!(
            "rate_limits:\n  per_client:\n    algorithm: token_bucket\n    rate: \"1/h\"\n    burst: 1\n    per_ip: true\n    max_keys: {MAX_KEYS}\n    match: {{ prefix: \"/\" }}\n"
        ),
    );
    let clock = ManualClock::new();
    let rules = RuleSet::load_with_clock(&path, clock).unwrap();
    let app = rules.layer().layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    }));
    let send = |peer: IpAddr| {
        let mut request = Request::get("/orders").body(()).unwrap();
        request
            .extensions_mut()
            .insert(PeerAddr(SocketAddr::new(peer, 40_000)));
        app.clone().oneshot(request)
    };
    let rule = rules.get("per_client").unwrap();
    let keys = rule.keyed().unwrap();
    assert_eq!(keys.max_keys(), MAX_KEYS);
    let mut most_held = 0;
    for i in 0..ADDRESSES {
        // Every address distinct: IPv4 addresses from 10.0.0.0 up, and
        // IPv6 addresses each in its own /64 (the rule keys IPv6 by /64),
        // as a client rotating through a /32 would send.
        let peer = if i % 2 == 0 {
            IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))
        } else {
            IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                (i >> 16) as u16,
                i as u16,
                0,
                0,
                0,
                1,
            ))
        };
        let first = send(peer).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK, "first request of {peer}");
        // Its own key was just made; a second request is limited by it
        // (the new key is not the one evicted to make room).
        let second = send(peer).await.unwrap();
        assert_eq!(
            second.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "second request of {peer}"
        );
        most_held = most_held.max(keys.len());
    }
    assert!(most_held <= MAX_KEYS, "held {most_held} keys");
    assert_eq!(keys.len(), MAX_KEYS);
}
