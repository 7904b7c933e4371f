//! The HTTP client of the OTLP/HTTP exporter: hyper (which the workspace
//! serves with) on the tokio runtime the exporter was built in.
//!
//! The exporter sends from the batch processor's own thread, which has no
//! tokio runtime, and hyper's connections need one: each request is
//! spawned on the runtime captured at construction and awaited through its
//! `JoinHandle`, which any executor can poll. opentelemetry-otlp's own
//! `hyper-client` feature calls hyper on the calling thread instead, and
//! so panics there; its reqwest clients would add a second HTTP stack.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError};
use tokio::runtime::Handle;

/// The longest one export may take (connect, send, answer), as
/// OpenTelemetry's default `OTEL_EXPORTER_OTLP_TIMEOUT`.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Plain-HTTP OTLP client on a tokio runtime.
#[derive(Debug, Clone)]
pub(super) struct HyperClient {
    client: Client<HttpConnector, Full<Bytes>>,
    runtime: Handle,
}

impl HyperClient {
    /// A client whose requests run on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub(super) fn on_current_runtime() -> HyperClient {
        HyperClient {
            client: Client::builder(TokioExecutor::new()).build_http(),
            runtime: Handle::current(),
        }
    }
}

impl HttpClient for HyperClient {
    fn send_bytes<'a, 'f>(
        &'a self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'f>>
    where
        'a: 'f,
        Self: 'f,
    {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let answer = tokio::time::timeout(TIMEOUT, async {
                let response = client.request(request.map(Full::new)).await?;
                let (head, body) = response.into_parts();
                let body = body.collect().await?.to_bytes();
                Ok::<_, HttpError>(Response::from_parts(head, body))
            })
            .await
            .map_err(|_| format!("no answer from the OTLP/HTTP collector within {TIMEOUT:?}"))??;
            if !answer.status().is_success() {
                return Err(format!("the OTLP/HTTP collector answered {}", answer.status()).into());
            }
            Ok(answer)
        });
        Box::pin(async move { sent.await? })
    }
}
