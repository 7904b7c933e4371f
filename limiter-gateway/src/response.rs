//! [`ResponseBody`]: the body of an upstream's response as the gateway
//! streams it to the client, with the connection it arrives on when that
//! connection is the request task's own (module `upstream`'s per-thread
//! path): polled with the body, released to its pool when the body ends,
//! handed back to the pool's salvage when the body is dropped before its
//! end (the client went), closed when it fails.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// An upstream connection that the body's reader drives.
pub(crate) trait Carrier: Send {
    /// Polls the connection (it reads what the body then yields); `true`
    /// when it has ended (closed or failed).
    fn poll_conn(&mut self, cx: &mut Context<'_>) -> bool;

    /// The body has ended: the connection may serve another request.
    fn release(self: Box<Self>);

    /// The body was dropped before its end (the client went): the rest of
    /// `body` may still be read off the connection to keep it.
    fn abandon(self: Box<Self>, body: Incoming);
}

/// The body of an upstream's response: hyper's stream, and on the
/// per-thread path the connection it arrives on.
pub struct ResponseBody {
    /// Always `Some` but in `Drop`, which may hand it to the carrier.
    body: Option<Incoming>,
    carrier: Option<Box<dyn Carrier>>,
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("body", &self.body)
            .field("carried", &self.carrier.is_some())
            .finish()
    }
}

impl ResponseBody {
    /// A body whose connection another task drives (hyper-util's pool).
    pub(crate) fn detached(body: Incoming) -> ResponseBody {
        ResponseBody {
            body: Some(body),
            carrier: None,
        }
    }

    /// A body arriving on `carrier` (`None`: the connection has ended).
    pub(crate) fn carried(body: Incoming, carrier: Option<Box<dyn Carrier>>) -> ResponseBody {
        let ended = body.is_end_stream();
        let mut body = ResponseBody {
            body: Some(body),
            carrier,
        };
        if ended {
            // No frame will be asked for (an empty or HEAD response).
            body.finish();
        }
        body
    }

    fn finish(&mut self) {
        if let Some(carrier) = self.carrier.take() {
            carrier.release();
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if let Some(carrier) = &mut this.carrier
            && carrier.poll_conn(cx)
        {
            // Closed or failed: what it read is in the body already.
            this.carrier = None;
        }
        let Some(body) = &mut this.body else {
            return Poll::Ready(None);
        };
        let frame = Pin::new(&mut *body).poll_frame(cx);
        let ended = body.is_end_stream();
        match &frame {
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(Ok(_))) if ended => this.finish(),
            Poll::Ready(Some(Err(_))) => this.carrier = None,
            Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(SizeHint::default, Body::size_hint)
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let (Some(carrier), Some(body)) = (self.carrier.take(), self.body.take()) {
            carrier.abandon(body);
        }
    }
}
