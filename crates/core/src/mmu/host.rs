//! The `host` machine: this CPU's TLB and cache geometry, read from CPUID and sysfs, with where
//! each number came from (`superpager machines host --explain`).
//!
//! Sources, in order: Intel CPUID leaf 0x18 (deterministic address translation parameters) and
//! leaf 4 (deterministic cache parameters); AMD CPUID Fn8000_0005/6 (L1/L2 TLBs and caches),
//! Fn8000_0019 (1GB TLBs) and Fn8000_001D (cache topology), as the Intel SDM vol. 2A (CPUID)
//! and the AMD APM vol. 3 (appendix E) define them; `/sys/devices/system/cpu/cpu0/cache` for
//! caches. A hypervisor may hide leaves (they read as zeros): what CPUID does not give keeps
//! the static preset's value (machines/host.toml, Zen 3's geometry), and says so.
//! Caches are reported only: the machine model has no data caches yet.
//!
//! CPUID is injected (`Cpuid`), so the decoders are tested on recorded register values.

use crate::units::Bytes;

/// One CPUID query: (leaf, subleaf) -> [eax, ebx, ecx, edx].
pub trait Cpuid {
    fn query(&self, leaf: u32, sub: u32) -> [u32; 4];
}

/// The CPU this runs on.
pub struct NativeCpuid;

impl Cpuid for NativeCpuid {
    #[cfg(target_arch = "x86_64")]
    fn query(&self, leaf: u32, sub: u32) -> [u32; 4] {
        // Leaves above the maximum return zeros or the highest basic leaf's values: the
        // callers check the maxima first.
        let r = std::arch::x86_64::__cpuid_count(leaf, sub);
        [r.eax, r.ebx, r.ecx, r.edx]
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn query(&self, _leaf: u32, _sub: u32) -> [u32; 4] {
        [0; 4]
    }
}

/// A TLB as CPUID describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlbGeometry {
    pub level: u32,
    /// "data", "instruction" or "unified".
    pub stream: &'static str,
    pub entries: u32,
    pub ways: u32,
    /// Page sizes among 4KiB, 2MiB, 1GiB (4MB, a 32-bit paging size, is dropped).
    pub page_sizes: Vec<&'static str>,
    pub source: String,
}

/// A cache as CPUID or sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheGeometry {
    pub level: u32,
    pub kind: String,
    pub bytes: u64,
    pub ways: u32,
    pub line: u32,
    pub sets: u32,
    pub source: String,
}

/// What was found, and the machine TOML built from it.
pub struct HostReport {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    pub model_name: String,
    pub tlbs: Vec<TlbGeometry>,
    pub caches: Vec<CacheGeometry>,
    pub notes: Vec<String>,
}

fn vendor(c: &dyn Cpuid) -> String {
    let r = c.query(0, 0);
    let mut b = Vec::with_capacity(12);
    for w in [r[1], r[3], r[2]] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    String::from_utf8_lossy(&b).trim_end_matches('\0').to_string()
}

fn model_name(c: &dyn Cpuid) -> String {
    if c.query(0x8000_0000, 0)[0] < 0x8000_0004 {
        return String::new();
    }
    let mut b = Vec::with_capacity(48);
    for leaf in 0x8000_0002..=0x8000_0004u32 {
        for w in c.query(leaf, 0) {
            b.extend_from_slice(&w.to_le_bytes());
        }
    }
    String::from_utf8_lossy(&b).trim_end_matches('\0').trim().to_string()
}

/// Family and model with the extended fields (Intel SDM vol. 2A, CPUID leaf 1, EAX).
fn family_model(c: &dyn Cpuid) -> (u32, u32) {
    let a = c.query(1, 0)[0];
    let base_family = (a >> 8) & 0xf;
    let family = if base_family == 0xf { base_family + ((a >> 20) & 0xff) } else { base_family };
    let model = if base_family == 0x6 || base_family == 0xf { ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4) } else { (a >> 4) & 0xf };
    (family, model)
}

/// Intel leaf 0x18: one TLB per subleaf with a valid type (EDX[4:0]).
pub fn intel_tlbs(c: &dyn Cpuid) -> Vec<TlbGeometry> {
    if c.query(0, 0)[0] < 0x18 {
        return Vec::new();
    }
    let max_sub = c.query(0x18, 0)[0];
    let mut out = Vec::new();
    for sub in 0..=max_sub.min(64) {
        let [_, ebx, ecx, edx] = c.query(0x18, sub);
        let stream = match edx & 0x1f {
            1 | 4 | 5 => "data", // data, load-only, store-only
            2 => "instruction",
            3 => "unified",
            _ => continue,
        };
        let level = (edx >> 5) & 7;
        let fully = edx >> 8 & 1 == 1;
        let ways = ebx >> 16;
        let sets = ecx;
        let entries = ways * sets;
        let mut sizes = Vec::new();
        if ebx & 1 != 0 {
            sizes.push("4KiB");
        }
        if ebx & 2 != 0 {
            sizes.push("2MiB");
        }
        if ebx & 8 != 0 {
            sizes.push("1GiB");
        }
        if entries == 0 || sizes.is_empty() {
            continue;
        }
        out.push(TlbGeometry {
            level,
            stream,
            entries,
            ways: if fully { entries } else { ways },
            page_sizes: sizes,
            source: format!("CPUID leaf 0x18 subleaf {sub}"),
        });
    }
    out
}

/// AMD L2 TLB and cache associativity codes (AMD APM vol. 3, CPUID Fn8000_0006); 0xF is full.
fn amd_l2_ways(code: u32, entries: u32) -> u32 {
    match code {
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 => 8,
        8 => 16,
        0xa => 32,
        0xb => 48,
        0xc => 64,
        0xd => 96,
        0xe => 128,
        0xf => entries,
        _ => 0,
    }
}

/// AMD Fn8000_0005 (L1), Fn8000_0006 (L2) and Fn8000_0019 (1GB) TLBs.
pub fn amd_tlbs(c: &dyn Cpuid) -> Vec<TlbGeometry> {
    let max = c.query(0x8000_0000, 0)[0];
    let mut out = Vec::new();
    let mut push = |level: u32, stream: &'static str, entries: u32, ways: u32, size: &'static str, src: &str| {
        if entries > 0 && ways > 0 && entries.is_multiple_of(ways) {
            out.push(TlbGeometry { level, stream, entries, ways, page_sizes: vec![size], source: src.to_string() });
        }
    };
    if max >= 0x8000_0005 {
        let [eax, ebx, _, _] = c.query(0x8000_0005, 0);
        // L1: associativity is the way count itself, 0xFF fully associative.
        let l1 = |assoc: u32, n: u32| if assoc == 0xff { n } else { assoc };
        let src = "CPUID Fn8000_0005";
        push(1, "data", ebx >> 16 & 0xff, l1(ebx >> 24, ebx >> 16 & 0xff), "4KiB", src);
        push(1, "instruction", ebx & 0xff, l1(ebx >> 8 & 0xff, ebx & 0xff), "4KiB", src);
        push(1, "data", eax >> 16 & 0xff, l1(eax >> 24, eax >> 16 & 0xff), "2MiB", src);
        push(1, "instruction", eax & 0xff, l1(eax >> 8 & 0xff, eax & 0xff), "2MiB", src);
    }
    if max >= 0x8000_0006 {
        let [eax, ebx, _, _] = c.query(0x8000_0006, 0);
        let src = "CPUID Fn8000_0006";
        let (de, ie) = (ebx >> 16 & 0xfff, ebx & 0xfff);
        push(2, "data", de, amd_l2_ways(ebx >> 28, de), "4KiB", src);
        push(2, "instruction", ie, amd_l2_ways(ebx >> 12 & 0xf, ie), "4KiB", src);
        let (de, ie) = (eax >> 16 & 0xfff, eax & 0xfff);
        push(2, "data", de, amd_l2_ways(eax >> 28, de), "2MiB", src);
        push(2, "instruction", ie, amd_l2_ways(eax >> 12 & 0xf, ie), "2MiB", src);
    }
    if max >= 0x8000_0019 {
        let [eax, ebx, _, _] = c.query(0x8000_0019, 0);
        let src = "CPUID Fn8000_0019";
        for (level, r) in [(1, eax), (2, ebx)] {
            let (de, ie) = (r >> 16 & 0xfff, r & 0xfff);
            push(level, "data", de, amd_l2_ways(r >> 28, de), "1GiB", src);
            push(level, "instruction", ie, amd_l2_ways(r >> 12 & 0xf, ie), "1GiB", src);
        }
    }
    out
}

/// Caches from Intel leaf 4 or AMD Fn8000_001D (the same layout).
pub fn cpuid_caches(c: &dyn Cpuid, leaf: u32) -> Vec<CacheGeometry> {
    let max = if leaf >= 0x8000_0000 { c.query(0x8000_0000, 0)[0] } else { c.query(0, 0)[0] };
    if max < leaf {
        return Vec::new();
    }
    let mut out = Vec::new();
    for sub in 0..16 {
        let [eax, ebx, ecx, _] = c.query(leaf, sub);
        let kind = match eax & 0x1f {
            0 => break,
            1 => "Data",
            2 => "Instruction",
            3 => "Unified",
            _ => continue,
        };
        let ways = (ebx >> 22) + 1;
        let parts = ((ebx >> 12) & 0x3ff) + 1;
        let line = (ebx & 0xfff) + 1;
        let sets = ecx + 1;
        out.push(CacheGeometry {
            level: (eax >> 5) & 7,
            kind: kind.to_string(),
            bytes: ways as u64 * parts as u64 * line as u64 * sets as u64,
            ways,
            line,
            sets,
            source: format!("CPUID leaf {leaf:#x} subleaf {sub}"),
        });
    }
    out
}

/// Caches from /sys/devices/system/cpu/cpu0/cache (any architecture Linux describes).
pub fn sysfs_caches(root: &std::path::Path) -> Vec<CacheGeometry> {
    let mut out = Vec::new();
    for i in 0..16 {
        let d = root.join(format!("index{i}"));
        let read = |f: &str| std::fs::read_to_string(d.join(f)).ok().map(|s| s.trim().to_string());
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else {
            break;
        };
        let num = |f: &str| read(f).and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
        out.push(CacheGeometry {
            level: level.parse().unwrap_or(0),
            kind,
            bytes: Bytes::parse(&size).map(|b| b.0).unwrap_or(0),
            ways: num("ways_of_associativity"),
            line: num("coherency_line_size"),
            sets: num("number_of_sets"),
            source: format!("{}", d.display()),
        });
    }
    out
}

/// Reads this machine.
pub fn detect(c: &dyn Cpuid, sysfs_cache: &std::path::Path) -> HostReport {
    let v = vendor(c);
    let (family, model) = family_model(c);
    let mut notes = Vec::new();
    let tlbs = match v.as_str() {
        "GenuineIntel" => intel_tlbs(c),
        "AuthenticAMD" | "HygonGenuine" => amd_tlbs(c),
        _ => Vec::new(),
    };
    if tlbs.is_empty() {
        notes.push(format!(
            "CPUID gives no TLB geometry on this {v} CPU ({}: leaves read as zeros, as a hypervisor may make them): the TLBs are the static preset's (Zen 3 geometry, an ESTIMATE)",
            if v == "GenuineIntel" { "leaf 0x18" } else { "Fn8000_0005/6/19" }
        ));
    }
    let mut caches = match v.as_str() {
        "GenuineIntel" => cpuid_caches(c, 4),
        "AuthenticAMD" | "HygonGenuine" => cpuid_caches(c, 0x8000_001d),
        _ => Vec::new(),
    };
    if caches.is_empty() {
        caches = sysfs_caches(sysfs_cache);
    }
    HostReport { vendor: v, family, model, model_name: model_name(c), tlbs, caches, notes }
}

impl HostReport {
    /// The `host` machine TOML: the static preset with the TLBs CPUID gave, when it gave any.
    pub fn machine_toml(&self, template: &str) -> String {
        let mut v: toml::Value = toml::from_str(template).expect("the host preset parses");
        let t = v.as_table_mut().expect("a table");
        let name = if self.model_name.is_empty() { format!("{} family {} model {}", self.vendor, self.family, self.model) } else { self.model_name.clone() };
        let how = if self.tlbs.is_empty() { "TLBs: static Zen 3 geometry (CPUID gives none here)" } else { "TLBs from CPUID" };
        t.insert("description".into(), toml::Value::String(format!("this machine: {name}; {how}")));
        if !self.tlbs.is_empty() {
            let mut list = Vec::new();
            for (i, g) in self.tlbs.iter().enumerate() {
                let mut e = toml::map::Map::new();
                let tag = match g.stream {
                    "data" => "d",
                    "instruction" => "i",
                    _ => "",
                };
                e.insert("name".into(), toml::Value::String(format!("L{}{tag}-{}-{i}", g.level, g.page_sizes.join("/"))));
                e.insert("level".into(), toml::Value::Integer(g.level as i64));
                e.insert("stream".into(), toml::Value::String(g.stream.to_string()));
                e.insert("entries".into(), toml::Value::Integer(g.entries as i64));
                e.insert("ways".into(), toml::Value::Integer(g.ways as i64));
                e.insert("page_sizes".into(), toml::Value::Array(g.page_sizes.iter().map(|s| toml::Value::String(s.to_string())).collect()));
                if g.level >= 2 {
                    e.insert("hit_cycles".into(), toml::Value::Integer(7)); // ESTIMATE, as the static preset
                }
                list.push(toml::Value::Table(e));
            }
            t.insert("tlb".into(), toml::Value::Array(list));
        }
        toml::to_string(&v).expect("serialises")
    }

    /// One line per number: what, value, source.
    pub fn explain(&self) -> Vec<(String, String, String)> {
        let mut out = vec![(
            "cpu".to_string(),
            format!("{} ({}, family {}, model {})", self.model_name, self.vendor, self.family, self.model),
            "CPUID leaves 0, 1, 0x80000002-4".to_string(),
        )];
        for g in &self.tlbs {
            out.push((format!("L{} {} TLB {}", g.level, g.stream, g.page_sizes.join("/")), format!("{} entries, {}-way", g.entries, g.ways), g.source.clone()));
        }
        for c in &self.caches {
            out.push((
                format!("L{} {} cache", c.level, c.kind.to_lowercase()),
                format!("{}, {}-way, {}-byte lines, {} sets", Bytes(c.bytes), c.ways, c.line, c.sets),
                c.source.clone(),
            ));
        }
        out
    }
}
