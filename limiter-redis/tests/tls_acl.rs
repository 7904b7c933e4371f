//! TLS and ACL users on real servers: a `redis-server` with a TLS port that
//! requires client certificates from a CA this test makes, and a server
//! with an ACL user. A limiter decides over TLS and as the ACL user; a
//! wrong CA, a missing client certificate and a wrong password are each
//! refused with their typed error ([`RedisLimitError::Tls`],
//! [`RedisLimitError::Auth`]), which the failure policy `Error` returns and
//! which counts as unavailable for the others.

use limiter_test_support::redis as support;
use limiter_test_support::tls as tls_support;

use std::cell::Cell;
use std::time::Duration;

use limiter_core::Quota;
use limiter_redis::{
    FailurePolicy, RedisEndpoint, RedisLimitError, RedisLimiter, RedisTls, Source,
};
use support::{RedisServer, denied, free_port};
use tls_support::TestPki;

/// A limiter of 3 permits per hour on `endpoint`, failures returned.
fn limiter(endpoint: &RedisEndpoint) -> RedisLimiter {
    let conn = endpoint.connect_lazy().expect("a lazy connection");
    RedisLimiter::builder_with_connection(conn, Quota::per_hour(1).unwrap().with_burst(3).unwrap())
        .failure_policy(FailurePolicy::Error)
        .call_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// A TLS server for `pki`: its plain port (for the test) and its TLS port.
fn tls_server(pki: &TestPki) -> (RedisServer, u16) {
    let tls_port = Cell::new(0);
    let server = RedisServer::start_with(|| {
        tls_port.set(free_port());
        pki.server_args(tls_port.get())
    });
    (server, tls_port.get())
}

/// Three grants then a denial, all by the script.
async fn decides(limiter: &RedisLimiter) {
    for _ in 0..3 {
        let granted = limiter.try_acquire("k").await.expect("a grant");
        assert_eq!(granted.source, Source::Redis);
    }
    assert_eq!(denied(limiter.try_acquire("k").await).source, Source::Redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decides_over_tls_with_a_client_certificate() {
    let pki = TestPki::new("decide");
    let (_server, port) = tls_server(&pki);
    let (ca, cert, key) = pki.client_pems();
    let tls = RedisTls::new()
        .ca_pem(ca.clone())
        .client_cert_pem(cert.clone(), key.clone());
    decides(&limiter(
        &RedisEndpoint::single("localhost", port).with_tls(tls),
    ))
    .await;

    // The same from a URL and the files, as the rules file gives them.
    let files =
        RedisTls::from_files(Some(&pki.ca), Some(&pki.client_cert), Some(&pki.client_key)).unwrap();
    let endpoint = RedisEndpoint::parse(&format!("rediss://localhost:{port}/0"))
        .unwrap()
        .with_tls(files);
    let other_key = limiter(&endpoint);
    assert!(other_key.try_acquire("k2").await.is_ok());

    // 127.0.0.1 is not a name of the server's certificate: refused, unless
    // only the host name check is skipped (the chain is still checked).
    let wrong_name = RedisEndpoint::single("127.0.0.1", port).with_tls(
        RedisTls::new()
            .ca_pem(ca.clone())
            .client_cert_pem(cert.clone(), key.clone()),
    );
    let e = limiter(&wrong_name).try_acquire("k3").await.unwrap_err();
    assert!(matches!(e, RedisLimitError::Tls(_)), "{e:?}");
    let skip = RedisEndpoint::single("127.0.0.1", port).with_tls(
        RedisTls::new()
            .ca_pem(ca)
            .client_cert_pem(cert, key)
            .skip_hostname_verification(true),
    );
    assert!(limiter(&skip).try_acquire("k3").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_or_no_client_certificate_is_a_typed_error() {
    let pki = TestPki::new("refuse");
    let (_server, port) = tls_server(&pki);
    let (ca, cert, key) = pki.client_pems();
    let other_ca = std::fs::read(pki.other_ca()).unwrap();

    let wrong_ca = RedisEndpoint::single("localhost", port)
        .with_tls(RedisTls::new().ca_pem(other_ca).client_cert_pem(cert, key));
    let limiter_wrong_ca = limiter(&wrong_ca);
    let e = limiter_wrong_ca.try_acquire("k").await.unwrap_err();
    assert!(matches!(e, RedisLimitError::Tls(_)), "{e:?}");
    assert!(e.is_unavailable());
    assert!(e.to_string().contains("TLS"), "{e}");
    assert_eq!(limiter_wrong_ca.redis_failures(), 1);

    // The server requires a client certificate: without one, refused.
    let no_cert = RedisEndpoint::single("localhost", port).with_tls(RedisTls::new().ca_pem(ca));
    let e = limiter(&no_cert).try_acquire("k").await.unwrap_err();
    assert!(
        matches!(e, RedisLimitError::Tls(_) | RedisLimitError::Redis(_)) && e.is_unavailable(),
        "{e:?}"
    );

    // A key that is not PEM is refused when connecting lazily, before any I/O.
    let bad = RedisEndpoint::single("localhost", port)
        .with_tls(RedisTls::new().client_cert_pem(b"nope".to_vec(), b"nope".to_vec()));
    assert!(bad.connect_lazy().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_with_its_password() {
    let server = RedisServer::start();
    let _: String = server
        .cmd(&[
            "ACL",
            "SETUSER",
            "limiter",
            "on",
            ">right-pw",
            "~*",
            "+@all",
        ])
        .await;
    let base = RedisEndpoint::single("127.0.0.1", server.port());
    decides(&limiter(
        &base.clone().with_auth(Some("limiter"), "right-pw"),
    ))
    .await;
    // The same user in a URL, percent-encoded.
    let url = format!("redis://limiter:right%2Dpw@127.0.0.1:{}/", server.port());
    assert!(
        limiter(&RedisEndpoint::parse(&url).unwrap())
            .try_acquire("k2")
            .await
            .is_ok()
    );

    let e = limiter(&base.clone().with_auth(Some("limiter"), "wrong-pw"))
        .try_acquire("k3")
        .await
        .unwrap_err();
    assert!(matches!(e, RedisLimitError::Auth(_)), "{e:?}");
    assert!(e.is_unavailable());

    // A user without the right to run scripts: refused, typed the same.
    let _: String = server
        .cmd(&["ACL", "SETUSER", "reader", "on", ">pw", "~*", "+get"])
        .await;
    let e = limiter(&base.with_auth(Some("reader"), "pw"))
        .try_acquire("k4")
        .await
        .unwrap_err();
    assert!(matches!(e, RedisLimitError::Auth(_)), "{e:?}");

    // Under a policy that answers, the refusal is answered, not returned.
    let closed = RedisLimiter::builder_with_connection(
        RedisEndpoint::single("127.0.0.1", server.port())
            .with_auth(Some("limiter"), "wrong-pw")
            .connect_lazy()
            .unwrap(),
        Quota::per_hour(1).unwrap(),
    )
    .failure_policy(FailurePolicy::Closed)
    .build()
    .unwrap();
    assert_eq!(
        denied(closed.try_acquire("k").await).source,
        Source::FailClosed
    );
}
