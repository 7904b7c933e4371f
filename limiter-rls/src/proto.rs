//! The wire messages of `envoy.service.ratelimit.v3.RateLimitService`, as
//! prost derives.
//!
//! Only the messages the service reads or writes are here, each with the
//! field numbers, names and types of Envoy's `.proto` files
//! (`envoy/service/ratelimit/v3/rls.proto`,
//! `envoy/extensions/common/ratelimit/v3/ratelimit.proto`,
//! `envoy/config/core/v3/base.proto`'s `HeaderValue`,
//! `envoy/type/v3/ratelimit_unit.proto`). A field we do not model (the
//! `quota` fields marked not-implemented upstream) is skipped by the decoder
//! as protobuf requires, so the encoding stays compatible both ways.
//!
//! Why derives instead of generated code: these eight messages are what
//! `prost-build` would emit for them, and writing them out keeps `protoc`,
//! `protox` and a build script (with its proto dependency tree: validate,
//! udpa, xds annotations) out of the build. The well-known types come from
//! `prost-types`.

use prost_types::{Duration, Struct};

/// `envoy.service.ratelimit.v3.RateLimitRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitRequest {
    /// The configuration domain the descriptors are looked up in.
    #[prost(string, tag = "1")]
    pub domain: String,
    /// The descriptors to decide, all together.
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<RateLimitDescriptor>,
    /// Hits each descriptor adds; 0 means 1 (the proto's default).
    #[prost(uint32, tag = "3")]
    pub hits_addend: u32,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitDescriptor {
    /// The hierarchical entries, most general first.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
    /// A limit to apply instead of the configured one.
    #[prost(message, optional, tag = "2")]
    pub limit: Option<RateLimitOverride>,
    /// Hits this descriptor adds, overriding the request's; a set 0 checks
    /// without spending.
    #[prost(message, optional, tag = "3")]
    pub hits_addend: Option<u64>,
}

/// `RateLimitDescriptor.Entry`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct Entry {
    /// The descriptor key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The descriptor value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `RateLimitDescriptor.RateLimitOverride`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct RateLimitOverride {
    /// Requests per unit.
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// `envoy.type.v3.RateLimitUnit` (the same numbers as [`Unit`]).
    #[prost(enumeration = "Unit", tag = "2")]
    pub unit: i32,
}

/// `RateLimitResponse.RateLimit.Unit` and `envoy.type.v3.RateLimitUnit`
/// (one numbering; `WEEK = 7` is the newer addition both share).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Unit {
    /// Not set.
    Unknown = 0,
    /// One second.
    Second = 1,
    /// 60 seconds.
    Minute = 2,
    /// 3,600 seconds.
    Hour = 3,
    /// 86,400 seconds.
    Day = 4,
    /// 30 days, as envoyproxy/ratelimit counts a month.
    Month = 5,
    /// 365 days.
    Year = 6,
    /// 7 days.
    Week = 7,
}

impl Unit {
    /// The unit's length in seconds, as envoyproxy/ratelimit's
    /// `UnitToDivider` defines it (a month is 30 days, a year 365); `None`
    /// for [`Unit::Unknown`].
    pub fn seconds(self) -> Option<u64> {
        match self {
            Unit::Unknown => None,
            Unit::Second => Some(1),
            Unit::Minute => Some(60),
            Unit::Hour => Some(3_600),
            Unit::Day => Some(86_400),
            Unit::Week => Some(7 * 86_400),
            Unit::Month => Some(30 * 86_400),
            Unit::Year => Some(365 * 86_400),
        }
    }

    /// The unit's name as the config and JSON write it (`"second"`...).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Unknown => "unknown",
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// The unit named `name`, case-insensitively (`"SECOND"`, `"minute"`).
    pub fn parse(name: &str) -> Option<Unit> {
        [
            Unit::Second,
            Unit::Minute,
            Unit::Hour,
            Unit::Day,
            Unit::Week,
            Unit::Month,
            Unit::Year,
        ]
        .into_iter()
        .find(|u| u.name().eq_ignore_ascii_case(name))
    }
}

/// `RateLimitResponse.Code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Code {
    /// Not known.
    Unknown = 0,
    /// Under the limit.
    Ok = 1,
    /// Over the limit.
    OverLimit = 2,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitResponse {
    /// The decision over all descriptors.
    #[prost(enumeration = "Code", tag = "1")]
    pub overall_code: i32,
    /// One status per request descriptor, in request order.
    #[prost(message, repeated, tag = "2")]
    pub statuses: Vec<DescriptorStatus>,
    /// Headers Envoy adds to the response to the client.
    #[prost(message, repeated, tag = "3")]
    pub response_headers_to_add: Vec<HeaderValue>,
    /// Headers Envoy adds to the request it forwards.
    #[prost(message, repeated, tag = "4")]
    pub request_headers_to_add: Vec<HeaderValue>,
    /// A body for the over-limit response.
    #[prost(bytes = "vec", tag = "5")]
    pub raw_body: Vec<u8>,
    /// Metadata Envoy emits as the filter's dynamic metadata.
    #[prost(message, optional, tag = "6")]
    pub dynamic_metadata: Option<Struct>,
}

/// `RateLimitResponse.RateLimit`: a limit as configured.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct RateLimit {
    /// Requests per unit.
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// The unit.
    #[prost(enumeration = "Unit", tag = "2")]
    pub unit: i32,
    /// The rule's `name`, if it has one.
    #[prost(string, tag = "3")]
    pub name: String,
}

/// `RateLimitResponse.DescriptorStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DescriptorStatus {
    /// This descriptor's answer.
    #[prost(enumeration = "Code", tag = "1")]
    pub code: i32,
    /// The limit applied (absent when none matched or it is unlimited).
    #[prost(message, optional, tag = "2")]
    pub current_limit: Option<RateLimit>,
    /// Requests still allowed now.
    #[prost(uint32, tag = "3")]
    pub limit_remaining: u32,
    /// The time until the limit is fully available again.
    #[prost(message, optional, tag = "4")]
    pub duration_until_reset: Option<Duration>,
}

/// `envoy.config.core.v3.HeaderValue` (the `raw_value` bytes form is not
/// written: header values here are ASCII).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct HeaderValue {
    /// The header name.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The header value.
    #[prost(string, tag = "2")]
    pub value: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Bytes as protoc encodes them for the same values: field numbers and
    /// wire types are Envoy's.
    #[test]
    fn request_encoding_matches_the_proto_numbers() {
        let req = RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: "k".into(),
                    value: "v".into(),
                }],
                limit: Some(RateLimitOverride {
                    requests_per_unit: 5,
                    unit: Unit::Minute as i32,
                }),
                hits_addend: Some(0),
            }],
            hits_addend: 2,
        };
        let bytes = req.encode_to_vec();
        // 1:"d" | 2:{ 1:{1:"k",2:"v"} 2:{1:5,2:2} 3:{} } | 3:2
        let expected: &[u8] = &[
            0x0a, 1, b'd', 0x12, 16, 0x0a, 6, 0x0a, 1, b'k', 0x12, 1, b'v', 0x12, 4, 0x08, 5, 0x10,
            2, 0x1a, 0, 0x18, 2,
        ];
        assert_eq!(bytes, expected);
        assert_eq!(RateLimitRequest::decode(expected).unwrap(), req);
    }

    #[test]
    fn units_parse_case_insensitively_and_have_their_lengths() {
        assert_eq!(Unit::parse("SECOND"), Some(Unit::Second));
        assert_eq!(Unit::parse("Week"), Some(Unit::Week));
        assert_eq!(Unit::parse("unknown"), None);
        assert_eq!(Unit::Month.seconds(), Some(2_592_000));
        assert_eq!(Unit::Year.seconds(), Some(31_536_000));
    }
}
