//! [`ResponseBody`]: the body of an upstream's response as the gateway
//! streams it to the client, with the connection it arrives on when that
//! connection is the request task's own (module `upstream`'s per-thread
//! path): polled with the body, released to its pool when the body ends,
//! closed when the body is dropped before its end or fails.

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
}

/// The body of an upstream's response: hyper's stream, and on the
/// per-thread path the connection it arrives on.
pub struct ResponseBody {
    body: Incoming,
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
            body,
            carrier: None,
        }
    }

    /// A body arriving on `carrier` (`None`: the connection has ended).
    pub(crate) fn carried(body: Incoming, carrier: Option<Box<dyn Carrier>>) -> ResponseBody {
        let mut body = ResponseBody { body, carrier };
        if body.body.is_end_stream() {
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
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        match &frame {
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(Ok(_))) if this.body.is_end_stream() => this.finish(),
            Poll::Ready(Some(Err(_))) => this.carrier = None,
            Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
