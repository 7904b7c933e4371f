//! The dashboard in a real browser: the real gateway under traffic from
//! three client addresses, its admin listener serving the page, headless
//! Chromium (Debian's `chromium`) rendering it, and the rendered numbers
//! compared with `/metrics`; the top keys are the ones the gateway's own
//! limiting path recorded. Takes a screenshot too; with
//! `DASHBOARD_SCREENSHOT=$PWD/docs/img/dashboard.png` it refreshes the one in
//! docs/gateway.md and docs/operations.md (a plain run changes no tracked file).

mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use limiter_gateway::echo::Echo;
use limiter_test_support::chromium::chromium;
use support::{Rig, TempDir, sample};
use tokio::net::TcpSocket;

const RULES: &str = "\
rate_limits:
  per_client:
    algorithm: token_bucket
    rate: 1/h
    burst: 5
    key: ip
    match: { prefix: \"/api\" }
";

/// One GET from the source address `from` (loopback), its status.
async fn get_from(from: IpAddr, to: SocketAddr, path: &str) -> StatusCode {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let stream = socket.connect(to).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = Request::get(path)
        .header("host", to.to_string())
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    response.status()
}

/// The text of the first element after `from` carrying `data-field="field"`.
fn field<'a>(dom: &'a str, from: &str, field: &str) -> &'a str {
    let at = dom
        .find(from)
        .unwrap_or_else(|| panic!("{from} in the DOM"));
    let rest = &dom[at..];
    let marker = format!("data-field=\"{field}\"");
    let start = rest.find(&marker).unwrap_or_else(|| panic!("{marker}")) + marker.len();
    let rest = &rest[start..];
    let open = rest.find('>').unwrap() + 1;
    let close = rest[open..].find('<').unwrap();
    &rest[open..open + close]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_renders_what_metrics_says() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    let page = rig.running.admin_addr().unwrap();

    // Three clients: 127.0.0.2 stays within its burst, .3 and .4 exceed it.
    let clients: [(IpAddr, usize); 3] = [
        ("127.0.0.2".parse().unwrap(), 4), // in the first round only
        ("127.0.0.3".parse().unwrap(), 2), // per round
        ("127.0.0.4".parse().unwrap(), 6), // per round
    ];
    let mut rejected_by = std::collections::BTreeMap::<IpAddr, u64>::new();
    for round in 0..6 {
        for (i, &(ip, n)) in clients.iter().enumerate() {
            let n = if i == 0 && round > 0 { 0 } else { n };
            for _ in 0..n {
                match get_from(ip, rig.addr(), "/api/orders").await {
                    StatusCode::OK => {}
                    StatusCode::TOO_MANY_REQUESTS => {
                        *rejected_by.entry(ip).or_default() += 1;
                    }
                    other => panic!("unexpected {other}"),
                }
            }
        }
    }

    // The gateway's sampler takes one sample a second of real time, and the
    // chart draws its rates between consecutive samples: on a fast machine
    // the traffic above ends before the first one. Poll the page's own JSON
    // until the rule has two (bounded: the test fails, not hangs).
    wait_for_samples(&rig, "per_client", 2).await;

    let dir = TempDir::new();
    let url = format!("http://{page}/");
    let dom = chromium(
        &dir.path().join("profile-dom"),
        &["--virtual-time-budget=3000".into(), "--dump-dom".into()],
        &url,
    )
    .await;
    assert!(
        dom.contains("data-ready=\"true\""),
        "the page rendered:\n{dom}"
    );

    let metrics = rig.admin("/metrics").await;
    let rule = "data-rule=\"per_client\"";
    for (name, shown) in [
        ("allowed", "allowed"),
        ("rejected", "rejected"),
        ("delayed", "delayed"),
    ] {
        let expected = sample(
            &metrics,
            &format!("rate_limit_{name}_total{{limiter=\"per_client\"}}"),
        );
        assert_eq!(
            field(&dom, rule, shown).parse::<f64>().unwrap(),
            expected,
            "{name} on the page and in /metrics"
        );
    }
    let rejected = sample(
        &metrics,
        "rate_limit_rejected_total{limiter=\"per_client\"}",
    );
    assert!(rejected > 0.0, "the traffic exceeded the limit");
    assert!(
        field(&dom, rule, "limit").contains('5'),
        "the limit is shown"
    );
    // The chart has one polyline per series, one point per sample of the
    // gateway's sampler (one a second: how many depends on the run).
    assert_eq!(dom.matches("data-series=").count(), 4);
    let points = field_attr(&dom, "data-series=\"allowed\"", "points");
    assert!(!points.is_empty(), "the allowed series is drawn");
    // Keys in use: the three clients.
    assert_eq!(field(&dom, rule, "keys"), "3");
    // Top keys: the heaviest offender first, with its exact count.
    let top = &dom[dom.find("data-field=\"top\"").expect("the top-keys table")..];
    let heaviest = top.find("127.0.0.4").expect("127.0.0.4 listed");
    if let Some(lighter) = top.find("127.0.0.3") {
        assert!(heaviest < lighter, "sorted by rejections");
    }
    let total_recorded: u64 = dashboard_total(&dom);
    assert_eq!(
        total_recorded as f64, rejected,
        "every rejection recorded once"
    );
    for (ip, n) in &rejected_by {
        let row = &top[top.find(&format!("data-key=\"{ip}\"")).expect("listed")..];
        assert_eq!(field(row, "<", "count"), n.to_string(), "{ip}'s count");
    }
    assert!(
        !top.contains("127.0.0.2"),
        "a client within its limit is not listed"
    );

    // The screenshot: into the test's own directory, or where
    // DASHBOARD_SCREENSHOT says (docs/img/dashboard.png to refresh the docs').
    let png = std::env::var_os("DASHBOARD_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("dashboard.png"));
    chromium(
        &dir.path().join("profile-shot"),
        &[
            "--virtual-time-budget=3000".into(),
            "--window-size=1200,640".into(),
            format!("--screenshot={}", png.display()),
        ],
        &url,
    )
    .await;
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    rig.running.shutdown().await;
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
}

/// Polls `/dashboard.json` until `rule` has at least `n` samples; fails
/// the test after 30 s.
async fn wait_for_samples(rig: &Rig, rule: &str, n: usize) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let json = rig.admin("/dashboard.json").await;
        if samples_of(&json, rule) >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "the sampler took {n} samples of `{rule}` within 30 s: {json}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many samples `/dashboard.json` holds for `rule` (each `[t, …]`).
fn samples_of(json: &str, rule: &str) -> usize {
    let Some(at) = json.find(&format!("{{\"name\":\"{rule}\"")) else {
        return 0;
    };
    let rest = &json[at..];
    let start = rest.find("\"samples\":[").expect("the samples") + "\"samples\":[".len();
    let end = start
        + rest[start..]
            .find("],\"top\"")
            .expect("the end of the samples");
    rest[start..end].matches('[').count()
}

/// The value of the attribute `attr` of the element whose tag holds `at`.
fn field_attr<'a>(dom: &'a str, at: &str, attr: &str) -> &'a str {
    let tag_start = dom[..dom.find(at).expect("the element")]
        .rfind('<')
        .unwrap();
    let tag = &dom[tag_start..];
    let tag = &tag[..tag.find('>').unwrap()];
    let marker = format!("{attr}=\"");
    let start = tag.find(&marker).expect("the attribute") + marker.len();
    &tag[start..start + tag[start..].find('"').unwrap()]
}

/// The sum of the `count` cells of the top-keys table.
fn dashboard_total(dom: &str) -> u64 {
    dom.split("data-field=\"count\">")
        .skip(1)
        .map(|s| s[..s.find('<').unwrap()].parse::<u64>().unwrap())
        .sum()
}
