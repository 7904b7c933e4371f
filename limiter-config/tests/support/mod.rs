//! Test helpers: a private temporary directory, removed on drop, and an
//! axum app served on an ephemeral loopback port with peer addresses; the
//! bounded waits of limiter-test-support.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir, removed when dropped.
pub(crate) struct TempDir(limiter_test_support::TempDir);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        TempDir(limiter_test_support::TempDir::new("config-test"))
    }

    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `text` to `name` in the directory; returns its path.
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        self.0.write(name, text)
    }
}

/// The path of a file under tests/files.
pub(crate) fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/files")
        .join(name)
}

/// Serves `app` on 127.0.0.1:0, recording peer addresses; returns its address.
pub(crate) async fn serve_app(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

// Not every test binary that includes the support uses them.
#[allow(unused_imports)]
pub(crate) use limiter_test_support::patience::{PATIENCE, until, within};
