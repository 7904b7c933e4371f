//! [`RouteTable`]: matches by the segments of their paths, so that finding
//! the most specific match for a request does not try every match.
//!
//! The table is a tree with one edge per literal segment and one `{param}`
//! edge per node. A template's entry sits at the node its segments lead to
//! (in `rest` for a template ending in `{*rest}`, which needs one more
//! segment at least); a prefix's entry at the node its literal segments
//! lead to. A lookup walks the request path's segments from the root,
//! following the literal edge and the `{param}` edge of each node (both can
//! match), and keeps the candidate of highest precedence (see `routes`)
//! whose methods admit the request; ties go to the entry inserted first.
//! The work is one hash lookup per segment and branch, independent of how
//! many entries the table holds; nothing is allocated.

use std::collections::HashMap;

use http::Method;

use crate::routes::{Compiled, Matcher, Segment, Segments, split};

/// Values (rules, upstreams) by their [`Matcher`]: the value of the most
/// specific match of a request, found without trying every match.
///
/// # Examples
///
/// ```
/// use http::Method;
/// use limiter_rules::{MatchSpec, Matcher, PathMatch, RouteTable};
///
/// let m = |path: PathMatch, methods: Vec<Method>| Matcher::new(&MatchSpec { path, methods }).unwrap();
/// let mut table = RouteTable::new();
/// table.insert(m(PathMatch::Prefix("/api".into()), vec![]), "api");
/// table.insert(m(PathMatch::Route("/api/orders/{id}".into()), vec![Method::GET]), "read");
/// table.insert(m(PathMatch::Prefix("/".into()), vec![]), "default");
/// assert_eq!(table.get(&Method::GET, "/api/orders/7"), Some(&"read"));
/// assert_eq!(table.get(&Method::POST, "/api/orders/7"), Some(&"api"));
/// assert_eq!(table.get(&Method::GET, "/apix"), Some(&"default"));
/// ```
#[derive(Debug, Clone)]
pub struct RouteTable<T> {
    root: Node,
    entries: Vec<(Matcher, T)>,
}

#[derive(Debug, Clone, Default)]
struct Node {
    literals: HashMap<Box<str>, Node>,
    param: Option<Box<Node>>,
    /// Templates ending at this node.
    exact: Vec<usize>,
    /// Templates ending in `{*rest}` after this node.
    rest: Vec<usize>,
    /// Prefixes ending at this node.
    prefix: Vec<usize>,
}

impl<T> Default for RouteTable<T> {
    fn default() -> Self {
        RouteTable {
            root: Node::default(),
            entries: Vec::new(),
        }
    }
}

impl<T> RouteTable<T> {
    /// An empty table.
    pub fn new() -> RouteTable<T> {
        RouteTable::default()
    }

    /// Adds `value` under `matcher`. Of two entries at the same precedence
    /// that both match a request (ambiguous, see
    /// [`Matcher::ambiguous_with`]), the one inserted first is found.
    pub fn insert(&mut self, matcher: Matcher, value: T) {
        let index = self.entries.len();
        let mut node = &mut self.root;
        match &matcher.path {
            Compiled::Route(_, segments) => {
                for segment in segments {
                    node = match segment {
                        Segment::Literal(l) => node.literals.entry(l.as_str().into()).or_default(),
                        Segment::Param => node.param.get_or_insert_default(),
                        Segment::Rest => {
                            node.rest.push(index);
                            break;
                        }
                    };
                }
                if !segments.contains(&Segment::Rest) {
                    node.exact.push(index);
                }
            }
            Compiled::Prefix(segments) => {
                for l in segments {
                    node = node.literals.entry(l.as_str().into()).or_default();
                }
                node.prefix.push(index);
            }
        }
        self.entries.push((matcher, value));
    }

    /// The value of the most specific entry matching a request for `path`
    /// with `method`, if any.
    pub fn get(&self, method: &Method, path: &str) -> Option<&T> {
        self.find(method, path).map(|(_, value)| value)
    }

    /// The most specific entry matching a request for `path` with
    /// `method`, with its matcher.
    pub fn find(&self, method: &Method, path: &str) -> Option<(&Matcher, &T)> {
        let mut best = None;
        self.visit(&self.root, split(path), method, &mut best);
        best.map(|i| {
            let (m, v) = &self.entries[i];
            (m, v)
        })
    }

    fn visit(
        &self,
        node: &Node,
        segments: Segments<'_>,
        method: &Method,
        best: &mut Option<usize>,
    ) {
        self.consider(&node.prefix, method, best);
        let mut rest = segments;
        match rest.next() {
            None => self.consider(&node.exact, method, best),
            Some(segment) => {
                self.consider(&node.rest, method, best);
                if let Some(child) = node.literals.get(segment) {
                    self.visit(child, rest.clone(), method, best);
                }
                if let Some(child) = &node.param {
                    self.visit(child, rest, method, best);
                }
            }
        }
    }

    fn consider(&self, candidates: &[usize], method: &Method, best: &mut Option<usize>) {
        for &i in candidates {
            let matcher = &self.entries[i].0;
            if !matcher.has_method(method) {
                continue;
            }
            let better = match *best {
                None => true,
                Some(b) => {
                    let held = self.entries[b].0.precedence();
                    matcher.precedence() > held || (matcher.precedence() == held && i < b)
                }
            };
            if better {
                *best = Some(i);
            }
        }
    }

    /// The entries, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&Matcher, &T)> {
        self.entries.iter().map(|(m, v)| (m, v))
    }

    /// How many entries the table holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<T> FromIterator<(Matcher, T)> for RouteTable<T> {
    fn from_iter<I: IntoIterator<Item = (Matcher, T)>>(iter: I) -> RouteTable<T> {
        let mut table = RouteTable::new();
        for (m, v) in iter {
            table.insert(m, v);
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{MatchSpec, PathMatch};

    fn m(path: PathMatch, methods: &[Method]) -> Matcher {
        Matcher::new(&MatchSpec {
            path,
            methods: methods.to_vec(),
        })
        .unwrap()
    }
    fn route(r: &str) -> PathMatch {
        PathMatch::Route(r.into())
    }
    fn prefix(p: &str) -> PathMatch {
        PathMatch::Prefix(p.into())
    }

    /// The table finds what a scan of every matcher, most specific first,
    /// finds: the model it must agree with.
    #[test]
    fn agrees_with_a_scan_in_precedence_order() {
        let get = [Method::GET];
        let matchers = vec![
            m(route("/orders/{id}"), &get),
            m(route("/orders/{id}"), &[Method::POST]),
            m(route("/orders/new"), &[]),
            m(route("/orders/{id}/items/{item}"), &[]),
            m(route("/orders/{*rest}"), &[]),
            m(route("/{a}/{b}"), &[]),
            m(route("/files/{*path}"), &get),
            m(route("/"), &[]),
            m(prefix("/orders"), &[]),
            m(prefix("/api/v1"), &[]),
            m(prefix("/api"), &get),
            m(prefix("/api"), &[]),
            m(prefix("/"), &[Method::DELETE]),
        ];
        let table: RouteTable<usize> = matchers.iter().cloned().zip(0..).collect();
        let mut sorted: Vec<(usize, &Matcher)> = matchers.iter().enumerate().collect();
        sorted.sort_by_key(|(i, m)| (std::cmp::Reverse(m.precedence()), *i));
        let paths = [
            "/",
            "//",
            "/orders",
            "/orders/7",
            "/orders/new",
            "/orders/7/items/3",
            "/orders/7/items",
            "/orders/7/x/y/z",
            "/x/y",
            "/x",
            "/files",
            "/files/a/b",
            "/api",
            "/api/",
            "/api/v1/x",
            "/apix",
            "//orders//7/",
            "/a/b/c",
        ];
        let methods = [Method::GET, Method::POST, Method::DELETE, Method::PUT];
        let mut found = 0;
        for path in paths {
            for method in &methods {
                let scan = sorted
                    .iter()
                    .find(|(_, m)| m.matches(method, path))
                    .map(|(i, _)| *i);
                assert_eq!(table.get(method, path).copied(), scan, "{method} {path}");
                found += usize::from(scan.is_some());
            }
        }
        assert!(found > 40, "{found}");
    }

    #[test]
    fn ties_go_to_the_first_inserted() {
        let mut table = RouteTable::new();
        table.insert(m(prefix("/api"), &[]), 1);
        table.insert(m(prefix("/api/"), &[]), 2);
        assert_eq!(table.get(&Method::GET, "/api/x"), Some(&1));
        assert_eq!(table.len(), 2);
        assert_eq!(RouteTable::<u8>::new().get(&Method::GET, "/"), None);
    }
}
