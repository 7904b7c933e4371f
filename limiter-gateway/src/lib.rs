//! A rate-limiting HTTP reverse proxy driven by the `limiter-config` rules
//! file: `limiter-gateway --config rules.yaml --listen 0.0.0.0:8080
//! --upstream http://127.0.0.1:3000`.
//!
//! # What a request goes through
//!
//! 0. One of `workers` single-threaded runtimes (one per core by default,
//!    each with its own `SO_REUSEPORT` socket per address; module `workers`)
//!    accepts the connection and serves all its requests.
//! 1. The listener (hyper 1 through hyper-util: HTTP/1.1 with keep-alive,
//!    h2c with prior knowledge) holds each connection to its deadlines and
//!    caps (module `conn`), inserts the socket peer as
//!    [`PeerAddr`](limiter_tower::PeerAddr), checks the head (`Host`, field
//!    sizes, module `front`) and normalises the path (module `paths`): every
//!    later step sees the normal form.
//! 2. [`RuleSet::layer`](limiter_config::RuleSet::layer) matches the
//!    request to its rule (route or prefix, method), keys it, and rejects
//!    (`429` with `Retry-After` and a problem document) or delays it
//!    exactly as `limiter-tower` does, headers included. A request no rule
//!    matches passes.
//! 3. [`Proxy`] forwards it to the upstream of the longest matching prefix
//!    on a keep-alive connection (HTTP/1.1: the serving worker's own, driven
//!    in the request's task; module `upstream`), both bodies streamed, hop-by-hop
//!    headers removed and forwarding headers appended (module `forward`);
//!    `502`/`504` problem documents when the upstream fails.
//!
//! Around it: the admin listener (`/metrics`, `/healthz`, `/rules`, module
//! `admin`), hot reload of the rules, the gateway file and the TLS
//! certificate on change and SIGHUP ([`watch`], on `limiter-reload`;
//! limiter state kept, a bad file keeping the old rules), and graceful shutdown ([`Running::shutdown`]:
//! drain delay, then close, then finish in-flight requests). `docs/gateway.md` is the guide.
//!
//! # Example
//!
//! ```no_run
//! use limiter_gateway::{Gateway, GatewayConfig, metrics_handle};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! metrics_handle(); // before the rules are built, so their metrics register
//! let rules = limiter_config::RuleSet::load("rules.yaml")?;
//! let config = GatewayConfig::single("127.0.0.1:8080".parse()?, "http://127.0.0.1:3000".parse()?);
//! let running = Gateway::new(config, rules).start().await?;
//! println!("listening on {}", running.addrs()[0]);
//! tokio::signal::ctrl_c().await?;
//! running.shutdown().await;
//! # Ok(()) }
//! ```

//! # Features
//!
//! `testing`: the `echo` module, the upstream of the demo, the benchmark
//! and the tests; not part of the proxy.

mod accept;
mod admin;
mod admin_auth;
mod admin_http;
mod admin_keys;
mod body;
mod config;
mod conn;
mod dashboard;
#[cfg(feature = "testing")]
pub mod echo;
mod forward;
mod framing;
mod front;
mod hop_by_hop;
mod host;
mod logs;
mod paths;
mod pressure;
mod proxy;
mod reload;
mod reply;
mod response;
mod server;
mod settings;
mod shutdown;
mod state;
mod tls;
mod upgrade;
pub mod upstream;
mod workers;

pub use admin::metrics_handle;
pub use admin_auth::{
    AdminToken, AdminTokenError, CHALLENGE, MIN_TOKEN_LEN, PublicAdminWithoutToken,
    check_admin_bind,
};
pub use config::{
    GatewayConfig, GatewayConfigError, LogConfig, Timeouts, Upstream, parse_addr,
    parse_upstream_url,
};
pub use conn::ConnectionLimits;
pub use logs::init_logging;
pub use paths::PathMode;
pub use proxy::{Proxy, ProxyBody, problem};
pub use reload::{LoadGateway, watch};
pub use response::ResponseBody;
pub use server::{Drained, Gateway, Running};
pub use tls::{ClientTls, TlsConfig};
