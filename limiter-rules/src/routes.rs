//! Which rule a request belongs to: route templates and path prefixes,
//! methods, precedence, the ambiguity check, and [`RouteTable`], the lookup
//! that finds the most specific match without trying every rule.
//!
//! A path is read as its segments: split at `/`, empty segments ignored
//! (`//orders//7/` is `/orders/7`), no decoding. A template (`/orders/{id}`,
//! `/files/{*rest}`) matches segment by segment: a literal matches itself,
//! `{name}` any one segment, a last `{*name}` the rest (one segment or
//! more). A prefix matches the paths whose first segments are its segments
//! (`/api` matches `/api` and `/api/x`, not `/apix`). Precedence, most
//! specific first: templates before prefixes; among templates, more literal
//! segments first, then without a `{*rest}` before with; among prefixes,
//! the longest; then matches with methods before matches for every method.
//! Two matches that some request could match at the same precedence are
//! *ambiguous* ([`Matcher::ambiguous_with`]); a rule file with two is
//! refused, so the order of rules in a file never decides.
//!
//! [`RouteTable`] keeps its matches in a tree of segments: a lookup walks
//! the request path's segments once (plus one branch per `{param}` that
//! could also match), so its cost grows with the path's length, not with
//! the number of rules.

use http::Method;

use crate::schema::{MatchSpec, PathMatch};

/// One segment of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    Literal(String),
    Param,
    Rest,
}

/// The segments of `path`, or `None` if it is not a template (a `{*rest}`
/// before the end, an unclosed brace).
pub(crate) fn template_of(path: &str) -> Option<Vec<Segment>> {
    let segments: Vec<&str> = split(path).collect();
    let mut out = Vec::with_capacity(segments.len());
    for (i, s) in segments.iter().enumerate() {
        let seg = if let Some(inner) = s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            if inner.starts_with('*') {
                if i + 1 != segments.len() {
                    return None;
                }
                Segment::Rest
            } else if inner.is_empty() || inner.contains(['{', '}']) {
                return None;
            } else {
                Segment::Param
            }
        } else if s.contains(['{', '}']) {
            return None;
        } else {
            Segment::Literal((*s).to_owned())
        };
        out.push(seg);
    }
    Some(out)
}

/// The segments of a path: split at `/`, empty segments skipped (as
/// `path.split('/').filter(|s| !s.is_empty())`, by a byte scan: the route
/// of every request is found with it).
#[derive(Debug, Clone)]
pub(crate) struct Segments<'p> {
    rest: &'p str,
}

impl<'p> Iterator for Segments<'p> {
    type Item = &'p str;

    fn next(&mut self) -> Option<&'p str> {
        let Some(start) = self.rest.bytes().position(|b| b != b'/') else {
            self.rest = "";
            return None;
        };
        // `/` is ASCII, so both cuts fall on character boundaries.
        let rest = &self.rest[start..];
        let end = rest.bytes().position(|b| b == b'/').unwrap_or(rest.len());
        let (segment, tail) = rest.split_at(end);
        self.rest = tail;
        Some(segment)
    }
}

pub(crate) fn split(path: &str) -> Segments<'_> {
    Segments { rest: path }
}

/// Whether `template` matches `path`.
pub(crate) fn template_matches(template: &[Segment], path: &str) -> bool {
    let mut parts = split(path);
    for seg in template {
        match seg {
            Segment::Rest => return parts.next().is_some(),
            Segment::Param => {
                if parts.next().is_none() {
                    return false;
                }
            }
            Segment::Literal(l) => {
                if parts.next() != Some(l.as_str()) {
                    return false;
                }
            }
        }
    }
    parts.next().is_none()
}

/// A rule's `match`, compiled once: the template's segments parsed, the
/// precedence computed.
///
/// # Examples
///
/// ```
/// use http::Method;
/// use limiter_rules::{MatchSpec, Matcher, PathMatch};
///
/// let orders = Matcher::new(&MatchSpec {
///     path: PathMatch::Route("/orders/{id}".into()),
///     methods: vec![Method::GET],
/// })
/// .expect("a template");
/// assert!(orders.matches(&Method::GET, "/orders/7"));
/// assert!(!orders.matches(&Method::POST, "/orders/7"));
/// assert!(!orders.matches(&Method::GET, "/orders/7/items"));
/// ```
#[derive(Debug, Clone)]
pub struct Matcher {
    pub(crate) path: Compiled,
    methods: Vec<Method>,
    precedence: (u8, usize, u8, bool),
}

#[derive(Debug, Clone)]
pub(crate) enum Compiled {
    Route(String, Vec<Segment>),
    /// The prefix's segments.
    Prefix(Vec<String>),
}

impl Matcher {
    /// The compiled `m`, or `None` for a template that does not parse
    /// (validation refuses those).
    pub fn new(m: &MatchSpec) -> Option<Matcher> {
        let has_methods = !m.methods.is_empty();
        let (path, precedence) = match &m.path {
            PathMatch::Route(r) => {
                let t = template_of(r)?;
                let literals = t
                    .iter()
                    .filter(|s| matches!(s, Segment::Literal(_)))
                    .count();
                let no_rest = !t.contains(&Segment::Rest);
                (
                    Compiled::Route(r.clone(), t),
                    (1, literals, u8::from(no_rest), has_methods),
                )
            }
            PathMatch::Prefix(p) => {
                let segments: Vec<String> = split(p).map(str::to_owned).collect();
                let len = segments.iter().map(|s| s.len() + 1).sum();
                (Compiled::Prefix(segments), (0, len, 0, has_methods))
            }
        };
        Some(Matcher {
            path,
            methods: m.methods.clone(),
            precedence,
        })
    }

    /// A sortable precedence: larger is more specific.
    pub(crate) fn precedence(&self) -> (u8, usize, u8, bool) {
        self.precedence
    }

    /// Whether a request for `path` with `method` matches.
    pub fn matches(&self, method: &Method, path: &str) -> bool {
        if !self.has_method(method) {
            return false;
        }
        match &self.path {
            Compiled::Route(_, t) => template_matches(t, path),
            Compiled::Prefix(p) => {
                let mut parts = split(path);
                p.iter().all(|s| parts.next() == Some(s.as_str()))
            }
        }
    }

    pub(crate) fn has_method(&self, method: &Method) -> bool {
        self.methods.is_empty() || self.methods.contains(method)
    }

    /// What `self` and `other` both match at the same precedence, if
    /// anything (as "route /a/{x} for GET"): then neither is more specific,
    /// and the order they were written in would decide.
    pub fn ambiguous_with(&self, other: &Matcher) -> Option<String> {
        ambiguous(self, other)
    }
}

/// What `a` and `b` both match at the same precedence, if anything: then
/// neither would be chosen by a rule of this module.
pub(crate) fn ambiguous(a: &Matcher, b: &Matcher) -> Option<String> {
    if a.precedence != b.precedence {
        return None;
    }
    let methods = if a.methods.is_empty() && b.methods.is_empty() {
        "every method".to_owned()
    } else {
        // Both have methods: the precedence is equal.
        let common: Vec<&str> = a
            .methods
            .iter()
            .filter(|m| b.methods.contains(m))
            .map(Method::as_str)
            .collect();
        if common.is_empty() {
            return None;
        }
        common.join(", ")
    };
    let paths = match (&a.path, &b.path) {
        (Compiled::Prefix(p), Compiled::Prefix(q)) => {
            (p == q).then(|| format!("prefix /{}", p.join("/")))
        }
        (Compiled::Route(_, t), Compiled::Route(s, u)) => {
            overlap(t, u).then(|| format!("route {s}"))
        }
        _ => None,
    }?;
    Some(format!("{paths} for {methods}"))
}

/// Whether some path matches both templates.
fn overlap(t: &[Segment], u: &[Segment]) -> bool {
    match (t.split_first(), u.split_first()) {
        (None, None) => true,
        (Some((Segment::Rest, _)), Some(_)) | (Some(_), Some((Segment::Rest, _))) => true,
        (Some((a, t)), Some((b, u))) => {
            let compatible = match (a, b) {
                (Segment::Literal(x), Segment::Literal(y)) => x == y,
                _ => true,
            };
            compatible && overlap(t, u)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_the_non_empty_parts_between_slashes() {
        for path in [
            "",
            "/",
            "//",
            "/a",
            "a",
            "/a/",
            "//a//b///",
            "/orders/7/items",
            "/é/ü/",
        ] {
            let expected: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            assert_eq!(split(path).collect::<Vec<_>>(), expected, "{path:?}");
        }
    }

    fn route(r: &str, methods: &[Method]) -> Matcher {
        Matcher::new(&MatchSpec {
            path: PathMatch::Route(r.into()),
            methods: methods.to_vec(),
        })
        .unwrap()
    }

    fn prefix(p: &str) -> Matcher {
        Matcher::new(&MatchSpec {
            path: PathMatch::Prefix(p.into()),
            methods: Vec::new(),
        })
        .unwrap()
    }

    fn precedence(m: &Matcher) -> (u8, usize, u8, bool) {
        m.precedence()
    }

    #[test]
    fn templates_match_by_segment() {
        let t = template_of("/orders/{id}").unwrap();
        assert!(template_matches(&t, "/orders/42"));
        assert!(!template_matches(&t, "/orders"));
        assert!(!template_matches(&t, "/orders/42/items"));
        let rest = template_of("/files/{*path}").unwrap();
        assert!(template_matches(&rest, "/files/a/b"));
        assert!(!template_matches(&rest, "/files"));
        assert!(template_of("/a/{*x}/b").is_none());
        assert!(template_of("/a/{x").is_none());
    }

    #[test]
    fn prefixes_match_at_boundaries() {
        let any = Method::GET;
        assert!(prefix("/api").matches(&any, "/api"));
        assert!(prefix("/api").matches(&any, "/api/v1"));
        assert!(prefix("/api").matches(&any, "//api//v1"));
        assert!(!prefix("/api").matches(&any, "/apix"));
        assert!(!prefix("/api/v1").matches(&any, "/api"));
        assert!(prefix("/").matches(&any, "/anything"));
        assert!(prefix("/").matches(&any, "/"));
    }

    #[test]
    fn ambiguity() {
        let get = [Method::GET];
        let post = [Method::POST];
        assert!(ambiguous(&route("/a/{id}", &get), &route("/a/{x}", &get)).is_some());
        assert!(ambiguous(&route("/a/{id}", &get), &route("/a/{x}", &post)).is_none());
        // More literals wins: not ambiguous.
        assert!(ambiguous(&route("/a/{id}", &[]), &route("/a/new", &[])).is_none());
        // Same literal count, crossing parameters: ambiguous.
        assert!(ambiguous(&route("/a/{x}/c", &[]), &route("/a/b/{y}", &[])).is_some());
        assert!(ambiguous(&route("/a/{x}", &[]), &route("/b/{y}", &[])).is_none());
        assert!(ambiguous(&prefix("/api"), &prefix("/api")).is_some());
        assert!(ambiguous(&prefix("/api"), &prefix("/api/v1")).is_none());
        // A method-specific rule outranks an any-method rule.
        assert!(ambiguous(&route("/a", &get), &route("/a", &[])).is_none());
        assert!(precedence(&route("/a", &get)) > precedence(&route("/a", &[])));
        assert!(precedence(&route("/{x}", &[])) > precedence(&prefix("/a/b/c")));
        assert!(route("/a/{x}", &get).matches(&Method::GET, "/a/1"));
        assert!(!route("/a/{x}", &get).matches(&Method::POST, "/a/1"));
        assert!(prefix("/a").matches(&Method::DELETE, "/a/b"));
    }
}
