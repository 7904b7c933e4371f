//! The cost after the response (crate docs, "Cost after the response"):
//! the charge the layer makes when a response head arrives
//! ([`Shared::charge_response`] on the waiting path, [`Owed`] on the fast
//! path, whose one box keeps the key until the head), and its counters.
//! What the charge reads (`ResponseHead`, `cost_in_header`, the layer's
//! `ResponseCost`) is in `response_cost`, below the layer's state.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use limiter_core::{Unavailable, debt::Debt};

use crate::backend::Backend;
use crate::key::KeyExtractor;
use crate::metrics::Metrics;
use crate::response_cost::{ResponseCost, ResponseHead};
use crate::shared::Shared;

impl<B: Backend, E: KeyExtractor<Key = B::Key>> Shared<B, E> {
    /// The permits a response asks for beyond the `paid` up-front cost;
    /// `None` when there is nothing to charge (a missing or malformed
    /// cost is counted).
    pub(crate) fn owed(
        &self,
        cost: &ResponseCost,
        head: &ResponseHead<'_>,
        paid: u32,
        metrics: &Metrics,
    ) -> Option<u64> {
        match (cost.read)(head) {
            None => {
                metrics.cost_invalid.increment(1);
                None
            }
            Some(total) => Some(total.saturating_sub(u64::from(paid))).filter(|&n| n > 0),
        }
    }

    /// Counts what a charge did.
    pub(crate) fn record_debt(&self, debt: Result<Debt, Unavailable>, metrics: &Metrics) {
        match debt {
            Ok(debt) => {
                metrics.cost_charged.increment(debt.charged);
                metrics.cost_dropped.increment(debt.dropped);
            }
            Err(error) => {
                metrics.backend_errors.increment(1);
                tracing::warn!(limiter = %self.name, %error, "rate limiter backend could not charge the cost after the response");
            }
        }
    }

    /// Reads the cost from `head` and charges the rest to `key`: the whole
    /// of the charge for the waiting path, which can `.await`.
    pub(crate) async fn charge_response(
        &self,
        key: &B::Key,
        head: &ResponseHead<'_>,
        paid: u32,
        metrics: &Metrics,
    ) {
        let Some(cost) = &self.response_cost else {
            return;
        };
        let Some(extra) = self.owed(cost, head, paid, metrics) else {
            return;
        };
        let debt = match self.backend.charge_ready(key, extra, cost.max_debt) {
            Some(debt) => Ok(debt),
            None => {
                self.backend
                    .charge_after_async(key, extra, cost.max_debt)
                    .await
            }
        };
        self.record_debt(debt, metrics);
    }
}

/// A charge still to be made once the response head arrives.
pub(crate) type Charging = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What an admitted request owes once its response head arrives, type-
/// erased so the response future needs no key type.
pub(crate) trait Settle: Send {
    /// Charges what `head` says; a future when the backend must be
    /// awaited.
    fn settle(self: Box<Self>, head: &ResponseHead<'_>) -> Option<Charging>;
}

/// The key and the layer of an admitted request, kept until its head.
pub(crate) struct Owed<B: Backend, E> {
    pub(crate) shared: Arc<Shared<B, E>>,
    pub(crate) key: B::Key,
    pub(crate) paid: u32,
    pub(crate) route: Option<Metrics>,
}

impl<B: Backend, E: KeyExtractor<Key = B::Key>> Settle for Owed<B, E> {
    fn settle(self: Box<Self>, head: &ResponseHead<'_>) -> Option<Charging> {
        let Owed {
            shared,
            key,
            paid,
            route,
        } = *self;
        let cost = shared.response_cost.as_ref()?;
        let metrics = route.as_ref().unwrap_or(&shared.metrics);
        let extra = shared.owed(cost, head, paid, metrics)?;
        let max_debt = cost.max_debt;
        if let Some(debt) = shared.backend.charge_ready(&key, extra, max_debt) {
            shared.record_debt(Ok(debt), metrics);
            return None;
        }
        Some(Box::pin(async move {
            let debt = shared
                .backend
                .charge_after_async(&key, extra, max_debt)
                .await;
            shared.record_debt(debt, route.as_ref().unwrap_or(&shared.metrics));
        }))
    }
}
