//! The OTLP/gRPC exporter and the W3C trace context of incoming requests
//! (feature `otel`).

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};

use super::{Sampling, TraceConfig};

/// The exporter could not be built (an endpoint that is not a URI).
pub type ExportError = opentelemetry_otlp::ExporterBuildError;

/// A tracer provider exporting to `config.endpoint` over OTLP/gRPC in
/// batches (a background thread; `OTEL_BSP_*` tune it), with the resource
/// and sampler of `config`. Call it inside a tokio runtime (tonic's channel
/// runs there); `shutdown` it on exit to send what is queued.
///
/// # Errors
///
/// [`ExportError`]: the endpoint does not parse.
pub fn tracer_provider(config: &TraceConfig) -> Result<SdkTracerProvider, ExportError> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if let Some(endpoint) = &config.endpoint {
        exporter = exporter.with_endpoint(endpoint.clone());
    }
    let exporter = exporter.build()?;
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

/// The trace context of a request's `traceparent` (and `tracestate`)
/// header, gRPC metadata included; an empty context when there is none or
/// it does not parse (the span then starts a new trace).
pub fn parent_context(headers: &http::HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&Headers(headers))
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
    }
}
