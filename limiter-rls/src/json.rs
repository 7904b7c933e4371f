//! The proto3 JSON form of the request and response (`POST /json`).
//!
//! The request is read as protobuf's JSON mapping reads it: field names in
//! lowerCamelCase or as in the `.proto` (`hitsAddend` or `hits_addend`),
//! enums by name or number, 64-bit integers as numbers or strings; unknown
//! fields are an error (a 400 naming the field). The response is written in
//! lowerCamelCase with enum names, durations as `"1.5s"`, and default
//! values omitted, as `protojson` writes it.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::proto::{
    Code, Entry, RateLimitDescriptor, RateLimitOverride, RateLimitRequest, RateLimitResponse,
    UInt64Value, Unit,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend", rename = "hits_addend")]
    hits_addend: Option<Number>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonOverride>,
    #[serde(default, alias = "hitsAddend", rename = "hits_addend")]
    hits_addend: Option<Number>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonOverride {
    #[serde(default, alias = "requestsPerUnit", rename = "requests_per_unit")]
    requests_per_unit: Option<Number>,
    #[serde(default)]
    unit: Option<Value>,
}

/// A number as proto3 JSON allows it: a JSON number or a decimal string.
#[derive(Deserialize)]
#[serde(untagged)]
enum Number {
    Int(u64),
    Text(String),
}

impl Number {
    fn get(&self, field: &str) -> Result<u64, String> {
        match self {
            Number::Int(n) => Ok(*n),
            Number::Text(s) => s
                .parse()
                .map_err(|_| format!("{field}: {s:?} is not a non-negative integer")),
        }
    }
}

/// Parses a proto3 JSON `RateLimitRequest`.
///
/// # Errors
///
/// A message naming what is wrong (malformed JSON, an unknown field, a
/// number out of range, an unknown unit).
pub(crate) fn parse_request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let r: JsonRequest = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let hits_addend = match &r.hits_addend {
        Some(n) => u32::try_from(n.get("hitsAddend")?)
            .map_err(|_| "hitsAddend is above 4294967295".to_owned())?,
        None => 0,
    };
    let mut descriptors = Vec::with_capacity(r.descriptors.len());
    for d in r.descriptors {
        let limit = match d.limit {
            Some(o) => Some(RateLimitOverride {
                requests_per_unit: match &o.requests_per_unit {
                    Some(n) => u32::try_from(n.get("requestsPerUnit")?)
                        .map_err(|_| "requestsPerUnit is above 4294967295".to_owned())?,
                    None => 0,
                },
                unit: match &o.unit {
                    None => 0,
                    Some(Value::String(s)) => {
                        Unit::parse(s).ok_or(format!("unknown unit {s:?}"))? as i32
                    }
                    Some(Value::Number(n)) => n
                        .as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .filter(|n| Unit::try_from(*n).is_ok())
                        .ok_or(format!("unknown unit {n}"))?,
                    Some(other) => return Err(format!("unit: expected a name, found {other}")),
                },
            }),
            None => None,
        };
        descriptors.push(RateLimitDescriptor {
            entries: d
                .entries
                .into_iter()
                .map(|e| Entry {
                    key: e.key,
                    value: e.value,
                })
                .collect(),
            limit,
            hits_addend: d
                .hits_addend
                .map(|n| n.get("hitsAddend").map(|value| UInt64Value { value }))
                .transpose()?,
            ..RateLimitDescriptor::default()
        });
    }
    Ok(RateLimitRequest {
        domain: r.domain,
        descriptors,
        hits_addend,
    })
}

fn code_name(code: i32) -> &'static str {
    match Code::try_from(code) {
        Ok(Code::Ok) => "OK",
        Ok(Code::OverLimit) => "OVER_LIMIT",
        _ => "UNKNOWN",
    }
}

fn duration(d: &crate::proto::Duration) -> String {
    if d.nanos == 0 {
        format!("{}s", d.seconds)
    } else {
        let frac = format!("{:09}", d.nanos);
        format!("{}.{}s", d.seconds, frac.trim_end_matches('0'))
    }
}

/// The response in proto3 JSON.
pub(crate) fn response_json(r: &RateLimitResponse) -> Value {
    let mut out = Map::new();
    out.insert("overallCode".into(), json!(code_name(r.overall_code)));
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .map(|s| {
            let mut m = Map::new();
            m.insert("code".into(), json!(code_name(s.code)));
            if let Some(l) = &s.current_limit {
                let mut lm = Map::new();
                if !l.name.is_empty() {
                    lm.insert("name".into(), json!(l.name));
                }
                if l.requests_per_unit != 0 {
                    lm.insert("requestsPerUnit".into(), json!(l.requests_per_unit));
                }
                let unit = Unit::try_from(l.unit).unwrap_or(Unit::Unknown);
                lm.insert("unit".into(), json!(unit.name().to_ascii_uppercase()));
                m.insert("currentLimit".into(), Value::Object(lm));
            }
            if s.limit_remaining != 0 {
                m.insert("limitRemaining".into(), json!(s.limit_remaining));
            }
            if let Some(d) = &s.duration_until_reset {
                m.insert("durationUntilReset".into(), json!(duration(d)));
            }
            Value::Object(m)
        })
        .collect();
    if !statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(statuses));
    }
    if !r.response_headers_to_add.is_empty() {
        out.insert(
            "responseHeadersToAdd".into(),
            r.response_headers_to_add
                .iter()
                .map(|h| json!({"key": h.key, "value": h.value}))
                .collect(),
        );
    }
    if let Some(md) = &r.dynamic_metadata {
        out.insert("dynamicMetadata".into(), struct_json(md));
    }
    Value::Object(out)
}

pub(crate) fn struct_json(s: &crate::proto::Struct) -> Value {
    Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect(),
    )
}

fn value_json(v: &crate::proto::Value) -> Value {
    use crate::proto::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => json!(n),
        Some(Kind::StringValue(s)) => json!(s),
        Some(Kind::BoolValue(b)) => json!(b),
        Some(Kind::StructValue(s)) => struct_json(s),
        Some(Kind::ListValue(l)) => l.values.iter().map(value_json).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_field_spellings_and_string_numbers() {
        let r = parse_request(
            br#"{"domain":"d","hitsAddend":2,"descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requestsPerUnit":"5","unit":"MINUTE"},"hits_addend":"0"}]}"#,
        )
        .unwrap();
        assert_eq!(r.hits_addend, 2);
        assert_eq!(r.descriptors[0].hits_addend.map(|h| h.value), Some(0));
        assert_eq!(
            r.descriptors[0].limit,
            Some(RateLimitOverride {
                requests_per_unit: 5,
                unit: Unit::Minute as i32
            })
        );
        assert!(
            parse_request(br#"{"domain":"d","descriptor":[]}"#)
                .unwrap_err()
                .contains("descriptor")
        );
        assert!(parse_request(br#"{"domain":"d","hitsAddend":-1}"#).is_err());
    }

    #[test]
    fn durations_as_protojson_writes_them() {
        assert_eq!(
            duration(&crate::proto::Duration {
                seconds: 1,
                nanos: 500_000_000
            }),
            "1.5s"
        );
        assert_eq!(
            duration(&crate::proto::Duration {
                seconds: 3,
                nanos: 0
            }),
            "3s"
        );
    }
}
