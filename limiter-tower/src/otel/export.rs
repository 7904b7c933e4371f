//! The OTLP exporter, the layer's default tracer and the W3C trace context
//! of requests (feature `otel`).

use std::sync::OnceLock;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};

use super::http_client::HyperClient;
use super::{Protocol, Sampling, TraceConfig};

/// The exporter could not be built (an endpoint that is not a URI).
pub type ExportError = opentelemetry_otlp::ExporterBuildError;

/// A tracer provider exporting to `config.endpoint` over `config.protocol`
/// in batches (a background thread; `OTEL_BSP_*` tune it), with the
/// resource and sampler of `config`. Call it inside a tokio runtime: the
/// exporter's connections run on it (tonic's channel, or hyper's for
/// OTLP/HTTP). `shutdown` it on exit to send what is queued, from a
/// blocking thread (`spawn_blocking`): the last batch needs the runtime.
///
/// # Errors
///
/// [`ExportError`]: the endpoint does not parse.
///
/// # Panics
///
/// Outside a tokio runtime.
pub fn tracer_provider(config: &TraceConfig) -> Result<SdkTracerProvider, ExportError> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match config.protocol {
        Protocol::Grpc => builder
            .with_tonic()
            .with_endpoint(config.endpoint.clone())
            .build()?,
        Protocol::HttpProtobuf => builder
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(HyperClient::on_current_runtime())
            .with_endpoint(config.endpoint.clone())
            .build()?,
    };
    let mut attributes = Vec::new();
    if let Some(ns) = &config.service_namespace {
        attributes.push(KeyValue::new("service.namespace", ns.clone()));
    }
    if let Some(id) = &config.service_instance_id {
        attributes.push(KeyValue::new("service.instance.id", id.clone()));
    }
    let resource = Resource::builder_empty()
        .with_service_name(config.service_name.clone())
        .with_attributes(attributes)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler(config.sampling))
        .with_resource(resource)
        .build())
}

fn sampler(s: Sampling) -> Sampler {
    match s {
        Sampling::AlwaysOn => Sampler::AlwaysOn,
        Sampling::AlwaysOff => Sampler::AlwaysOff,
        Sampling::Ratio(r) => Sampler::TraceIdRatioBased(r),
        Sampling::ParentBasedOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        Sampling::ParentBasedOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        Sampling::ParentBasedRatio(r) => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(r)))
        }
    }
}

/// [`tracer_provider`], with its tracer (scope `limiter-tower`) made the
/// layers' default ([`set_default_tracer`]): what a binary calls once at
/// start, inside its runtime and before its layers are built. Returns the
/// provider, to shut down on exit.
///
/// # Errors
///
/// As [`tracer_provider`]. A default tracer set earlier stays (logged).
pub fn install(config: &TraceConfig) -> Result<SdkTracerProvider, ExportError> {
    let provider = tracer_provider(config)?;
    if set_default_tracer(provider.tracer("limiter-tower")).is_err() {
        tracing::warn!("a default tracer was set already; the layers keep it");
    }
    Ok(provider)
}

static DEFAULT_TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Sets the tracer of every [`RateLimitLayer`](crate::RateLimitLayer)
/// built from now on without one of its own
/// ([`RateLimitBuilder::tracer`](crate::RateLimitBuilder::tracer)): how a
/// binary traces the layers a library builds for it (limiter-config's rule
/// layers in the gateway). Once per process; layers built before keep
/// tracing nothing.
///
/// # Errors
///
/// A default tracer was set already: `tracer` is handed back.
pub fn set_default_tracer(tracer: SdkTracer) -> Result<(), SdkTracer> {
    DEFAULT_TRACER.set(tracer)
}

/// The tracer [`set_default_tracer`] set, if any.
pub fn default_tracer() -> Option<&'static SdkTracer> {
    DEFAULT_TRACER.get()
}

/// The trace context of a request's `traceparent` (and `tracestate`)
/// header, gRPC metadata included; an empty context when there is none or
/// it does not parse (the span then starts a new trace).
pub fn parent_context(headers: &http::HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&Headers(headers))
}

/// Writes the `traceparent` (and `tracestate`) of `cx`'s span into
/// `headers`, replacing the caller's: what comes next is a child of that
/// span. Nothing is written for a context without a valid span.
pub fn inject(cx: &Context, headers: &mut http::HeaderMap) {
    TraceContextPropagator::new().inject_context(cx, &mut HeadersMut(headers));
}

struct HeadersMut<'a>(&'a mut http::HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::try_from(value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceContextExt;

    use super::*;

    #[test]
    fn traceparent_is_read_from_the_headers() {
        let mut h = http::HeaderMap::new();
        h.insert(
            "traceparent",
            http::HeaderValue::from_static(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        );
        let cx = parent_context(&h);
        let sc = cx.span().span_context().clone();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_remote() && sc.is_sampled());
        let none = parent_context(&http::HeaderMap::new());
        assert!(!none.span().span_context().is_valid());
        let mut out = http::HeaderMap::new();
        inject(&cx, &mut out);
        assert_eq!(out["traceparent"], h["traceparent"]);
        let mut untouched = http::HeaderMap::new();
        inject(&none, &mut untouched);
        assert!(untouched.is_empty());
    }
}
