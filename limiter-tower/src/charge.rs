//! The cost after the response (crate docs, "Cost after the response"):
//! [`ResponseHead`], the header reader [`cost_in_header`], the charge the
//! layer makes when a response head arrives ([`Shared::charge_response`]
//! on the waiting path, [`Owed`] on the fast path, whose one box keeps the
//! key until the head), and its counters.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderName;
use http::{Extensions, HeaderMap, Response, StatusCode, Version};
use limiter_core::{Debt, Unavailable};

use crate::backend::Backend;
use crate::key::KeyExtractor;
use crate::metrics::Metrics;
use crate::shared::Shared;

/// The parts of a response that a cost after the response may read.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    status: StatusCode,
    version: Version,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> ResponseHead<'a> {
    /// The head of `response`.
    pub fn of<B>(response: &'a Response<B>) -> ResponseHead<'a> {
        ResponseHead {
            status: response.status(),
            version: response.version(),
            headers: response.headers(),
            extensions: response.extensions(),
        }
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The response headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The response extensions (values the inner service put there).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

/// Reads a request's total cost from its response head; `None`: missing or
/// malformed.
pub(crate) type ResponseCostFn = dyn Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync;

/// How a layer charges after the response.
pub(crate) struct ResponseCost {
    pub(crate) read: Box<ResponseCostFn>,
    pub(crate) max_debt: Duration,
}

impl fmt::Debug for ResponseCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseCost")
            .field("max_debt", &self.max_debt)
            .finish_non_exhaustive()
    }
}

/// The total cost in header `name`: one value of 1 to 20 ASCII digits
/// (optional surrounding spaces or tabs) that fits a `u64`. A missing
/// header, a header sent twice, a sign, a fraction or a unit is malformed.
///
/// # Examples
///
/// ```
/// use http::header::HeaderName;
/// use limiter_tower::{ResponseHead, cost_in_header};
///
/// let read = cost_in_header(HeaderName::from_static("x-tokens-used"));
/// let ok = http::Response::builder().header("x-tokens-used", " 250 ").body(()).unwrap();
/// assert_eq!(read(&ResponseHead::of(&ok)), Some(250));
/// let bad = http::Response::builder().header("x-tokens-used", "250tokens").body(()).unwrap();
/// assert_eq!(read(&ResponseHead::of(&bad)), None);
/// let missing = http::Response::new(());
/// assert_eq!(read(&ResponseHead::of(&missing)), None);
/// ```
pub fn cost_in_header(
    name: HeaderName,
) -> impl Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync + 'static {
    move |head| {
        let mut values = head.headers().get_all(&name).iter();
        let value = values.next()?;
        if values.next().is_some() {
            return None;
        }
        let digits = value.as_bytes().trim_ascii();
        if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // ASCII digits: valid UTF-8; 20 digits may still overflow a u64.
        std::str::from_utf8(digits).ok()?.parse().ok()
    }
}

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
