//! Measures the resident memory per key of a keyed rule (`per_ip: true`,
//! 100,000 limited client addresses), from the process's resident set
//! (Linux `/proc/self/statm`), as limiter-keyed's `memory_per_key` example
//! does for a bare `KeyedLimiter<u64>`. The keys are the ones the HTTP
//! layer writes for `key: ip`: IPv4 addresses as text, or IPv6 `/64`s
//! percent-encoded (`v6`).
//!
//! Run: `cargo run --release -p limiter-config --example rules_memory_per_key [v4|v6]`

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use limiter_config::{RuleLimiter, RuleSet};
use limiter_core::ManualClock;

const KEYS: u32 = 100_000;

/// Resident bytes, or 0 where `/proc/self/statm` does not exist.
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "v4".into());
    let dir = std::env::temp_dir().join(format!("limiter-config-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("rules.yaml");
    std::fs::write(
        &path,
        format!(
            "rate_limits:\n  per_client:\n    algorithm: token_bucket\n    rate: \"1/h\"\n    burst: 1\n    per_ip: true\n    max_keys: {KEYS}\n"
        ),
    )?;
    let rules = RuleSet::load_with_clock(&path, ManualClock::new())?;
    std::fs::remove_dir_all(&dir)?;
    let rule = rules.get("per_client").ok_or("the rule is in the file")?;
    let keys = rule.keyed().ok_or("a keyed rule")?;
    // The address texts are made before measuring: only the table counts.
    let addresses: Vec<String> = (0..KEYS)
        .map(|i| match which.as_str() {
            "v6" => IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                (i >> 16) as u16,
                i as u16,
                0,
                0,
                0,
                0,
            )),
            _ => IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)),
        })
        .map(|ip| ip.to_string())
        .collect();
    let before = resident();
    for a in &addresses {
        keys.try_acquire(&RuleLimiter::<ManualClock>::key(a))?;
    }
    let after = resident();
    assert_eq!(keys.len(), KEYS as usize);
    println!(
        "keyed rule ({which} keys such as {:?}): {} bytes per key ({} keys, {} KB resident growth)",
        RuleLimiter::<ManualClock>::key(&addresses[KEYS as usize - 1]),
        (after - before) / u64::from(KEYS),
        KEYS,
        (after - before) >> 10
    );
    Ok(())
}
