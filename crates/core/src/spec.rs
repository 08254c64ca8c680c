//! Specs of pluggable parts, `NAME[:key=value,...]`: policies (`navarro:sizes=64KiB+4MiB`) and
//! replacement (`clock`). One parser, so both give the same one-line errors.

use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// Parameters given as `NAME:key=value,...`; a bare `NAME:VALUE` is stored under "_".
pub type Params = BTreeMap<String, String>;

/// Split a `kind` spec ("policy", "replacement") into its name and parameters. `known` lists
/// the names available, for the error when the name is empty.
pub fn parse(kind: &str, spec: &str, known: &str) -> Result<(String, Params)> {
    let (name, rest) = match spec.split_once(':') {
        Some((n, r)) => (n.trim(), r),
        None => (spec.trim(), ""),
    };
    if name.is_empty() {
        return Err(Error::usage(format!("empty {kind} name in '{spec}'; available: {known}")));
    }
    let mut params = Params::new();
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = match part.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
            None => ("_".to_string(), part.to_string()),
        };
        if k.is_empty() {
            return Err(Error::usage(format!("{kind} {name}: '{part}' has no parameter name (write key=value)")));
        }
        // A key given twice is a typo or a contradiction: say so rather than keep one.
        if let Some(old) = params.insert(k.clone(), v.clone()) {
            let key = if k == "_" { "the unnamed parameter".to_string() } else { format!("'{k}'") };
            return Err(Error::usage(format!("{kind} {name}: {key} is given twice ('{old}' and '{v}')")));
        }
    }
    Ok((name.to_string(), params))
}

/// Parameters as a typed struct: `T` derives `Deserialize` with `deny_unknown_fields` (and
/// `default` for its defaults), so an unknown key, a bad value and a value of the wrong type
/// each give a one-line error that names the part and the key:
/// `KIND NAME: unknown parameter 'k' (known: ...)`, `KIND NAME: key=value: expected ...`.
/// Values are parsed as the field's type asks: `true`/`false`, whole numbers, numbers, text,
/// or one of an enum's (lower-case) names.
pub fn from_params<T: serde::de::DeserializeOwned>(kind: &str, name: &str, params: &Params) -> Result<T> {
    T::deserialize(de::ParamsDe { iter: params.iter(), value: None }).map_err(|e| Error::usage(format!("{kind} {name}: {}", e.0)))
}

fn number_in<'de, D: serde::Deserializer<'de>>(d: D, ok: fn(f64) -> bool, what: &str) -> std::result::Result<f64, D::Error> {
    use serde::Deserialize;
    let s = String::deserialize(d)?;
    s.parse::<f64>().ok().filter(|&x| ok(x)).ok_or_else(|| serde::de::Error::custom(format!("expected {what}")))
}

/// For `#[serde(deserialize_with)]`: a number in (0, 1].
pub fn fraction<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    number_in(d, |x| x > 0.0 && x <= 1.0, "a fraction in (0, 1]")
}

/// For `#[serde(deserialize_with)]`: a number in [0, 1].
pub fn probability<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    number_in(d, |x| (0.0..=1.0).contains(&x), "a probability in [0, 1]")
}

/// For `#[serde(deserialize_with)]`: a finite number of at least 0.
pub fn non_negative<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    number_in(d, |x| x >= 0.0 && x.is_finite(), "a non-negative number")
}

/// The parameters of a part that takes none.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A `true`/`false` parameter that also takes sysfs's spellings `1`/`0` and `yes`/`no`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysfsFlag(pub bool);

impl<'de> serde::Deserialize<'de> for SysfsFlag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "1" | "true" | "yes" => Ok(SysfsFlag(true)),
            "0" | "false" | "no" => Ok(SysfsFlag(false)),
            _ => Err(serde::de::Error::custom("expected 1 or 0")),
        }
    }
}

mod de {
    use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
    use std::fmt;

    /// A parameter error's text, without the `KIND NAME: ` that `from_params` puts first.
    #[derive(Debug)]
    pub struct DeError(pub String);

    impl fmt::Display for DeError {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for DeError {}

    /// "a, b or c".
    fn one_of(names: &[&str]) -> String {
        match names {
            [] => "nothing".into(),
            [one] => one.to_string(),
            [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
        }
    }

    impl de::Error for DeError {
        fn custom<T: fmt::Display>(msg: T) -> Self {
            DeError(msg.to_string())
        }
        fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
            DeError(format!("expected {}", one_of(expected)))
        }
        fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
            let known = if expected.is_empty() { "none".to_string() } else { expected.join(", ") };
            DeError(format!("unknown parameter '{field}' (known: {known})"))
        }
    }

    pub struct ParamsDe<'a> {
        pub iter: std::collections::btree_map::Iter<'a, String, String>,
        pub value: Option<(&'a str, &'a str)>,
    }

    impl<'de, 'a> de::Deserializer<'de> for ParamsDe<'a> {
        type Error = DeError;
        fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            v.visit_map(self)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
        }
    }

    impl<'de, 'a> MapAccess<'de> for ParamsDe<'a> {
        type Error = DeError;
        fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DeError> {
            match self.iter.next() {
                None => Ok(None),
                Some((k, v)) => {
                    self.value = Some((k, v));
                    seed.deserialize(k.as_str().into_deserializer()).map(Some)
                }
            }
        }
        fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
            let (key, value) = self.value.take().expect("a value follows its key");
            // Every error about a value names it as the user wrote it.
            seed.deserialize(ValueDe(value)).map_err(|e| DeError(format!("{key}={value}: {}", e.0)))
        }
    }

    /// One parameter's text, read as the type the field asks for.
    struct ValueDe<'a>(&'a str);

    impl ValueDe<'_> {
        fn parse<T: std::str::FromStr>(&self, what: &str) -> Result<T, DeError> {
            self.0.parse().map_err(|_| DeError(format!("expected {what}")))
        }
    }

    impl<'de, 'a> de::Deserializer<'de> for ValueDe<'a> {
        type Error = DeError;
        fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            v.visit_str(self.0)
        }
        fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            match self.0 {
                "true" => v.visit_bool(true),
                "false" => v.visit_bool(false),
                _ => Err(DeError("expected true or false".into())),
            }
        }
        fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            v.visit_u64(self.parse("a whole number")?)
        }
        fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            v.visit_u32(self.parse("a whole number")?)
        }
        fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            v.visit_f64(self.parse("a number")?)
        }
        fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            v.visit_some(self)
        }
        fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, v: V) -> Result<V::Value, DeError> {
            v.visit_newtype_struct(self)
        }
        fn deserialize_enum<V: Visitor<'de>>(self, _name: &'static str, _variants: &'static [&'static str], v: V) -> Result<V::Value, DeError> {
            v.visit_enum(self.0.into_deserializer())
        }
        serde::forward_to_deserialize_any! {
            i8 i16 i32 i64 i128 u8 u16 u128 f32 char str string bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Colour {
        Red,
        Green,
        Blue,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields, default)]
    struct Example {
        on: bool,
        count: u64,
        share: f64,
        colour: Colour,
        label: Option<String>,
        sysfs: SysfsFlag,
        #[serde(deserialize_with = "fraction")]
        part: f64,
    }

    impl Default for Example {
        fn default() -> Self {
            Example { on: false, count: 3, share: 0.5, colour: Colour::Red, label: None, sysfs: SysfsFlag(true), part: 1.0 }
        }
    }

    fn ex(spec: &str) -> Result<Example> {
        let (name, p) = parse("policy", spec, "")?;
        from_params("policy", &name, &p)
    }

    #[test]
    fn values_take_the_fields_types_and_defaults_fill_the_rest() {
        let e = ex("t:on=true,count=7,colour=blue,label=x,sysfs=0").unwrap();
        let want = Example { on: true, count: 7, share: 0.5, colour: Colour::Blue, label: Some("x".into()), sysfs: SysfsFlag(false), part: 1.0 };
        assert_eq!(e, want);
        assert_eq!(ex("t:part=0.25").unwrap().part, 0.25);
        assert_eq!(ex("t").unwrap(), Example::default());
    }

    #[test]
    fn errors_are_one_line_and_name_the_key_and_value() {
        let err = |s: &str| ex(s).unwrap_err().to_string();
        assert_eq!(err("t:on=yes"), "policy t: on=yes: expected true or false");
        assert_eq!(err("t:count=-1"), "policy t: count=-1: expected a whole number");
        assert_eq!(err("t:share=x"), "policy t: share=x: expected a number");
        assert_eq!(err("t:colour=pink"), "policy t: colour=pink: expected red, green or blue");
        assert_eq!(err("t:sysfs=2"), "policy t: sysfs=2: expected 1 or 0");
        assert_eq!(err("t:part=0"), "policy t: part=0: expected a fraction in (0, 1]");
        assert_eq!(err("t:part=x"), "policy t: part=x: expected a fraction in (0, 1]");
        assert_eq!(err("t:size=1"), "policy t: unknown parameter 'size' (known: on, count, share, colour, label, sysfs, part)");
    }
}
