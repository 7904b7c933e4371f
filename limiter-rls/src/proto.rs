//! The wire messages: Envoy's rate limit service
//! (`envoy.service.ratelimit.v3`), the aggregated discovery service
//! (`envoy.service.discovery.v3`) and envoyproxy/ratelimit's own xDS
//! resource (`ratelimit.config.ratelimit.v3.RateLimitConfig`), all from the
//! `envoy-types` crate (prost code generated from the official protos,
//! kept in step with Envoy's releases), re-exported under short names.
//!
//! Only [`Unit`] is written here: the configured unit as the service
//! reasons about it (its length, its name in YAML and JSON), with the same
//! numbers as `envoy.type.v3.RateLimitUnit` and the response's `Unit`.
//!
//! The well-known types (`Duration`, `Struct`, `Any`, `UInt64Value`) are
//! envoy-types' own: the generated messages name them, so they are the ones
//! a field takes.

pub use envoy_types::pb::envoy::config::core::v3::{HeaderValue, Node};
pub use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
pub use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
pub use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse, aggregated_discovery_service_client,
    aggregated_discovery_service_server,
};
pub use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
pub use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
pub use envoy_types::pb::google::protobuf::{
    Any, Duration, ListValue, Struct, UInt64Value, Value, value::Kind,
};
pub use envoy_types::pb::google::rpc::Status as RpcStatus;

/// envoyproxy/ratelimit's xDS resource (`rls_conf.proto`): one domain's
/// descriptors, as their YAML file has them.
pub mod config {
    pub use envoy_types::pb::ratelimit::config::ratelimit::v3::{
        RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitReplace, RateLimitUnit,
    };

    /// The type URL of [`RateLimitConfig`] resources, the one their xDS
    /// client subscribes to.
    pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";
}

/// The unit of a limit: `RateLimitResponse.RateLimit.Unit`,
/// `envoy.type.v3.RateLimitUnit` and `RateLimitUnit` of their xDS resource
/// share its numbering (`WEEK = 7` is the newer addition all three have).
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
                hits_addend: Some(UInt64Value { value: 0 }),
                ..Default::default()
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

    #[test]
    fn units_number_as_the_wire_enums() {
        use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit;
        for u in [
            Unit::Second,
            Unit::Minute,
            Unit::Hour,
            Unit::Day,
            Unit::Week,
            Unit::Month,
            Unit::Year,
        ] {
            let wire = rate_limit::Unit::try_from(u as i32).unwrap();
            assert!(wire.as_str_name().eq_ignore_ascii_case(u.name()), "{u:?}");
            let conf = config::RateLimitUnit::try_from(u as i32).unwrap();
            assert!(conf.as_str_name().eq_ignore_ascii_case(u.name()), "{u:?}");
        }
    }
}
