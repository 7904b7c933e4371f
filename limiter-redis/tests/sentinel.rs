//! A limiter on a Redis Sentinel deployment (a master, a replica, three
//! `redis-sentinel`s, all started here) through a `redis+sentinel://` URL,
//! with a failover (`SENTINEL FAILOVER`) in the middle of a run that keeps
//! asking for permits faster than the quota allows. What is asserted:
//!
//! * no call returns an error: every answer is a grant or a denial (the
//!   failure policy, `Closed`, answers while the master changes);
//! * after the failover, grants come from the script again
//!   (`Source::Redis`), on the new master (the old replica), which holds the
//!   key, and the old master gets no more script calls once a second has
//!   passed since the sentinels named the new one (the limiter asks them
//!   every 250 ms; Sentinel demotes the old master only seconds later);
//! * the replica had the key's state before the failover;
//! * the GCRA bound over the whole run: grants ≤ burst + ⌈run / t⌉ + the
//!   grants made while the failover was under way (from the
//!   `SENTINEL FAILOVER` until that second is over), which the old master
//!   may have taken without the new one ever seeing them; the new master,
//!   holding the replicated state, admits no fresh burst.

use limiter_test_support::redis as support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use limiter_core::Quota;
use limiter_redis::{FailurePolicy, RedisEndpoint, RedisLimitError, RedisLimiter, Source};
use support::sentinel::{MASTER, RedisSentinels};

/// One answer of the run: when, and granted by which path (`None`: denied).
type Answer = (Instant, Option<Source>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_mid_run_keeps_deciding_within_the_bound() {
    let deployment = Arc::new(
        tokio::task::spawn_blocking(|| RedisSentinels::start(&[], None))
            .await
            .unwrap(),
    );
    let url = format!("redis+sentinel://{}/{MASTER}", deployment.sentinel_list());
    let conn = RedisEndpoint::parse(&url).unwrap().connect_lazy().unwrap();
    // t = 50 ms, burst 5.
    let quota = Quota::per_second(20).unwrap().with_burst(5).unwrap();
    let limiter = RedisLimiter::builder_with_connection(conn, quota)
        .key_prefix("sentinel")
        .failure_policy(FailurePolicy::Closed)
        .call_timeout(Duration::from_secs(1))
        .retry_interval(Duration::from_millis(100))
        .build()
        .unwrap();

    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let run = {
        let (limiter, answers, errors, stop) = (
            limiter.clone(),
            answers.clone(),
            errors.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            // Relaxed: a flag polled between calls; nothing else is ordered by it.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let answer = match limiter.try_acquire("k").await {
                    Ok(a) => Some(a.source),
                    Err(RedisLimitError::RateLimited { .. }) => None,
                    Err(e) => {
                        errors.lock().unwrap().push(e.to_string());
                        None
                    }
                };
                answers.lock().unwrap().push((Instant::now(), answer));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    tokio::time::sleep(Duration::from_secs(1)).await;
    let old_master = deployment.master.port();
    let new_master = deployment.replica.port();
    // The replica holds the key's state before the failover.
    let replicated = {
        let d = deployment.clone();
        tokio::task::spawn_blocking(move || {
            d.wait_for(Duration::from_secs(5), "the key on the replica", |d| {
                d.server_cmd(d.replica.port(), "EXISTS {sentinel:k}")
                    .starts_with(":1")
            });
        })
    };
    replicated.await.unwrap();
    let failover_sent = Instant::now();
    let switched = {
        let d = deployment.clone();
        tokio::task::spawn_blocking(move || {
            d.failover();
            d.wait_for(
                Duration::from_secs(30),
                "the sentinels to name the new master",
                |d| d.reported_master_port() == Some(new_master),
            );
            Instant::now()
        })
    };
    let switched = switched.await.unwrap() + Duration::from_secs(1);
    tokio::time::sleep_until(switched.into()).await;
    let old_master_calls = script_calls(&deployment, old_master);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Relaxed: see the loop.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    run.await.unwrap();
    assert_eq!(
        script_calls(&deployment, old_master),
        old_master_calls,
        "script calls on the old master after the switch"
    );

    let errors = errors.lock().unwrap().clone();
    assert!(
        errors.is_empty(),
        "errors past the failure policy: {errors:?}"
    );
    let answers = answers.lock().unwrap().clone();
    let (first, last) = (answers[0].0, answers[answers.len() - 1].0);
    let granted = answers.iter().filter(|(_, a)| a.is_some()).count() as u64;
    let during_failover = answers
        .iter()
        .filter(|(at, a)| a.is_some() && *at >= failover_sent && *at <= switched)
        .count() as u64;
    let after: Vec<&Answer> = answers.iter().filter(|(at, _)| *at > switched).collect();
    assert!(
        after.iter().any(|(_, a)| *a == Some(Source::Redis)),
        "no grant by the script after the failover: {after:?}"
    );
    assert!(
        deployment
            .server_cmd(new_master, "EXISTS {sentinel:k}")
            .starts_with(":1"),
        "the new master does not hold the key"
    );
    assert!(
        deployment
            .info(new_master, "replication")
            .contains("role:master")
    );
    assert!(script_calls(&deployment, new_master) > 0);
    let run_ms = (last - first).as_millis() as u64;
    let bound = 5 + run_ms.div_ceil(50) + during_failover;
    assert!(
        granted <= bound,
        "{granted} grants over {run_ms} ms: more than burst 5 + {} + {during_failover} granted during the failover",
        run_ms.div_ceil(50)
    );
    // The run was at the limit throughout: most of the rate was granted.
    assert!(
        granted * 2 >= run_ms / 50,
        "{granted} grants over {run_ms} ms"
    );
    eprintln!(
        "sentinel failover: {granted} grants over {run_ms} ms (bound {bound}), {during_failover} during the failover, which took {:?}",
        switched - failover_sent
    );
}

/// The `EVALSHA` and `EVAL` calls the server on `port` has served.
fn script_calls(deployment: &RedisSentinels, port: u16) -> u64 {
    let stats = deployment.info(port, "commandstats");
    ["cmdstat_evalsha:calls=", "cmdstat_eval:calls="]
        .iter()
        .filter_map(|prefix| {
            let line = stats.lines().find(|l| l.starts_with(prefix))?;
            line[prefix.len()..].split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}
