//! What happens to an upstream connection whose client went away in the
//! middle of an exchange (module `local`): the rest of the exchange is read
//! in a task of its own, bounded in time and bytes, and the connection goes
//! back to the thread's pool; otherwise it closes. Closing it would cost
//! the next request a new connection (wrk and browsers leave with
//! requests in flight).

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::Buf;
use hyper::body::{Body, Incoming};

use super::local::{Head, Held, checkin};
use crate::response::Carrier;

/// What an abandoned exchange still has to read before its connection can
/// serve another request.
pub(super) enum Remains {
    Head(Head),
    Body(Incoming),
}

/// The longest an abandoned exchange may take to finish.
const SALVAGE_WITHIN: Duration = Duration::from_secs(1);

/// The most body bytes an abandoned exchange reads to keep its connection.
const SALVAGE_BYTES: usize = 64 * 1024;

pub(super) fn spawn_salvage(held: Box<Held>, remains: Remains) {
    // Outside a runtime (or while it shuts down) the connection closes.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(salvage(held, remains));
    }
}

/// Finishes an exchange whose client went away (its head, then at most
/// [`SALVAGE_BYTES`] of body, within [`SALVAGE_WITHIN`]) and returns the
/// connection to this thread's pool; otherwise the connection closes.
/// Closing it would cost the next request a new connection (wrk and
/// browsers leave with requests in flight).
async fn salvage(held: Box<Held>, remains: Remains) {
    if let Ok(Some(held)) = tokio::time::timeout(SALVAGE_WITHIN, finish(held, remains)).await {
        held.kept.increment(1);
        checkin(held);
    }
}

/// The connection, once what `remains` of its exchange has been read.
async fn finish(mut held: Box<Held>, remains: Remains) -> Option<Box<Held>> {
    let mut body = match remains {
        Remains::Body(body) => body,
        Remains::Head(mut head) => poll_fn(|cx| {
            if held.poll_conn(cx) {
                return Poll::Ready(None);
            }
            head.as_mut().poll(cx).map(Result::ok)
        })
        .await?
        .into_body(),
    };
    let mut read = 0;
    loop {
        let frame = poll_fn(|cx| {
            if held.poll_conn(cx) {
                return Poll::Ready(None);
            }
            match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(None) => Poll::Ready(Some(None)),
                Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Some(frame))),
                Poll::Ready(Some(Err(_))) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await?;
        let Some(frame) = frame else {
            return Some(held);
        };
        read += frame.data_ref().map_or(0, Buf::remaining);
        if read > SALVAGE_BYTES {
            return None;
        }
    }
}
