//! JSON text for [`Problem`](super::Problem): strings escaped so that any
//! input stays valid JSON (RFC 8259), and the typed values of extension
//! members ([`JsonValue`]).

use std::fmt;

/// Appends `s` to `out` as a JSON string literal (with its quotes): `"` and
/// `\` escaped with a backslash, control characters below U+0020 as
/// `\u00XX`, everything else (any Unicode) as it is.
///
/// ```
/// let mut out = String::new();
/// limiter_tower::problem::write_json_string(&mut out, "a\"b\\c\n");
/// assert_eq!(out, r#""a\"b\\c\u000a""#);
/// ```
pub fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    escape_into(out, s);
    out.push('"');
}

/// Appends `s` escaped for the inside of a JSON string, copying the runs
/// that need no escape whole.
fn escape_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        // Only ASCII bytes are escaped, so every cut is at a char boundary.
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// A `fmt::Write` that escapes what it is given.
pub(super) struct Escaped<'a>(pub(super) &'a mut String);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape_into(self.0, s);
        Ok(())
    }
}

/// Appends `n` in decimal.
pub(super) fn push_u64(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// A value an extension member can hold, written as JSON.
pub trait JsonValue {
    /// Appends this value as JSON to `out`.
    fn write_json(&self, out: &mut String);
}

impl<T: JsonValue + ?Sized> JsonValue for &T {
    fn write_json(&self, out: &mut String) {
        (**self).write_json(out);
    }
}

impl JsonValue for str {
    fn write_json(&self, out: &mut String) {
        write_json_string(out, self);
    }
}

impl JsonValue for String {
    fn write_json(&self, out: &mut String) {
        write_json_string(out, self);
    }
}

impl JsonValue for bool {
    fn write_json(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl JsonValue for $t {
            fn write_json(&self, out: &mut String) {
                // Widening to u64 keeps every value.
                push_u64(out, *self as u64);
            }
        }
    )*};
}
unsigned!(u8, u16, u32, u64, usize);

macro_rules! signed {
    ($($t:ty),*) => {$(
        impl JsonValue for $t {
            fn write_json(&self, out: &mut String) {
                if *self < 0 {
                    out.push('-');
                }
                // Widening to i64 keeps every value; unsigned_abs keeps i64::MIN.
                push_u64(out, (*self as i64).unsigned_abs());
            }
        }
    )*};
}
signed!(i8, i16, i32, i64, isize);

/// A finite float as JSON's number; NaN and the infinities (which JSON
/// cannot write) as `null`.
impl JsonValue for f64 {
    fn write_json(&self, out: &mut String) {
        if self.is_finite() {
            use fmt::Write as _;
            let _ = write!(out, "{self}");
        } else {
            out.push_str("null");
        }
    }
}

/// `None` as `null`.
impl<T: JsonValue> JsonValue for Option<T> {
    fn write_json(&self, out: &mut String) {
        match self {
            Some(v) => v.write_json(out),
            None => out.push_str("null"),
        }
    }
}

/// A JSON array.
impl<T: JsonValue> JsonValue for [T] {
    fn write_json(&self, out: &mut String) {
        out.push('[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            v.write_json(out);
        }
        out.push(']');
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::super::Problem;
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        write_json_string(&mut out, s);
        out
    }

    #[test]
    fn every_control_character_quote_and_backslash_is_escaped() {
        for b in 0u8..0x20 {
            let s = char::from(b).to_string();
            assert_eq!(escaped(&s), format!("\"\\u{:04x}\"", b));
        }
        assert_eq!(escaped("\"\\"), r#""\"\\""#);
        // Non-ASCII text and DEL pass unchanged, around escapes too.
        assert_eq!(escaped("é\u{7f}\n日本"), "\"é\u{7f}\\u000a日本\"");
        assert_eq!(escaped(""), "\"\"");
    }

    #[test]
    fn members_are_typed() {
        let body = Problem::new(StatusCode::BAD_GATEWAY)
            .member("a", "x\"")
            .member("b", 0u8)
            .member("c", u64::MAX)
            .member("d", i64::MIN)
            .member("e", -7i32)
            .member("f", true)
            .member("g", 0.5f64)
            .member("h", f64::NAN)
            .member("i", None::<u32>)
            .member("j", Some("y"))
            .member("k", &[1u32, 2][..])
            .member("l", &[] as &[u8])
            .member("m\n", String::from("z"))
            .into_body();
        assert_eq!(
            body,
            concat!(
                r#"{"type":"about:blank","title":"Bad Gateway","status":502,"#,
                r#""a":"x\"","b":0,"c":18446744073709551615,"d":-9223372036854775808,"#,
                r#""e":-7,"f":true,"g":0.5,"h":null,"i":null,"j":"y","k":[1,2],"l":[],"#,
                r#""m\u000a":"z"}"#
            )
        );
    }

    #[test]
    fn documents_parse_as_json_for_hostile_text() {
        // A minimal JSON string reader: the escaper's output must read back
        // as the input.
        fn unescape(lit: &str) -> String {
            let inner = lit.strip_prefix('"').unwrap().strip_suffix('"').unwrap();
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                assert!(u32::from(c) >= 0x20, "raw control character in output");
                if c != '\\' {
                    assert_ne!(c, '"', "unescaped quote");
                    out.push(c);
                    continue;
                }
                match chars.next().unwrap() {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                    }
                    other => panic!("unexpected escape {other}"),
                }
            }
            out
        }
        let mut s = String::new();
        for c in (0u32..0x300).chain([0x2028, 0x2029, 0xfeff, 0x1f600]) {
            s.push(char::from_u32(c).unwrap());
        }
        assert_eq!(unescape(&escaped(&s)), s);
    }
}
