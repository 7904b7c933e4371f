//! The admin API's per-key quotas: `/rules/{rule}/keys/{key}`.
//!
//! * `GET`: the key's quota in force, where it comes from (`admin`, `file`
//!   or `rule`) and the permits it could take now; consumes nothing.
//! * `PUT` with a JSON quota, `{"rate": "100/s", "burst": 20}` (the fields
//!   of a rule and of the rules file's `overrides:`, checked by the same
//!   code, every problem at its line and column): the key's quota from now
//!   on, keeping its fill level in permits, kept across reloads of the file
//!   until `DELETE`.
//! * `DELETE`: the key goes back to the file's override, if any, else to
//!   the rule's quota.
//!
//! `{key}` is the key's text as `/explain` shows it (the encoded key, as
//! `/rules/{rule}/penalties/{key}` takes it too), written as a path segment
//! (`/` as `%2F`, `%` as `%25`): an operator copies it from one answer into
//! the next call. For a one-part key (`ip`, `header:NAME`) that text is the
//! value with its special bytes escaped (`2001%3Adb8%3A%3A` for
//! `2001:db8::`); [`table_text`] turns it into the value the rule set's
//! per-key calls take. Mutating calls are authorized by the admin listener
//! before they get here.
//!
//! Answers: `200` with the key's quota as JSON; problem documents for a
//! rule not in force (`404`), a rule without per-key quotas (`409`), the cap
//! on overrides (`409`), a `DELETE` of a key with no admin-set quota
//! (`404`), a body that is not a quota or a key that is not an encoded key
//! text (`400`), and another method (`405`).

use std::borrow::Cow;

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use limiter_config::{KeyQuota, OverrideRefusal, RuleSet, check_quota_str};
use limiter_tower::key_encoding::KeyWriter;

use crate::admin_http::{json_escape, percent_decode, problem, read_body};

/// The text the rule set's per-key calls take for `key`, the key text as
/// `/explain` shows it: for a rule whose key has one part, the value that
/// encodes to it; for one of several parts (or a rule not in force, which
/// the call refuses), the text itself.
///
/// # Errors
///
/// A one-part key text that the key encoding never writes (a raw `:`, a
/// lower-case or broken escape, bytes that are not UTF-8 once decoded):
/// the detail of the `400`.
fn table_text<'k>(rules: &RuleSet, rule: &str, key: &'k str) -> Result<Cow<'k, str>, String> {
    let one_part = rules
        .get(rule)
        .is_some_and(|r| r.spec().key.parts.len() == 1);
    if !one_part {
        return Ok(Cow::Borrowed(key));
    }
    let value = percent_decode(key);
    let mut written = String::with_capacity(key.len());
    KeyWriter::new(&mut written).part_str(&value);
    if written == key {
        Ok(value)
    } else {
        Err(format!(
            "`{key}` is not a key as /explain shows it (this rule's key would be written `{written}`); copy the key from /explain and write `%` as `%25` in the path"
        ))
    }
}

/// Answers a call on `/rules/{rule}/keys/{key}`.
pub(crate) async fn answer<B>(
    rules: &RuleSet,
    method: &Method,
    rule: &str,
    key: &str,
    body: B,
) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let value = match table_text(rules, rule, key) {
        Ok(value) => value,
        Err(detail) => return problem(StatusCode::BAD_REQUEST, &detail),
    };
    let result = match *method {
        Method::GET | Method::HEAD => rules.key_quota(rule, &value),
        Method::DELETE => rules.remove_key_quota(rule, &value),
        Method::PUT => {
            let bytes = match read_body(body).await {
                Ok(b) => b,
                Err(response) => return response,
            };
            let Ok(text) = std::str::from_utf8(&bytes) else {
                return problem(StatusCode::BAD_REQUEST, "the body is not UTF-8 JSON");
            };
            match check_quota_str("body".as_ref(), text) {
                Ok((_, quota)) => rules.set_key_quota(rule, &value, quota),
                Err(errors) => {
                    let detail = errors.to_string().lines().collect::<Vec<_>>().join("; ");
                    return problem(StatusCode::BAD_REQUEST, &detail);
                }
            }
        }
        _ => {
            let mut response = problem(
                StatusCode::METHOD_NOT_ALLOWED,
                "a key's quota takes GET, PUT (a JSON quota) and DELETE",
            );
            response.headers_mut().insert(
                http::header::ALLOW,
                HeaderValue::from_static("GET, HEAD, PUT, DELETE"),
            );
            return response;
        }
    };
    match result {
        Ok(k) => {
            let mut response = Response::new(Full::new(Bytes::from(key_json(rule, key, &k))));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(refusal) => {
            let status = match refusal {
                OverrideRefusal::UnknownRule { .. } | OverrideRefusal::NoOverride => {
                    StatusCode::NOT_FOUND
                }
                _ => StatusCode::CONFLICT,
            };
            problem(status, &refusal.to_string())
        }
    }
}

/// `{"rule", "key", "rate", "burst", "period_ns", "source", "available"}`;
/// `rate` in permits per second.
fn key_json(rule: &str, key: &str, k: &KeyQuota) -> String {
    let t = k.quota.period_nanos();
    format!(
        "{{\"rule\":\"{}\",\"key\":\"{}\",\"rate\":{},\"burst\":{},\"period_ns\":{t},\"source\":\"{}\",\"available\":{}}}",
        json_escape(rule),
        json_escape(key),
        1e9 / t as f64,
        k.quota.burst(),
        k.source.as_str(),
        k.available
    )
}
