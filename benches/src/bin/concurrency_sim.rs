//! The concurrency simulator's table: every estimator, two fixed limits and
//! limiter-core's rate-adapting `AdaptiveLimiter` through the same
//! capacity schedule, on virtual time (see `limiter_benches::concurrency_sim`).
//!
//! ```text
//! cargo run --release -p limiter-benches --bin concurrency_sim [seed]
//! ```
//!
//! Prints what the columns compare, a markdown table and the summary line
//! of the default estimator (Gradient2). `concurrency_sim <seed> trace` prints its limit over time.

use std::time::Duration;

use limiter_benches::concurrency_sim::{Concurrency, Rate, Report, SCHEDULE, Subject, run};
use limiter_concurrency::{Aimd, Bounds, ConcurrencyLimiter, DriftGuard, Gradient2, Vegas};
use limiter_core::adaptive::EwmaAimd;

fn adaptive(e: impl limiter_concurrency::Estimator + 'static) -> Box<dyn Subject> {
    Box::new(Concurrency(
        ConcurrencyLimiter::adaptive(e).build().expect("valid"),
    ))
}

fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let bounds = Bounds::new(16, 1, 1_000).expect("valid bounds");
    let subjects: Vec<(&str, Box<dyn Subject>)> = vec![
        (
            "fixed limit 32",
            Box::new(Concurrency(ConcurrencyLimiter::new(32).expect("valid"))),
        ),
        (
            "fixed limit 128",
            Box::new(Concurrency(ConcurrencyLimiter::new(128).expect("valid"))),
        ),
        (
            "AIMD (loss: > 50 ms)",
            adaptive(Aimd::new(bounds).timeout(Duration::from_millis(50))),
        ),
        ("Vegas", adaptive(Vegas::new(bounds))),
        (
            "Vegas + drift guard",
            adaptive(DriftGuard::new(Vegas::new(bounds))),
        ),
        ("Gradient2 (default)", adaptive(Gradient2::new(bounds))),
        (
            "Gradient2 + drift guard",
            adaptive(DriftGuard::new(Gradient2::new(bounds))),
        ),
        (
            "AdaptiveLimiter (rate, EWMA target 20 ms)",
            Box::new(Rate::new(
                EwmaAimd::new(Duration::from_millis(20)).interval(Duration::from_millis(100)),
                100.0,
                10_000.0,
            )),
        ),
    ];
    if std::env::args().nth(2).as_deref() == Some("trace") {
        let bounds = Bounds::new(16, 1, 1_000).expect("valid bounds");
        let mut s = Concurrency(
            ConcurrencyLimiter::adaptive(Gradient2::new(bounds))
                .build()
                .expect("valid"),
        );
        for (t, c) in limiter_benches::concurrency_sim::trace(&mut s, seed, 25) {
            println!("{t:.2} {c:.0}");
        }
        return;
    }
    println!("schedule: {SCHEDULE:?}");
    println!(
        "unloaded p99 = the p99 of the service time alone (no queue), 2.80 x its mean; p50 and p99 = steady-state latency, arrival to completion, over it, worst phase"
    );
    println!(
        "oscillation = deviation of the 10 ms samples of the limit from the converged limit (the steady state's median), 95th percentile / largest, worst phase; the summary line gives the largest"
    );
    println!(
        "| subject | goodput % of capacity | p50 / unloaded p99 | p99 / unloaded p99 | converge s (per change) | oscillation % p95 / max | settled (per phase) | rejected | timed out |"
    );
    println!("|---|---:|---:|---:|---|---:|---|---:|---:|");
    let mut default = None;
    for (name, mut s) in subjects {
        let r = run(s.as_mut(), seed);
        let fixed = name.starts_with("fixed");
        println!(
            "| {name} | {:.1} | {:.2} | {:.2} | {} | {} | {} | {} | {} |",
            r.goodput_pct,
            r.p50_vs_unloaded,
            r.p99_vs_unloaded,
            if fixed {
                "—".to_string()
            } else {
                list(&r.converge_s, 1)
            },
            if fixed {
                "—".to_string()
            } else {
                format!("{:.1} / {:.1}", r.oscillation_pct, r.max_deviation_pct)
            },
            list(&r.settled, 0),
            r.rejected,
            r.timed_out,
        );
        if name.ends_with("(default)") {
            default = Some(r);
        }
    }
    let r: Report = default.expect("the default estimator ran");
    println!("{}", r.summary());
}

fn list(v: &[f64], decimals: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.decimals$}"))
        .collect::<Vec<_>>()
        .join(" / ")
}
