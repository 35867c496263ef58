//! Lenient decoding of tool inputs.
//!
//! Models follow schemas well but not perfectly: a number sometimes arrives as
//! `"20"`, a flag as `"true"`, an optional field as `null`. Refusing such calls
//! wastes a turn, so the typed input structs decode these fields through the
//! helpers here.

use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_json::Value;

/// An optional non-negative integer given as a number, a numeric string or null.
pub(crate) fn opt_usize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            })
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| de::Error::custom(format!("expected a non-negative integer, got {n}"))),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s.trim().parse::<usize>().map(Some).map_err(|_| {
            de::Error::custom(format!("expected a non-negative integer, got \"{s}\""))
        }),
        Some(other) => Err(de::Error::custom(format!(
            "expected a non-negative integer, got {other}"
        ))),
    }
}

/// An optional flag given as a boolean, `"true"`/`"false"` or null.
pub(crate) fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" => Ok(Some(true)),
            "false" | "no" | "0" | "" => Ok(Some(false)),
            _ => Err(de::Error::custom(format!(
                "expected true or false, got \"{s}\""
            ))),
        },
        Some(other) => Err(de::Error::custom(format!(
            "expected true or false, got {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[derive(Deserialize, Debug)]
    struct Probe {
        #[serde(default, deserialize_with = "opt_usize")]
        n: Option<usize>,
        #[serde(default, deserialize_with = "opt_bool")]
        b: Option<bool>,
    }

    fn probe(v: Value) -> Result<Probe, serde_json::Error> {
        serde_json::from_value(v)
    }

    #[test]
    fn numbers_accept_strings_and_null() {
        assert_eq!(probe(json!({"n": 5})).unwrap().n, Some(5));
        assert_eq!(probe(json!({"n": "12"})).unwrap().n, Some(12));
        assert_eq!(probe(json!({"n": 3.0})).unwrap().n, Some(3));
        assert_eq!(probe(json!({"n": null})).unwrap().n, None);
        assert_eq!(probe(json!({})).unwrap().n, None);
        assert!(probe(json!({"n": -1})).is_err());
        assert!(probe(json!({"n": "ten"})).is_err());
    }

    #[test]
    fn flags_accept_strings() {
        assert_eq!(probe(json!({"b": true})).unwrap().b, Some(true));
        assert_eq!(probe(json!({"b": "false"})).unwrap().b, Some(false));
        assert!(probe(json!({"b": "maybe"})).is_err());
    }
}
