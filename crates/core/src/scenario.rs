//! Scenarios: a TOML file that composes a run: physical memory, a fragmentation prelude, the
//! processes (a trace each, with a start time), and sampling. docs/SCENARIOS.md is the
//! reference; every error names the file, the line and the key.
//!
//! ```toml
//! memory = "8GiB"
//! seed = 7
//! machine = "skylake"              # default when the command line names none
//! policy = "linux-thp:defrag=never"
//! sample_every = 1000000           # accesses between time-series samples
//!
//! [[prelude]]
//! kind = "trident"                 # or "wired", "webserver"
//! reads = 200000
//!
//! [[process]]
//! trace = "gups.spt"               # relative to this file
//! start = "0ms"
//!
//! [[process]]
//! gen = "gups"                     # or a synthetic workload, made on first use
//! size = "1GiB"
//! accesses = "4M"
//! ```

use crate::error::{Error, Result};
use crate::os::prelude::Prelude;
use crate::trace::gen::{self, GenParams};
use crate::units::Bytes;
use serde::Deserialize;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// The trace to run (generated first if the scenario asked for a synthetic workload).
    pub trace: PathBuf,
    pub gen: Option<GenParams>,
    /// When the process starts, in milliseconds of simulated time.
    pub start_ms: f64,
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub file: String,
    pub memory: Bytes,
    pub seed: u64,
    pub machine: Option<String>,
    pub policy: Option<String>,
    pub sample_every: Option<u64>,
    /// Swap space (0: none) and the replacement policy that chooses what to swap out.
    pub swap: Bytes,
    pub replacement: String,
    pub prelude: Vec<Prelude>,
    pub processes: Vec<ProcessSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    /// One line for `superpager scenarios`.
    #[serde(default)]
    #[allow(dead_code)]
    description: String,
    memory: Spanned<String>,
    #[serde(default)]
    seed: u64,
    machine: Option<String>,
    policy: Option<String>,
    sample_every: Option<Spanned<toml::Value>>,
    swap: Option<Spanned<String>>,
    replacement: Option<Spanned<String>>,
    #[serde(default)]
    prelude: Vec<Spanned<toml::Table>>,
    #[serde(default)]
    process: Vec<Spanned<toml::Table>>,
}

/// Line number (1-based) of a byte offset.
fn line_of(src: &str, at: usize) -> usize {
    src[..at.min(src.len())].matches('\n').count() + 1
}

struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, key: &str, msg: impl Into<String>) -> Error {
        Error::config(self.file, key, format!("line {}: {}", line_of(self.src, span.start), msg.into()))
    }
}

/// A count with an optional K/M/G suffix ("4M" = 4,000,000).
fn parse_count(v: &toml::Value) -> std::result::Result<u64, String> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        toml::Value::String(s) => {
            let t = s.trim();
            let (num, mul) = match t.chars().last() {
                Some('K') | Some('k') => (&t[..t.len() - 1], 1e3),
                Some('M') => (&t[..t.len() - 1], 1e6),
                Some('G') => (&t[..t.len() - 1], 1e9),
                _ => (t, 1.0),
            };
            num.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| *x >= 0.0)
                .map(|x| (x * mul) as u64)
                .ok_or_else(|| format!("'{s}' is not a count (e.g. 4000000 or \"4M\")"))
        }
        o => Err(format!("{o} is not a count")),
    }
}

/// A duration: a number of milliseconds, or a string with a unit ("10ms", "2s", "500us").
fn parse_ms(v: &toml::Value) -> std::result::Result<f64, String> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as f64),
        toml::Value::Float(f) if *f >= 0.0 && f.is_finite() => Ok(*f),
        toml::Value::String(s) => {
            let t = s.trim();
            let (num, mul) = if let Some(n) = t.strip_suffix("ms") {
                (n, 1.0)
            } else if let Some(n) = t.strip_suffix("us") {
                (n, 1e-3)
            } else if let Some(n) = t.strip_suffix('s') {
                (n, 1e3)
            } else {
                (t, 1.0)
            };
            num.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| *x >= 0.0 && x.is_finite())
                .map(|x| x * mul)
                .ok_or_else(|| format!("'{s}' is not a duration (e.g. \"10ms\", \"2s\")"))
        }
        o => Err(format!("{o} is not a duration")),
    }
}

/// Preludes may do at most this many reads (or requests) per frame of memory.
const MAX_PASSES_OVER_MEMORY: u64 = 16;

/// A Zipf exponent: finite and from 0 (uniform) to 100 (beyond which one element takes all).
fn check_alpha(r: &TableReader, alpha: f64) -> Result<()> {
    if alpha.is_finite() && (0.0..=100.0).contains(&alpha) {
        Ok(())
    } else {
        Err(r.err("alpha", format!("{alpha} is not a finite number from 0 to 100")))
    }
}

fn bytes_of(v: &toml::Value) -> std::result::Result<u64, String> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        toml::Value::String(s) => Bytes::parse(s).map(|b| b.0),
        o => Err(format!("{o} is not a size (e.g. \"4KiB\")")),
    }
}

/// Reads the keys of one table, reporting unknown keys and bad values with their line.
struct TableReader<'a> {
    ctx: &'a Ctx<'a>,
    table: &'a toml::Table,
    span: Range<usize>,
    what: String,
}

impl TableReader<'_> {
    /// The line of `key` inside the table (found by text search; falls back to the table).
    fn key_span(&self, key: &str) -> Range<usize> {
        let body = &self.ctx.src[self.span.clone()];
        for (off, line) in body.split_inclusive('\n').scan(0usize, |o, l| {
            let at = *o;
            *o += l.len();
            Some((at, l))
        }) {
            if line.trim_start().split('=').next().map(str::trim) == Some(key) {
                return self.span.start + off..self.span.start + off + line.len();
            }
        }
        self.span.clone()
    }
    fn err(&self, key: &str, msg: impl Into<String>) -> Error {
        self.ctx.err(self.key_span(key), &format!("{}.{key}", self.what), msg)
    }
    fn check_keys(&self, known: &[&str]) -> Result<()> {
        for k in self.table.keys() {
            if !known.contains(&k.as_str()) {
                return Err(self.err(k, format!("unknown key (known: {})", known.join(", "))));
            }
        }
        Ok(())
    }
    fn get<T>(&self, key: &str, f: impl Fn(&toml::Value) -> std::result::Result<T, String>) -> Result<Option<T>> {
        match self.table.get(key) {
            None => Ok(None),
            Some(v) => f(v).map(Some).map_err(|m| self.err(key, m)),
        }
    }
    fn string(&self, key: &str) -> Result<Option<String>> {
        self.get(key, |v| v.as_str().map(str::to_string).ok_or_else(|| format!("expected a string, got {v}")))
    }
    fn float(&self, key: &str) -> Result<Option<f64>> {
        self.get(key, |v| match v {
            toml::Value::Float(f) => Ok(*f),
            toml::Value::Integer(i) => Ok(*i as f64),
            o => Err(format!("expected a number, got {o}")),
        })
    }
}

impl Scenario {
    pub fn load(path: &str) -> Result<Scenario> {
        let src = std::fs::read_to_string(path).map_err(|e| Error::io(path, &e))?;
        Scenario::parse(&src, path)
    }

    pub fn parse(src: &str, file: &str) -> Result<Scenario> {
        let ctx = Ctx { file, src };
        let f: ScenarioFile = toml::from_str(src).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let line_text = src[..span.start.min(src.len())].rsplit('\n').next().unwrap_or("");
            let key = src[span.start.min(src.len())..].split('\n').next().unwrap_or("");
            let key = format!("{line_text}{key}").split('=').next().unwrap_or("?").trim().trim_matches(['[', ']']).to_string();
            ctx.err(span, if key.is_empty() { "?" } else { &key }, e.message().replace('\n', " "))
        })?;
        let memory = Bytes::parse(f.memory.get_ref()).map_err(|m| ctx.err(f.memory.span(), "memory", m))?;
        if memory.0 < 64 << 20 {
            return Err(ctx.err(f.memory.span(), "memory", "a scenario needs at least 64MiB"));
        }
        let sample_every = match &f.sample_every {
            None => None,
            Some(v) => Some(parse_count(v.get_ref()).map_err(|m| ctx.err(v.span(), "sample_every", m))?),
        };
        let swap = match &f.swap {
            None => Bytes(0),
            Some(v) => Bytes::parse(v.get_ref()).map_err(|m| ctx.err(v.span(), "swap", m))?,
        };
        let replacement = match &f.replacement {
            None => "clock".to_string(),
            Some(v) => {
                crate::replacement::build(v.get_ref()).map_err(|e| ctx.err(v.span(), "replacement", e.to_string()))?;
                v.get_ref().clone()
            }
        };
        let dir = Path::new(file).parent().map(Path::to_path_buf).unwrap_or_default();
        let frames = memory.0 >> 12;
        let mut prelude = Vec::new();
        for (i, t) in f.prelude.iter().enumerate() {
            let r = TableReader { ctx: &ctx, table: t.get_ref(), span: t.span(), what: format!("prelude[{i}]") };
            let kind = r.string("kind")?.ok_or_else(|| r.err("kind", "missing: trident, wired or webserver"))?;
            prelude.push(match kind.as_str() {
                "trident" => {
                    r.check_keys(&["kind", "reads", "read_size"])?;
                    let reads = r.get("reads", parse_count)?.unwrap_or(frames / 8);
                    let read_size = r.get("read_size", bytes_of)?.unwrap_or(4096);
                    // More random reads than this leave memory no more scrambled: each cached
                    // page has been re-read many times over.
                    if reads > MAX_PASSES_OVER_MEMORY * frames {
                        return Err(r.err(
                            "reads",
                            format!("{reads} reads is over {MAX_PASSES_OVER_MEMORY} per frame of the scenario's memory ({frames} frames): more change nothing"),
                        ));
                    }
                    if read_size == 0 || read_size > memory.0 / 2 {
                        return Err(r.err("read_size", format!("{read_size} bytes: must be from 1 byte to half of memory (each file is half of memory)")));
                    }
                    Prelude::Trident { reads, read_size }
                }
                "wired" => {
                    r.check_keys(&["kind", "count", "fraction", "below"])?;
                    let count = match (r.get("count", parse_count)?, r.float("fraction")?) {
                        (Some(c), None) => c,
                        (None, Some(x)) if (0.0..=1.0).contains(&x) => (x * frames as f64) as u64,
                        (None, Some(x)) => return Err(r.err("fraction", format!("{x} is not between 0 and 1"))),
                        (None, None) => frames / 1000,
                        (Some(_), Some(_)) => return Err(r.err("fraction", "give count or fraction, not both")),
                    };
                    let below = match r.get("below", bytes_of)? {
                        None => frames,
                        Some(b) if b >= 4096 && b <= memory.0 => b / (memory.0 / frames),
                        Some(b) => return Err(r.err("below", format!("{b} bytes: must be from 4KiB to the scenario's memory ({})", memory))),
                    };
                    if count > below {
                        return Err(r.err("count", format!("{count} wired frames do not fit in the {below} frames they may take")));
                    }
                    Prelude::Wired { count, below }
                }
                "webserver" => {
                    r.check_keys(&["kind", "files", "min_size", "max_size", "requests", "alpha"])?;
                    let w = Prelude::Webserver {
                        files: r.get("files", parse_count)?.unwrap_or(20_000).max(1),
                        min_size: r.get("min_size", bytes_of)?.unwrap_or(4096),
                        max_size: r.get("max_size", bytes_of)?.unwrap_or(1 << 20),
                        requests: r.get("requests", parse_count)?.unwrap_or(100_000),
                        alpha: r.float("alpha")?.unwrap_or(0.9),
                    };
                    let Prelude::Webserver { files, min_size, max_size, requests, alpha } = w else { unreachable!() };
                    if files > frames {
                        return Err(r.err("files", format!("{files} files is more than the scenario's {frames} frames could ever cache")));
                    }
                    if min_size == 0 || min_size > max_size || max_size > memory.0 {
                        return Err(r.err("max_size", format!("sizes {min_size}..{max_size} bytes: need 1 <= min_size <= max_size <= memory")));
                    }
                    if requests > MAX_PASSES_OVER_MEMORY * frames {
                        return Err(r.err(
                            "requests",
                            format!("{requests} requests is over {MAX_PASSES_OVER_MEMORY} per frame of the scenario's memory: more change nothing"),
                        ));
                    }
                    check_alpha(&r, alpha)?;
                    w
                }
                o => return Err(r.err("kind", format!("'{o}' is not a prelude (trident, wired, webserver)"))),
            });
        }
        let mut processes = Vec::new();
        for (i, t) in f.process.iter().enumerate() {
            let r = TableReader { ctx: &ctx, table: t.get_ref(), span: t.span(), what: format!("process[{i}]") };
            r.check_keys(&["trace", "gen", "start", "size", "accesses", "seed", "stride", "alpha", "passes"])?;
            let start_ms = r.get("start", parse_ms)?.unwrap_or(0.0);
            let (trace, gen) = match (r.string("trace")?, r.string("gen")?) {
                (Some(t), None) => {
                    let p = dir.join(&t);
                    if !p.exists() {
                        return Err(r.err("trace", format!("{}: no such file", p.display())));
                    }
                    (p, None)
                }
                (None, Some(kind)) => {
                    if !gen::KINDS.iter().any(|(k, _)| *k == kind) {
                        let names: Vec<&str> = gen::KINDS.iter().map(|(k, _)| *k).collect();
                        return Err(r.err("gen", format!("'{kind}' is not a workload ({})", names.join(", "))));
                    }
                    if let Some(a) = r.float("alpha")? {
                        check_alpha(&r, a)?;
                    }
                    let p = GenParams {
                        kind: kind.clone(),
                        size: r.get("size", bytes_of)?.unwrap_or(64 << 20),
                        accesses: r.get("accesses", parse_count)?.unwrap_or(0),
                        seed: r.get("seed", parse_count)?.unwrap_or(1),
                        stride: r.get("stride", bytes_of)?.unwrap_or(4096),
                        elem: 8,
                        alpha: r.float("alpha")?.unwrap_or(0.99),
                        base: 0x7f00_0000_0000,
                        passes: r.get("passes", parse_count)?.unwrap_or(1),
                        warm: false,
                    };
                    p.check().map_err(|e| r.err("gen", e.to_string().trim_start_matches("usage: ").to_string()))?;
                    let name = format!("superpager-gen-{}-{}-{}-{}-{}-{}.spt", p.kind, p.size, p.accesses, p.seed, p.alpha, p.passes);
                    (std::env::temp_dir().join(name), Some(p))
                }
                (Some(_), Some(_)) => return Err(r.err("gen", "give trace or gen, not both")),
                (None, None) => return Err(r.err("trace", "missing: each [[process]] needs trace = \"FILE.spt\" or gen = \"KIND\"")),
            };
            processes.push(ProcessSpec { trace, gen, start_ms });
        }
        if processes.is_empty() {
            return Err(ctx.err(0..0, "process", "a scenario needs at least one [[process]]"));
        }
        Ok(Scenario { file: file.to_string(), memory, seed: f.seed, machine: f.machine, policy: f.policy, sample_every, swap, replacement, prelude, processes })
    }
}

/// Make the synthetic traces a scenario asks for (once: an existing file is reused).
pub fn ensure_traces(sc: &Scenario, progress: &mut dyn FnMut(&str, f64)) -> Result<()> {
    for p in &sc.processes {
        let Some(g) = &p.gen else { continue };
        if p.trace.exists() {
            continue;
        }
        let out = p.trace.to_string_lossy().to_string();
        // Unique per call, not only per process: two threads (parallel tests, or runs) making the
        // same trace must not write one temporary file and rename it from under each other.
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = format!("{out}.partial.{}.{n}", std::process::id());
        let mut prov = crate::trace::Provenance::new();
        prov.insert("format".into(), "superpager .spt v2".into());
        prov.insert("producer".into(), format!("superpager {}", env!("CARGO_PKG_VERSION")).into());
        prov.insert("source".into(), format!("superpager gen {} (scenario {})", g.kind, sc.file).into());
        let mut w = crate::trace::spt::SptWriter::create(&tmp, &prov)?;
        let label = format!("generating {}", g.kind);
        let r = gen::generate(g, &mut w, &mut |f| progress(&label, f));
        if let Err(e) = r {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        w.finish()?;
        std::fs::rename(&tmp, &out).map_err(|e| Error::io(&out, &e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_of(src: &str) -> String {
        Scenario::parse(src, "s.toml").unwrap_err().to_string()
    }

    #[test]
    fn parses_a_full_scenario() {
        let s = Scenario::parse(
            "memory = \"8GiB\"\nseed = 3\n[[prelude]]\nkind = \"wired\"\nfraction = 0.01\n[[process]]\ngen = \"gups\"\nsize = \"1GiB\"\naccesses = \"4M\"\nstart = \"5ms\"\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.memory.0, 8 << 30);
        assert_eq!(s.prelude, vec![Prelude::Wired { count: (0.01 * (2u64 << 20) as f64) as u64, below: 2 << 20 }]);
        assert_eq!(s.processes[0].start_ms, 5.0);
        assert_eq!(s.processes[0].gen.as_ref().unwrap().accesses, 4_000_000);
        let low =
            Scenario::parse("memory = \"8GiB\"\n[[prelude]]\nkind = \"wired\"\ncount = 64\nbelow = \"1GiB\"\n[[process]]\ngen = \"gups\"\n", "s.toml").unwrap();
        assert_eq!(low.prelude, vec![Prelude::Wired { count: 64, below: 1 << 18 }]);
        let e = err_of("memory = \"8GiB\"\n[[prelude]]\nkind = \"wired\"\nbelow = \"16GiB\"\n[[process]]\ngen = \"gups\"\n");
        assert!(e.contains("prelude[0].below") && e.contains("line 4"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = err_of("memory = \"8GB!\"\n[[process]]\ngen = \"gups\"\n");
        assert!(e.starts_with("s.toml: key 'memory': line 1:"), "{e}");
        let e = err_of("memory = \"8GiB\"\n[[process]]\ngen = \"gups\"\nsize = \"1GiB\"\nbogus = 1\n");
        assert!(e.contains("key 'process[0].bogus'") && e.contains("line 5"), "{e}");
        let e = err_of("memory = \"8GiB\"\n[[prelude]]\nkind = \"quake\"\n[[process]]\ngen = \"gups\"\n");
        assert!(e.contains("prelude[0].kind") && e.contains("line 3") && e.contains("trident"), "{e}");
        let e = err_of("memory = \"8GiB\"\ncolour = 3\n");
        assert!(e.contains("colour") && e.contains("line 2"), "{e}");
        let e = err_of("memory = \"8GiB\"\n[[process]]\nstart = \"soon\"\ngen = \"gups\"\n");
        assert!(e.contains("process[0].start") && e.contains("line 3"), "{e}");
        let e = err_of("memory = \"8GiB\"\n");
        assert!(e.contains("'process'"), "{e}");
    }
}
