//! The two body wrappers of a proxied exchange: the client's request body,
//! which remembers whether *the client* broke it (so the proxy answers
//! `400` and counts a client error instead of blaming the upstream), and
//! the response body, which holds the connection's in-flight mark until its
//! last byte is sent (module `conn`).

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use crate::conn::InFlight;
use crate::front::ClientError;

/// The client's request body on its way to the upstream.
#[derive(Debug)]
pub(crate) struct ClientBody {
    inner: Incoming,
    fault: Arc<OnceLock<ClientError>>,
}

/// Whether the client broke its body (set once, read after the upstream
/// request failed).
#[derive(Debug, Clone, Default)]
pub(crate) struct BodyFault(Arc<OnceLock<ClientError>>);

impl BodyFault {
    pub(crate) fn get(&self) -> Option<ClientError> {
        self.0.get().copied()
    }
}

impl ClientBody {
    pub(crate) fn new(inner: Incoming) -> (ClientBody, BodyFault) {
        let fault = BodyFault::default();
        (
            ClientBody {
                inner,
                fault: Arc::clone(&fault.0),
            },
            fault,
        )
    }
}

/// Whether `error` means the client went away mid-body (rather than sent
/// bytes that do not parse).
fn aborted(error: &hyper::Error) -> bool {
    if error.is_incomplete_message() || error.is_canceled() || error.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{
                BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof,
            };
            return matches!(
                io.kind(),
                UnexpectedEof | ConnectionReset | BrokenPipe | ConnectionAborted
            );
        }
        source = e.source();
    }
    false
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Err(e))) = &polled {
            let kind = if aborted(e) {
                ClientError::BodyAborted
            } else {
                ClientError::BodyMalformed
            };
            if self.fault.set(kind).is_ok() {
                kind.count();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body holding its connection's in-flight mark.
#[derive(Debug)]
pub(crate) struct Tracked<B> {
    inner: B,
    _in_flight: InFlight,
}

impl<B> Tracked<B> {
    pub(crate) fn new(inner: B, in_flight: InFlight) -> Tracked<B> {
        Tracked {
            inner,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
