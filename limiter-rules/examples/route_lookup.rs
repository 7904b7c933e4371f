//! Instructions per route lookup, for callgrind: `route_lookup RULES
//! LOOKUPS` builds a table of RULES routed rules (templates, rest templates
//! and prefixes) and looks up the last rule's path LOOKUPS times. Run it
//! with LOOKUPS 0 and N under `valgrind --tool=callgrind`; the difference
//! over N is the cost of one lookup.

use std::hint::black_box;

use http::Method;
use limiter_rules::{MatchSpec, Matcher, PathMatch, RouteTable};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap_or(0));
    let (rules, lookups) = (args.next().unwrap_or(3).max(1), args.next().unwrap_or(0));
    let table: RouteTable<usize> = (0..rules)
        .map(|i| {
            let path = match i % 3 {
                0 => PathMatch::Route(format!("/svc{i}/orders/{{id}}")),
                1 => PathMatch::Route(format!("/svc{i}/files/{{*rest}}")),
                _ => PathMatch::Prefix(format!("/svc{i}/api")),
            };
            let spec = MatchSpec {
                path,
                methods: vec![Method::GET],
            };
            (Matcher::new(&spec).expect("valid"), i)
        })
        .collect();
    let path = format!("/svc{}/orders/42", (rules - 1) / 3 * 3);
    let mut found = 0;
    for _ in 0..lookups {
        found += usize::from(
            table
                .get(black_box(&Method::GET), black_box(&path))
                .is_some(),
        );
    }
    assert_eq!(found, lookups);
}
