//! From YAML text to a [`Node`] tree that remembers where every value came
//! from: each value carries the 1-based line and column ([`Pos`]) of its
//! node, each map key the position of the key.
//!
//! YAML is read through `serde-saphyr` (pure Rust, panic-free, positions
//! from its `Spanned`), the parser limiter-config uses for rule files, with
//! the same tree shape. Invariants: a map keeps its keys in file order (so
//! errors come out in file order), and a duplicate map key is a syntax
//! error, never a silent overwrite. Nothing here knows the schema: that is
//! `schema`'s job.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A 1-based line and column in a config file.
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

/// A scalar or container of the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Keys with their positions, in file order.
    Map(Vec<(String, Pos, Node)>),
}

impl Value {
    /// What kind of value this is, for "expected X, found Y" messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a decimal number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a map of fields",
        }
    }

    /// The value as JSON (for `metadata`, which is returned as it is).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            // Metadata numbers become protobuf doubles anyway.
            #[allow(clippy::cast_precision_loss)]
            Value::Int(i) => serde_json::Number::from_f64(*i as f64)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Seq(items) => items.iter().map(|n| n.value.to_json()).collect(),
            Value::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, _, n)| (k.clone(), n.value.to_json()))
                    .collect(),
            ),
        }
    }
}

/// A value and the position of its node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) pos: Pos,
}

/// A syntax error: where, and the parser's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) pos: Pos,
    pub(crate) message: String,
}

fn pos_of(l: serde_saphyr::Location) -> Pos {
    Pos {
        line: u32::try_from(l.line()).unwrap_or(u32::MAX),
        column: u32::try_from(l.column()).unwrap_or(u32::MAX),
    }
}

/// Parses YAML `text` into a tree (an empty document is `Null` at 1:1).
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    if text.trim().is_empty() {
        return Ok(Node {
            value: Value::Null,
            pos: Pos { line: 1, column: 1 },
        });
    }
    match serde_saphyr::from_str::<Spanned<Tree>>(text) {
        Ok(spanned) => Ok(node(spanned)),
        Err(e) => {
            let pos = e.location().map_or(Pos { line: 1, column: 1 }, pos_of);
            // The first line of the message, without the rendered snippet.
            let message = e.to_string().lines().next().unwrap_or("").trim().to_owned();
            Err(SyntaxError { pos, message })
        }
    }
}

fn node(s: Spanned<Tree>) -> Node {
    let pos = pos_of(s.referenced);
    Node {
        value: s.value.into_value(),
        pos,
    }
}

/// The tree as deserialized, children still spanned.
enum Tree {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Tree>>),
    Map(Vec<(Spanned<String>, Spanned<Tree>)>),
}

impl Tree {
    fn into_value(self) -> Value {
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(b),
            Tree::Int(i) => Value::Int(i),
            Tree::Float(f) => Value::Float(f),
            Tree::Str(s) => Value::Str(s),
            Tree::Seq(items) => Value::Seq(items.into_iter().map(node).collect()),
            Tree::Map(entries) => Value::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.value, pos_of(k.referenced), node(v)))
                    .collect(),
            ),
        }
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tree, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree, D::Error> {
        Tree::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Tree, E> {
        Ok(Tree::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tree, E> {
        Ok(Tree::Int(i128::from(v)))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Tree, E> {
        Ok(Tree::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tree, E> {
        Ok(Tree::Int(i128::from(v)))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Tree, E> {
        i128::try_from(v)
            .map(Tree::Int)
            .map_err(|_| E::custom("integer too large"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Tree, E> {
        Ok(Tree::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Tree::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key()? {
            entries.push((key, map.next_value()?));
        }
        Ok(Tree::Map(entries))
    }
}
