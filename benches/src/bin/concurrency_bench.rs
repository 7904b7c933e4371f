//! Acquire + release: limiter-concurrency beside tokio's semaphore and a
//! mutex counter, at 1 and 2 threads, in one run (see
//! `limiter_benches::concurrency_bench`).
//!
//! ```text
//! cargo run --release -p limiter-benches --bin concurrency_bench [iters]
//! ```

use limiter_benches::concurrency_bench::{NAMES, round};

fn main() {
    let iters = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000u64);
    const ROUNDS: usize = 7;
    for threads in [1usize, 2] {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); NAMES.len()];
        for _ in 0..ROUNDS {
            for (i, t) in round(threads, iters).into_iter().enumerate() {
                times[i].push(t);
            }
        }
        let medians: Vec<f64> = times
            .iter_mut()
            .map(|t| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            })
            .collect();
        println!(
            "threads={threads}: median of {ROUNDS} rounds of {iters} acquire+release per thread"
        );
        println!("| subject | ns per acquire+release | vs tokio Semaphore |");
        println!("|---|---:|---:|");
        for (i, name) in NAMES.iter().enumerate() {
            println!(
                "| {name} | {:.2} | {:.2}× |",
                medians[i],
                medians[i] / medians[1]
            );
        }
        println!(
            "concurrency bench threads={threads} ours_ns={:.2} tokio_semaphore_ns={:.2} mutex_ns={:.2} ratio_vs_tokio={:.2}",
            medians[0],
            medians[1],
            medians[2],
            medians[0] / medians[1]
        );
    }
}
