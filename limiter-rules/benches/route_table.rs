//! Route lookup with 3 and with 1,000 routed rules: the route table's cost
//! follows the path, not the number of rules. A linear scan of the same
//! matchers (most specific first) runs beside it for comparison.

// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use http::Method;
use limiter_rules::{MatchSpec, Matcher, PathMatch, RouteTable};

fn matchers(n: usize) -> Vec<Matcher> {
    (0..n)
        .map(|i| {
            let path = match i % 3 {
                0 => PathMatch::Route(format!("/svc{i}/orders/{{id}}")),
                1 => PathMatch::Route(format!("/svc{i}/files/{{*rest}}")),
                _ => PathMatch::Prefix(format!("/svc{i}/api")),
            };
            Matcher::new(&MatchSpec {
                path,
                methods: vec![Method::GET],
            })
            .expect("valid")
        })
        .collect()
}

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_lookup");
    for n in [3usize, 1000] {
        let ms = matchers(n);
        let table: RouteTable<usize> = ms.iter().cloned().zip(0..).collect();
        // The last rule's route: what a scan finds last.
        let path = format!("/svc{}/orders/42", (n - 1) / 3 * 3);
        group.bench_function(format!("table_{n}"), |b| {
            b.iter(|| table.get(black_box(&Method::GET), black_box(&path)))
        });
        group.bench_function(format!("scan_{n}"), |b| {
            b.iter(|| {
                ms.iter()
                    .position(|m| m.matches(black_box(&Method::GET), black_box(&path)))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, lookup);
criterion_main!(benches);
