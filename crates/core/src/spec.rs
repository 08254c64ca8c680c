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

/// Reject parameters a part (`kind` `name`) does not know.
pub fn check_known(kind: &str, name: &str, params: &Params, known: &[&str]) -> Result<()> {
    for k in params.keys() {
        if !known.contains(&k.as_str()) {
            return Err(Error::usage(format!(
                "{kind} {name}: unknown parameter '{k}' (known: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )));
        }
    }
    Ok(())
}
