//! Graceful shutdown of client connections, one [`Shutdown`] per worker:
//! its [`shutdown`](Shutdown::shutdown) tells every connection it watches
//! to finish (an HTTP/1 one after the request in flight, an HTTP/2 one
//! with GOAWAY) and waits until all have ended.
//!
//! hyper-util's `GracefulShutdown` does the same, but polls its watch
//! receiver's `changed()` on every poll of the connection, which takes the
//! worker-wide lock of the channel's waiter list each time (about 750
//! instructions a request). Here the signal is polled once, to register
//! the task's waker, and after that only when the channel's version moved
//! or the task's waker changed: a poll reads one atomic instead.
//!
//! # Memory ordering
//!
//! `watch::Sender::send` bumps the channel's version before it wakes the
//! registered wakers, and `has_changed` loads it with `Acquire`: a
//! connection woken by the signal sees the new version on its next poll.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

use tokio::sync::watch;

/// The sending side: one per worker, for its connections.
#[derive(Debug)]
pub(crate) struct Shutdown {
    tx: watch::Sender<()>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            tx: watch::channel(()).0,
        }
    }
}

impl Shutdown {
    /// A watch for one more connection; shutdown waits until it is dropped.
    pub(crate) fn watcher(&self) -> ShutdownWatch {
        let rx = self.tx.subscribe();
        let mut signal = rx.clone();
        ShutdownWatch {
            rx,
            signal: Some(Box::pin(async move {
                // An error: the sender is gone, which ends the watch too.
                let _ = signal.changed().await;
            })),
            waker: None,
        }
    }

    /// Tells every watched connection to finish, and waits until every
    /// watch is dropped.
    pub(crate) async fn shutdown(self) {
        let _ = self.tx.send(());
        self.tx.closed().await;
    }
}

/// One connection's view of its worker's [`Shutdown`].
pub(crate) struct ShutdownWatch {
    /// Read for its version on each poll; held until the connection ends.
    rx: watch::Receiver<()>,
    /// The signal, with the waker it registered; `None` once it fired.
    signal: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    waker: Option<Waker>,
}

impl std::fmt::Debug for ShutdownWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownWatch")
            .field("signalled", &self.signal.is_none())
            .finish()
    }
}

impl ShutdownWatch {
    /// `true` once, on the first poll after the shutdown signal; otherwise
    /// `false`, with `cx`'s task woken when the signal comes.
    pub(crate) fn poll_signalled(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(signal) = &mut self.signal else {
            return false;
        };
        let registered = self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        // Err: the sender is gone; the signal future is ready then too.
        if registered && !self.rx.has_changed().unwrap_or(true) {
            return false;
        }
        if signal.as_mut().poll(cx).is_ready() {
            self.signal = None;
            self.waker = None;
            return true;
        }
        if !registered {
            self.waker = Some(cx.waker().clone());
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use super::*;

    #[tokio::test]
    async fn a_watch_sees_the_signal_once_and_shutdown_waits_for_it() {
        let shutdown = Shutdown::default();
        let mut watch = shutdown.watcher();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(!watch.poll_signalled(&mut cx));
        assert!(
            !watch.poll_signalled(&mut cx),
            "no signal, no matter how often"
        );
        // Sent, not yet seen: shutdown waits for the watch.
        let _ = shutdown.tx.send(());
        let mut done = std::pin::pin!(shutdown.shutdown());
        assert!(done.as_mut().poll(&mut cx).is_pending());
        assert!(watch.poll_signalled(&mut cx));
        assert!(!watch.poll_signalled(&mut cx), "once");
        assert!(done.as_mut().poll(&mut cx).is_pending());
        drop(watch);
        assert!(done.as_mut().poll(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn the_signal_wakes_a_waiting_task() {
        let shutdown = Shutdown::default();
        let mut watch = shutdown.watcher();
        let task = tokio::spawn(async move {
            std::future::poll_fn(|cx| {
                if watch.poll_signalled(cx) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
        });
        // Let the task register before the signal.
        tokio::task::yield_now().await;
        shutdown.shutdown().await;
        task.await.unwrap();
    }
}
