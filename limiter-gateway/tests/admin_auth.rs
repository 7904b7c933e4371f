//! The admin API's authentication over a real connection: a loopback
//! server answering with `authorize` and `AuthDenied::into_response`, a
//! real client sending no token, a wrong one and the right one.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use limiter_gateway::{AdminToken, CHALLENGE, authorize};
use support::{TempDir, client, empty, text};
use tokio::net::TcpListener;

async fn serve(token: Arc<AdminToken>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let token = token.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let answer = match authorize(Some(&token), request.method(), request.headers())
                    {
                        Ok(()) => Response::new(Full::new(Bytes::from_static(b"changed"))),
                        Err(denied) => denied.into_response(),
                    };
                    std::future::ready(Ok::<_, Infallible>(answer))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

async fn call(
    addr: SocketAddr,
    method: Method,
    auth: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}/rules/api/keys/tenant-7"));
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    let response = client()
        .request(request.body(empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, text(response).await)
}

#[tokio::test]
async fn missing_wrong_and_right_tokens_over_http() {
    let dir = TempDir::new();
    let path = dir.write("admin-token", "Zq3kP0v9-Lm2x7Rt4Ws8\n");
    let addr = serve(Arc::new(AdminToken::from_file(&path).unwrap())).await;

    let (status, challenge, body) = call(addr, Method::PUT, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenge.as_deref(), Some(CHALLENGE));
    assert!(body.contains("\"status\":401"), "{body}");

    let (status, challenge, body) =
        call(addr, Method::DELETE, Some("Bearer Zq3kP0v9-Lm2x7Rt4Ws9")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(challenge, None);
    assert!(!body.contains("Zq3k"), "the token is never echoed: {body}");

    let (status, _, body) = call(addr, Method::PUT, Some("Bearer Zq3kP0v9-Lm2x7Rt4Ws8")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "changed"));

    // Reading needs no token.
    let (status, _, _) = call(addr, Method::GET, None).await;
    assert_eq!(status, StatusCode::OK);
}
