//! What every accept loop and the admin listener share: the live settings
//! (replaced whole on reload) and the proxy with its logs and counts.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::config::GatewayConfig;
use crate::conn::{ClientCounts, Throttled};
use crate::front::Checks;
use crate::logs::RejectionLog;
use crate::proxy::Proxy;

/// What a live connection reads from the configuration (replaced whole on
/// a gateway-file reload; each connection keeps the one it started with).
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) config: GatewayConfig,
    pub(crate) checks: Checks,
}

impl Settings {
    pub(crate) fn new(config: GatewayConfig) -> Settings {
        Settings {
            checks: Checks {
                paths: config.paths,
                max_field_bytes: config.connections.max_field_bytes,
            },
            config,
        }
    }
}

/// The state every accept loop shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: ArcSwap<Settings>,
    pub(crate) proxy: Proxy,
    pub(crate) rejections: RejectionLog,
    pub(crate) clients: Arc<ClientCounts>,
    /// One line per interval for refused or failed accepts.
    pub(crate) refused_log: Mutex<Throttled>,
}
