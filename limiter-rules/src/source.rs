//! From file text to a [`Node`] tree that remembers where every value came
//! from, for YAML and TOML alike.
//!
//! Both formats are read through serde into the same tree: each value
//! carries the 1-based line and column ([`Pos`]) of its node, each map key
//! the position of the key. YAML goes through `serde-saphyr` (pure Rust, no
//! `unsafe-libyaml`, positions from its `Spanned`), TOML through `toml`
//! (byte spans from its `Spanned`, turned into line and column here).
//!
//! Invariants: a map keeps its keys in file order (so errors come out in
//! file order), and a duplicate key is a syntax error of the format, never a
//! silent overwrite. Nothing here knows the rule schema: that is
//! `validate`'s job, which walks the tree and reports every problem at once.
//!
//! The tree is public ([`parse_tree`](crate::parse_tree), [`Node`],
//! [`Value`], [`SyntaxError`]) so that another file format's checker (the
//! Envoy rate limit service's YAML in `limiter-rls`) reports its problems
//! at the same positions, computed the same way.

use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

/// A 1-based line and column in a rule file (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Pos {
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub column: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The two file formats, chosen by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.yaml` or `.yml`.
    Yaml,
    /// `.toml`.
    Toml,
}

impl Format {
    /// The format of `path` by its extension (case-insensitive), or `None`
    /// for any other.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_rules::Format;
    ///
    /// assert_eq!(Format::of("rules.YML".as_ref()), Some(Format::Yaml));
    /// assert_eq!(Format::of("rules.toml".as_ref()), Some(Format::Toml));
    /// assert_eq!(Format::of("rules.json".as_ref()), None);
    /// ```
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "yaml" | "yml" => Some(Format::Yaml),
            "toml" => Some(Format::Toml),
            _ => None,
        }
    }
}

/// A scalar or container of the file; its children carry their positions.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An empty value (`~`, `null`, or nothing after the key).
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A whole number, as written (range checks are the schema's).
    Int(i128),
    /// A number with a fraction or an exponent.
    Float(f64),
    /// A string.
    Str(String),
    /// A list.
    Seq(Vec<Node>),
    /// Keys with their positions, in file order.
    Map(Vec<(String, Pos, Node)>),
}

impl Value {
    /// What kind of value this is, for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a decimal number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a table of fields",
        }
    }
}

/// A value and the position of its node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Where the value starts (1:1 for an empty document).
    pub pos: Pos,
}

/// A syntax error of the format: where, and the parser's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the parser stopped.
    pub pos: Pos,
    /// The first line of the parser's message.
    pub message: String,
}

/// Parses `text` in `format` into a tree (an empty YAML document is
/// [`Value::Null`] at 1:1).
///
/// # Errors
///
/// The format's [`SyntaxError`], duplicate keys included.
///
/// # Examples
///
/// ```
/// use limiter_rules::{Format, Pos, Value, parse_tree};
///
/// let root = parse_tree("domain: d\n", Format::Yaml)?;
/// let Value::Map(entries) = &root.value else { unreachable!() };
/// assert_eq!(entries[0].0, "domain");
/// assert_eq!(entries[0].2.pos, Pos { line: 1, column: 9 });
/// # Ok::<(), limiter_rules::SyntaxError>(())
/// ```
pub fn parse(text: &str, format: Format) -> Result<Node, SyntaxError> {
    match format {
        Format::Yaml => parse_yaml(text),
        Format::Toml => parse_toml(text),
    }
}

fn parse_yaml(text: &str) -> Result<Node, SyntaxError> {
    if text.trim().is_empty() {
        return Ok(Node {
            value: Value::Null,
            pos: Pos { line: 1, column: 1 },
        });
    }
    match serde_saphyr::from_str::<serde_saphyr::Spanned<Tree<YamlSpans>>>(text) {
        Ok(spanned) => Ok(YamlSpans::node(spanned, &LineIndex::new(text))),
        Err(e) => {
            let pos = e.location().map_or(Pos { line: 1, column: 1 }, |l| Pos {
                line: u32::try_from(l.line()).unwrap_or(u32::MAX),
                column: u32::try_from(l.column()).unwrap_or(u32::MAX),
            });
            // The first line of the message, without the rendered snippet.
            let message = e.to_string().lines().next().unwrap_or("").trim().to_owned();
            Err(SyntaxError { pos, message })
        }
    }
}

fn parse_toml(text: &str) -> Result<Node, SyntaxError> {
    let index = LineIndex::new(text);
    // The document is a table: its position is the start of the file.
    match toml::from_str::<Tree<TomlSpans>>(text) {
        Ok(tree) => Ok(Node {
            value: tree.into_value(&index),
            pos: Pos { line: 1, column: 1 },
        }),
        Err(e) => Err(SyntaxError {
            pos: e
                .span()
                .map_or(Pos { line: 1, column: 1 }, |s| index.pos(s.start)),
            message: e.message().trim().to_owned(),
        }),
    }
}

/// Byte offsets to lines and columns.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(text: &'a str) -> LineIndex<'a> {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, starts }
    }

    pub(crate) fn pos(&self, offset: usize) -> Pos {
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let column = self
            .text
            .get(start..offset.min(self.text.len()))
            .map_or(1, |s| s.chars().count() + 1);
        Pos {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }
}

/// How a format's `Spanned` wrapper gives a position.
trait Spans: Sized {
    type Spanned<T: for<'de> Deserialize<'de>>: for<'de> Deserialize<'de>;
    fn split<T: for<'de> Deserialize<'de>>(s: Self::Spanned<T>, index: &LineIndex<'_>) -> (T, Pos);

    fn node(s: Self::Spanned<Tree<Self>>, index: &LineIndex<'_>) -> Node {
        let (tree, pos) = Self::split(s, index);
        Node {
            value: tree.into_value(index),
            pos,
        }
    }
}

struct YamlSpans;

impl Spans for YamlSpans {
    type Spanned<T: for<'de> Deserialize<'de>> = serde_saphyr::Spanned<T>;
    fn split<T: for<'de> Deserialize<'de>>(s: Self::Spanned<T>, _: &LineIndex<'_>) -> (T, Pos) {
        let l = s.referenced;
        let pos = Pos {
            line: u32::try_from(l.line()).unwrap_or(u32::MAX),
            column: u32::try_from(l.column()).unwrap_or(u32::MAX),
        };
        (s.value, pos)
    }
}

struct TomlSpans;

impl Spans for TomlSpans {
    type Spanned<T: for<'de> Deserialize<'de>> = toml::Spanned<T>;
    fn split<T: for<'de> Deserialize<'de>>(s: Self::Spanned<T>, index: &LineIndex<'_>) -> (T, Pos) {
        let pos = index.pos(s.span().start);
        (s.into_inner(), pos)
    }
}

/// A map entry as deserialized: the key and the value, each spanned.
type Entry<S> = (
    <S as Spans>::Spanned<String>,
    <S as Spans>::Spanned<Tree<S>>,
);

/// The tree as deserialized, children still in the format's `Spanned`.
enum Tree<S: Spans> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<S::Spanned<Tree<S>>>),
    Map(Vec<Entry<S>>),
}

impl<S: Spans> Tree<S> {
    fn into_value(self, index: &LineIndex<'_>) -> Value {
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(b),
            Tree::Int(i) => Value::Int(i),
            Tree::Float(f) => Value::Float(f),
            Tree::Str(s) => Value::Str(s),
            Tree::Seq(items) => Value::Seq(items.into_iter().map(|i| S::node(i, index)).collect()),
            Tree::Map(entries) => Value::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| {
                        let (key, pos) = S::split(k, index);
                        (key, pos, S::node(v, index))
                    })
                    .collect(),
            ),
        }
    }
}

impl<'de, S: Spans> Deserialize<'de> for Tree<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tree<S>, D::Error> {
        d.deserialize_any(TreeVisitor(PhantomData))
    }
}

struct TreeVisitor<S>(PhantomData<S>);

impl<'de, S: Spans> Visitor<'de> for TreeVisitor<S> {
    type Value = Tree<S>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Tree<S>, E> {
        Ok(Tree::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Tree<S>, E> {
        Ok(Tree::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree<S>, D::Error> {
        Tree::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Tree<S>, E> {
        Ok(Tree::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tree<S>, E> {
        Ok(Tree::Int(i128::from(v)))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Tree<S>, E> {
        Ok(Tree::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tree<S>, E> {
        Ok(Tree::Int(i128::from(v)))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Tree<S>, E> {
        i128::try_from(v)
            .map(Tree::Int)
            .map_err(|_| E::custom("integer too large"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Tree<S>, E> {
        Ok(Tree::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Tree<S>, E> {
        Ok(Tree::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Tree<S>, E> {
        Ok(Tree::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree<S>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Tree::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree<S>, A::Error> {
        let mut entries: Vec<Entry<S>> = Vec::new();
        while let Some(key) = map.next_key()? {
            entries.push((key, map.next_value()?));
        }
        Ok(Tree::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'a>(node: &'a Node, name: &str) -> (&'a Pos, &'a Node) {
        match &node.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _, _)| k == name)
                .map(|(_, p, n)| (p, n))
                .expect("field"),
            other => panic!("not a map: {other:?}"),
        }
    }

    #[test]
    fn yaml_positions_of_keys_and_values() {
        let text = "rate_limits:\n  api:\n    rate: 5000\n    burst: \"x\"\n";
        let root = parse(text, Format::Yaml).unwrap();
        let (_, limits) = field(&root, "rate_limits");
        let (api_key, api) = field(limits, "api");
        assert_eq!(*api_key, Pos { line: 2, column: 3 });
        let (rate_key, rate) = field(api, "rate");
        assert_eq!(*rate_key, Pos { line: 3, column: 5 });
        assert_eq!(
            (rate.pos, &rate.value),
            (
                Pos {
                    line: 3,
                    column: 11
                },
                &Value::Int(5000)
            )
        );
        let (_, burst) = field(api, "burst");
        assert_eq!(burst.value, Value::Str("x".into()));
    }

    #[test]
    fn toml_positions_of_keys_and_values() {
        let text = "[rate_limits.api]\nrate = 5000\nburst = \"x\"\n";
        let root = parse(text, Format::Toml).unwrap();
        let (_, limits) = field(&root, "rate_limits");
        let (_, api) = field(limits, "api");
        let (rate_key, rate) = field(api, "rate");
        assert_eq!(*rate_key, Pos { line: 2, column: 1 });
        assert_eq!(
            (rate.pos, &rate.value),
            (Pos { line: 2, column: 8 }, &Value::Int(5000))
        );
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse("a: [1, 2\nb: 3\n", Format::Yaml).unwrap_err();
        assert!(e.pos.line >= 1, "{e:?}");
        let e = parse("a = 1\nb = = 2\n", Format::Toml).unwrap_err();
        assert_eq!(e.pos.line, 2, "{e:?}");
        let e = parse("a: 1\na: 2\n", Format::Yaml).unwrap_err();
        assert_eq!(e.pos.line, 2, "duplicate keys are errors: {e:?}");
    }

    #[test]
    fn line_index_counts_characters() {
        let index = LineIndex::new("é = 1\nab\n");
        assert_eq!(index.pos(0), Pos { line: 1, column: 1 });
        assert_eq!(index.pos(3), Pos { line: 1, column: 3 });
        assert_eq!(index.pos(7), Pos { line: 2, column: 1 });
    }
}
