//! A rule's HTTP layer, built once per snapshot around the rule's live
//! limiter: for a rate rule, `limiter-tower`'s layer with its backend
//! ([`RuleBackend`]), key ([`RuleKey`]), name, mode, allowlist, header
//! syntax and cost (up front, and after the response as capped debt); for a concurrency rule, `limiter-concurrency`'s layer, which
//! holds a permit while the inner service works.
//!
//! A concurrency rule does not go through limiter-core's `Decide` seam: a
//! decision there is a grant of permits that time gives back (a wait, a
//! headroom, a refill), while a concurrency permit is given back by the
//! request itself when its response is ready, and its release feeds the
//! estimator. Its layer answers a refusal with the same problem document
//! (`limiter_tower::problem`), `503` and `Retry-After`.

use std::sync::Arc;

use limiter_concurrency::http::ConcurrencyLimitLayer;
use limiter_rules::{Algorithm, HeaderSpec, Mode, RuleSpec};
use limiter_tower::{Draft10, LegacyHeaders, RateLimitLayer};

use crate::RuleClock;
use crate::backend::RuleBackend;
use crate::key::RuleKey;
use crate::limiter::RuleLimiter;

/// A rule's `limiter-tower` layer.
pub(crate) type RuleLayer<C> = RateLimitLayer<RuleBackend<C>, RuleKey>;

/// The HTTP layer of a routed rule.
pub(crate) enum RoutedLayer<C: RuleClock> {
    /// A rate rule: limiter-tower's layer.
    Rate(RuleLayer<C>),
    /// A concurrency rule: limiter-concurrency's layer over the rule's
    /// limiter (shared with every snapshot that keeps the rule).
    Concurrency(ConcurrencyLimitLayer),
}

/// The layer of `rule`, whichever kind it is.
pub(crate) fn routed_layer<C: RuleClock>(rule: &Arc<RuleLimiter<C>>) -> RoutedLayer<C> {
    let Some(limiter) = rule.concurrency() else {
        return RoutedLayer::Rate(rule_layer(rule));
    };
    let layer = ConcurrencyLimitLayer::new(&rule.spec.name, limiter.clone());
    match rule.spec.mode {
        Mode::Reject => RoutedLayer::Concurrency(layer),
        Mode::Delay { max_delay } => RoutedLayer::Concurrency(layer.wait(max_delay)),
    }
}

/// The layer of `rule`.
pub(crate) fn rule_layer<C: RuleClock>(rule: &Arc<RuleLimiter<C>>) -> RuleLayer<C> {
    let spec = &rule.spec;
    let key = rule_key(spec);
    let builder = RateLimitLayer::builder(RuleBackend(Arc::clone(rule)), key)
        .name(spec.name.clone())
        .mode(match spec.mode {
            Mode::Reject => limiter_tower::Mode::Reject,
            Mode::Delay { max_delay } => limiter_tower::Mode::Delay { max_delay },
        })
        .allow_ips(spec.allowlist.iter().copied());
    // The up-front cost, and the rest from the response head as capped
    // debt (validation allows a response header on GCRA rules only).
    let builder = match spec.cost.request {
        1 => builder,
        request => builder.cost(move |_| request),
    };
    let builder = match &spec.cost.response_header {
        Some(name) => builder
            .cost_from_response_header(name.clone())
            .max_debt(spec.cost.max_debt),
        None => builder,
    };
    let builder = match spec.headers {
        // A shadowed rule is invisible to clients unless asked otherwise.
        _ if spec.shadow && !spec.shadow_headers => builder.without_headers(),
        HeaderSpec::Draft10 => builder.headers(Draft10),
        HeaderSpec::Legacy => builder.headers(LegacyHeaders),
        HeaderSpec::None => builder.without_headers(),
    };
    // The name was checked by validation (1 to 64 header-safe characters),
    // and so was the debt cap (from the rule's t to a day).
    builder
        .build()
        .unwrap_or_else(|_| unreachable!("rule names and debt caps are validated"))
}

/// The key extractor of `spec` (the layer's, and `explain`'s).
pub(crate) fn rule_key(spec: &RuleSpec) -> RuleKey {
    let class_header = match &spec.algorithm {
        Algorithm::Priority { class_header, .. } => class_header.as_ref(),
        _ => None,
    };
    RuleKey::new(
        &spec.key.parts,
        &spec.trusted_proxies,
        spec.matcher.as_ref(),
        class_header,
    )
}
