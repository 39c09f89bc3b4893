//! JSON as Python's `json.dumps` writes it, key order kept.
//!
//! The testdata checksum hashes the meta as Normal-OJ's backend serialises
//! it: `json.dumps` defaults (`", "` and `": "` separators, non-ASCII escaped,
//! floats in `repr` form) and the keys in the order they were written. A
//! Python runner recomputes it from the `/meta` body it receives, so `/meta`
//! serves these same bytes. `serde_json::Value` sorts keys, hence this type.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt::{self, Write};

/// A JSON value whose objects keep their keys in document order.
#[derive(Clone, Debug, PartialEq)]
pub enum Ordered {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Ordered>),
    Object(Vec<(String, Ordered)>),
}

impl Ordered {
    /// The value of `key` when this is an object holding it.
    pub fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text `json.dumps(value)` produces.
    pub fn dumps(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Ordered::Null => out.push_str("null"),
            Ordered::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Ordered::Number(n) => match (n.is_f64(), n.as_f64()) {
                (true, Some(f)) => out.push_str(&float_repr(f)),
                _ => out.push_str(&n.to_string()),
            },
            Ordered::String(s) => write_str(s, out),
            Ordered::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Ordered::Object(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_str(k, out);
                    out.push_str(": ");
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A string with `ensure_ascii`: printable ASCII as is, the rest escaped
/// (`\uXXXX` in lowercase hex, UTF-16 surrogate pairs above the BMP).
fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: shortest round-trip digits, positional notation
/// for exponents in -4..16 (always with a fractional part), else `1e+16`.
fn float_repr(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let sci = format!("{f:e}"); // shortest digits, e.g. "-1.5e-5"
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{sign}{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{sign}{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        format!("{sign}{first}{frac}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OrderedVisitor)
    }
}

struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = Ordered;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Ordered, E> {
        Ok(Ordered::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Ordered, E> {
        Ok(Ordered::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Ordered, E> {
        Ok(Ordered::Number(n.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, f: f64) -> Result<Ordered, E> {
        serde_json::Number::from_f64(f).map(Ordered::Number).ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Ordered, E> {
        Ok(Ordered::String(s.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Ordered::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
        let mut entries: Vec<(String, Ordered)> = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Ordered>()? {
            // Python's dict keeps a repeated key at its first place, last value.
            match entries.iter_mut().find(|(old, _)| *old == k) {
                Some(slot) => slot.1 = v,
                None => entries.push((k, v)),
            }
        }
        Ok(Ordered::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_matches_python() {
        // Expected outputs produced by CPython 3's json.dumps.
        let v: Ordered = serde_json::from_str(
            r#"{"tasks":[{"taskScore":40,"b":"é\u007f\"\\\n\t\u0001😀","c":[1.5,null,true,1e16]}]}"#,
        )
        .unwrap();
        assert_eq!(
            v.dumps(),
            concat!(
                r#"{"tasks": [{"taskScore": 40, "b": "\u00e9\u007f\"\\\n\t\u0001\ud83d\ude00", "#,
                r#""c": [1.5, null, true, 1e+16]}]}"#
            )
        );
    }

    #[test]
    fn floats_are_written_as_python_repr_writes_them() {
        let cases = [(1.0, "1.0"), (0.0001, "0.0001"), (0.00001, "1e-05"), (123.25, "123.25"), (-2.5e20, "-2.5e+20")];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want);
        }
        assert_eq!(float_repr(1e15), "1000000000000000.0");
    }

    #[test]
    fn key_order_is_kept() {
        let v: Ordered = serde_json::from_str(r#"{"z": 1, "a": {"y": 2, "b": 3}}"#).unwrap();
        assert_eq!(v.dumps(), r#"{"z": 1, "a": {"y": 2, "b": 3}}"#);
        assert_eq!(v.get("a").and_then(|a| a.get("b")), Some(&Ordered::Number(3.into())));
    }
}
