//! envoyproxy/ratelimit's xDS resource as config: a response's
//! `RateLimitConfig` resources written in their YAML form (as their
//! `ConfigXdsProtoToYaml` does: every field where their file has it, unit
//! `UNKNOWN` as no unit) and read by the one config reader, one resource
//! one file named `xds/<name>`, so every check and every error message is
//! the file's.

use std::path::PathBuf;

use prost::Message;

use crate::config::RuleSet;
use crate::proto::DiscoveryResponse;
use crate::proto::config::{RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, TYPE_URL};

/// The rule set of a response: every resource a valid `RateLimitConfig`.
///
/// # Errors
///
/// What is wrong, as text for the NACK's `error_detail`.
pub(crate) fn rules_of(response: &DiscoveryResponse) -> Result<RuleSet, String> {
    if response.type_url != TYPE_URL {
        return Err(format!(
            "type_url {:?}: only {TYPE_URL} is subscribed to",
            response.type_url
        ));
    }
    let mut files = Vec::with_capacity(response.resources.len());
    for (i, any) in response.resources.iter().enumerate() {
        if any.type_url != TYPE_URL {
            return Err(format!(
                "resources[{i}]: type_url {:?} is not {TYPE_URL}",
                any.type_url
            ));
        }
        let config = RateLimitConfig::decode(any.value.as_slice())
            .map_err(|e| format!("resources[{i}]: not a RateLimitConfig: {e}"))?;
        let name = if config.name.is_empty() {
            format!("resource-{i}")
        } else {
            config.name.clone()
        };
        files.push((PathBuf::from("xds").join(name), yaml_of(&config)));
    }
    RuleSet::from_files(files).map_err(|e| e.to_string())
}

/// The config as their YAML file would write it (in YAML's JSON form, one
/// field a line so errors point at the field).
fn yaml_of(config: &RateLimitConfig) -> String {
    let root = serde_json::json!({
        "domain": config.domain,
        "descriptors": config.descriptors.iter().map(descriptor).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&root).unwrap_or_default()
}

fn descriptor(d: &RateLimitDescriptor) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("key".into(), d.key.clone().into());
    if !d.value.is_empty() {
        m.insert("value".into(), d.value.clone().into());
    }
    if let Some(p) = &d.rate_limit {
        m.insert("rate_limit".into(), policy(p));
    }
    if !d.descriptors.is_empty() {
        m.insert(
            "descriptors".into(),
            d.descriptors.iter().map(descriptor).collect(),
        );
    }
    for (name, set) in [
        ("shadow_mode", d.shadow_mode),
        ("detailed_metric", d.detailed_metric),
        ("quota_mode", d.quota_mode),
    ] {
        if set {
            m.insert(name.into(), true.into());
        }
    }
    if let Some(md) = &d.metadata {
        m.insert("metadata".into(), crate::json::struct_json(md));
    }
    serde_json::Value::Object(m)
}

fn policy(p: &RateLimitPolicy) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    // UNKNOWN (0) is theirs for "no unit": absent, as `unlimited` wants.
    if p.unit != 0 {
        let unit = crate::proto::config::RateLimitUnit::try_from(p.unit)
            .map_or_else(|_| p.unit.to_string(), |u| u.as_str_name().to_owned());
        m.insert("unit".into(), unit.into());
    }
    m.insert("requests_per_unit".into(), p.requests_per_unit.into());
    if p.unlimited {
        m.insert("unlimited".into(), true.into());
    }
    if !p.name.is_empty() {
        m.insert("name".into(), p.name.clone().into());
    }
    if !p.replaces.is_empty() {
        m.insert(
            "replaces".into(),
            p.replaces
                .iter()
                .map(|r| serde_json::json!({ "name": r.name }))
                .collect(),
        );
    }
    serde_json::Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::config::RateLimitReplace;
    use crate::proto::{Any, Kind, Struct, Value};

    fn response(configs: &[RateLimitConfig]) -> DiscoveryResponse {
        DiscoveryResponse {
            type_url: TYPE_URL.into(),
            resources: configs
                .iter()
                .map(|c| Any {
                    type_url: TYPE_URL.into(),
                    value: c.encode_to_vec(),
                })
                .collect(),
            ..DiscoveryResponse::default()
        }
    }

    fn policy(unit: i32, n: u32) -> Option<RateLimitPolicy> {
        Some(RateLimitPolicy {
            unit,
            requests_per_unit: n,
            ..RateLimitPolicy::default()
        })
    }

    /// Every field of their resource lands where their YAML puts it: the
    /// rule set equals the one read from the YAML file they would write.
    #[test]
    fn a_resource_reads_as_their_yaml_file() {
        let config = RateLimitConfig {
            name: "c".into(),
            domain: "d".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    key: "user".into(),
                    rate_limit: policy(2, 5),
                    shadow_mode: true,
                    descriptors: vec![RateLimitDescriptor {
                        key: "path".into(),
                        value: "/a".into(),
                        rate_limit: Some(RateLimitPolicy {
                            unlimited: true,
                            ..RateLimitPolicy::default()
                        }),
                        ..RateLimitDescriptor::default()
                    }],
                    ..RateLimitDescriptor::default()
                },
                RateLimitDescriptor {
                    key: "plan".into(),
                    value: "gold".into(),
                    rate_limit: Some(RateLimitPolicy {
                        unit: 7,
                        requests_per_unit: 9,
                        name: "gold".into(),
                        replaces: vec![RateLimitReplace { name: "x".into() }],
                        ..RateLimitPolicy::default()
                    }),
                    quota_mode: true,
                    detailed_metric: true,
                    metadata: Some(Struct {
                        fields: [(
                            "tier".to_owned(),
                            Value {
                                kind: Some(Kind::StringValue("gold".into())),
                            },
                        )]
                        .into(),
                    }),
                    ..RateLimitDescriptor::default()
                },
            ],
        };
        let yaml = "domain: d
descriptors:
  - key: user
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
    descriptors:
      - {key: path, value: /a, rate_limit: {unlimited: true}}
  - key: plan
    value: gold
    quota_mode: true
    detailed_metric: true
    metadata: {tier: gold}
    rate_limit: {unit: week, requests_per_unit: 9, name: gold, replaces: [{name: x}]}
";
        let from_xds = rules_of(&response(&[config])).unwrap();
        let from_file = RuleSet::from_files(vec![("f.yaml".into(), yaml.into())]).unwrap();
        assert_eq!(from_xds.dump(), from_file.dump());
        let find = |rules: &RuleSet| {
            let m = rules
                .find(
                    "d",
                    &[crate::proto::Entry {
                        key: "plan".into(),
                        value: "gold".into(),
                    }],
                    None,
                )
                .unwrap();
            (m.rule.as_ref().clone(), m.metadata.clone())
        };
        assert_eq!(find(&from_xds), find(&from_file));
    }

    #[test]
    fn wrong_types_and_bad_configs_are_errors_that_say_where() {
        let mut r = response(&[]);
        assert!(rules_of(&r).unwrap().is_empty(), "no resource: no domain");
        r.resources.push(Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            value: Vec::new(),
        });
        assert!(rules_of(&r).unwrap_err().contains("resources[0]"));
        let two = |name: &str| RateLimitConfig {
            name: name.into(),
            domain: "same".into(),
            descriptors: Vec::new(),
        };
        let e = rules_of(&response(&[two("a"), two("b")])).unwrap_err();
        assert!(e.contains("xds/b"), "{e}");
    }
}
