//! `/explain` decides on what the listener decides on: for each of 31
//! spellings of a path (escapes in either case, dot segments, repeated
//! slashes, encoded slashes, parameters, bad escapes, a bad `Host`),
//! explain's rule, decision and permits left are compared with the
//! listener's answer to the same request sent right after: its status, its
//! `RateLimit-Policy` rule and its `RateLimit` `r`. Explain consumes
//! nothing and the listener takes one permit per admitted request, so the
//! permits left also check that explain's `remaining` is what the admitted
//! request's `r` says.

use crate::support;

use limiter_gateway::echo::Echo;
use support::{Rig, header, raw, rule, status};

const RULES: &str = "\
rate_limits:
  orders:
    algorithm: token_bucket
    rate: 1/h
    burst: 1000
    key: header:x-user
    match: { route: \"/orders/{id}\" }
  pay:
    algorithm: token_bucket
    rate: 1/h
    burst: 1000
    match: { prefix: \"/pay\" }
";

/// Request targets, each with the `Host` it is sent with.
const SPELLINGS: [(&str, &str); 31] = [
    ("/orders/7", "t"),
    ("/%6Frders/7", "t"),
    ("/%6frders/7", "t"),
    ("/x/../orders/7", "t"),
    ("//orders/7", "t"),
    ("/orders/./7", "t"),
    ("/orders//7", "t"),
    ("/./orders/7", "t"),
    ("/orders/7/", "t"),
    ("/ORDERS/7", "t"),
    ("/%2Forders/7", "t"),
    ("/orders%2F7", "t"),
    ("/orders%2f7", "t"),
    ("/%2e/orders/7", "t"),
    ("/%2E%2E/orders/7", "t"),
    ("/orders/7;v=1", "t"),
    ("/orders;x=1/7", "t"),
    ("/orders/%37", "t"),
    ("/orders/7?x=1", "t"),
    ("/orders/7%3b", "t"),
    ("/../../orders/7", "t"),
    ("/orders/x/%2E%2E/7", "t"),
    ("/pay/x", "t"),
    ("/%70ay/x", "t"),
    ("/%70AY/x", "t"),
    ("/pay/..;/orders/7", "t"),
    ("/orders/7/../../pay/x", "t"),
    ("/%zz/orders/7", "t"),
    ("/orders/%4", "t"),
    ("/orders/7", "exa%20mple.com"),
    ("/orders/7", "example.com:99999x"),
];

/// `s` as a query parameter's value (explain decodes it once).
fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'%' | b'&' | b'+' | b'#' | b'?' | b' ' => format!("%{b:02X}"),
            b => char::from(b).to_string(),
        })
        .collect()
}

/// The JSON member `name`'s raw value in `json` (a number, a quoted string
/// or `null`), for the flat members explain writes.
fn member<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{name}\":"))? + name.len() + 3;
    let rest = &json[start..];
    let end = if let Some(quoted) = rest.strip_prefix('"') {
        quoted.find('"')? + 2
    } else {
        rest.find([',', '}'])?
    };
    Some(&rest[..end])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_decides_every_spelling_as_the_listener_does() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    for (target, host) in SPELLINGS {
        let host = host.replace("%20", " ");
        let json = rig
            .admin(&format!(
                "/explain?path={}&header=x-user:7&header=host:{}",
                query_value(target),
                query_value(&host)
            ))
            .await;
        let response = raw(
            rig.addr(),
            &format!(
                "GET {target} HTTP/1.1\r\nHost: {host}\r\nx-user: 7\r\nConnection: close\r\n\r\n"
            ),
        )
        .await;
        let what = format!("{target} (Host {host}): explain {json}, listener {response}");
        let explained_rule = member(&json, "rule").unwrap();
        let listener_rule = rule(&response).map_or("null".to_owned(), |r| format!("\"{r}\""));
        match member(&json, "decision").unwrap() {
            "\"admitted\"" => {
                assert_eq!(status(&response), "HTTP/1.1 200", "{what}");
                assert_eq!(explained_rule, listener_rule, "{what}");
                let r = header(&response, "ratelimit")
                    .and_then(|v| v.split(";r=").nth(1))
                    .and_then(|v| v.split(';').next());
                assert_eq!(member(&json, "remaining"), r, "{what}");
            }
            "\"unlimited\"" => {
                assert_eq!(status(&response), "HTTP/1.1 200", "{what}");
                assert_eq!(listener_rule, "null", "{what}");
            }
            "\"client_error\"" => {
                let code = member(&json, "status").unwrap();
                assert_eq!(status(&response), format!("HTTP/1.1 {code}"), "{what}");
                assert!(response.contains("application/problem+json"), "{what}");
            }
            other => panic!("unexpected decision {other}: {what}"),
        }
    }
    // The spellings reach both rules, no rule, and the refusals.
    let decide = async |target: &str| {
        let json = rig
            .admin(&format!(
                "/explain?path={}&header=x-user:7",
                query_value(target)
            ))
            .await;
        (
            member(&json, "rule").unwrap().to_owned(),
            member(&json, "decision").unwrap().to_owned(),
        )
    };
    assert_eq!(decide("/%6Frders/7").await.0, "\"orders\"");
    assert_eq!(decide("/x/../orders/7").await.0, "\"orders\"");
    assert_eq!(decide("/%70ay/x").await.0, "\"pay\"");
    assert_eq!(decide("/ORDERS/7").await.1, "\"unlimited\"");
    assert_eq!(decide("/%zz/orders/7").await.1, "\"client_error\"");
}
