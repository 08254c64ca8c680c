//! The architecture as a test: the core's top-level modules depend on each other without a
//! cycle, in the direction docs/ARCHITECTURE.md draws. Dependencies are read from the source:
//! every `crate::MODULE` a module's files name outside their `#[cfg(test)]` parts.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level module -> the top-level modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let deps = g.entry(top.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if name != top && name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                deps.insert(name);
            }
        }
    }
    g
}

#[test]
fn modules_form_no_cycle() {
    let g = graph();
    // Kahn's algorithm: a module leaves once everything it names has left.
    let mut left: BTreeMap<&str, BTreeSet<&str>> =
        g.iter().map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).filter(|d| g.contains_key(*d)).collect())).collect();
    while let Some(free) = left.iter().find(|(_, d)| d.is_empty()).map(|(k, _)| *k) {
        left.remove(free);
        for d in left.values_mut() {
            d.remove(free);
        }
    }
    assert!(left.is_empty(), "these modules depend on each other in a cycle: {left:?}");
}

#[test]
fn layers_point_one_way() {
    let g = graph();
    let must_not = [
        // The OS model is mechanism: it knows nothing of policies, the engine or results.
        ("os", ["policy", "engine", "stats", "sim"].as_slice()),
        ("mmu", &["os", "policy", "engine", "stats", "sim"]),
        ("replacement", &["os", "policy", "engine", "stats", "sim"]),
        // Policies decide through the OS's mechanisms; they never drive an engine.
        ("policy", &["engine", "stats", "sim", "experiment"]),
        ("stats", &["engine", "sim"]),
        ("trace", &["mmu", "os", "policy", "engine", "stats", "sim"]),
        ("units", &["mmu", "os", "policy", "engine", "stats", "sim", "trace"]),
    ];
    for (m, banned) in must_not {
        let deps = g.get(m).unwrap_or_else(|| panic!("no module {m}"));
        for b in banned {
            assert!(!deps.contains(*b), "{m} depends on {b}; docs/ARCHITECTURE.md says it must not");
        }
    }
}

/// Inside the OS model, the parts (`os/` files and folders; `os/mod.rs`, where `Os` itself is
/// defined, excepted) name each other without a cycle: in particular the frame allocator and
/// the reservation table are one part, `os/frames/`, which names no other part but `zeroed`.
#[test]
fn os_parts_form_no_cycle() {
    let os = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/os");
    let mut files = Vec::new();
    rust_files(&os, &mut files);
    let part = |rel: &Path| rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_string();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let parts: BTreeSet<String> = files.iter().map(|f| part(f.strip_prefix(&os).unwrap())).filter(|p| p != "mod").collect();
    for f in &files {
        let me = part(f.strip_prefix(&os).unwrap());
        if me == "mod" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let deps = g.entry(me.clone()).or_default();
        for p in &parts {
            let named = [format!("super::{p}"), format!("crate::os::{p}"), format!("super::{{{p}")];
            if *p != me && named.iter().any(|n| code.contains(n.as_str())) {
                deps.insert(p.clone());
            }
        }
    }
    assert_eq!(g["frames"], BTreeSet::from(["zeroed".to_string()]), "os/frames/ names other parts");
    let mut left = g.clone();
    while let Some(free) = left.iter().find(|(_, d)| d.is_empty()).map(|(k, _)| k.clone()) {
        left.remove(&free);
        for d in left.values_mut() {
            d.remove(&free);
        }
    }
    assert!(left.is_empty(), "these parts of the OS model name each other in a cycle: {left:?}");
}

/// Policies change the OS only through its methods (mechanisms), never by assigning to its
/// fields: every policy source is searched for an assignment to a path through `sys.os` or a
/// local `os`.
#[test]
fn policies_write_no_os_field() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for start in ["sys.os.", " os."] {
                let Some(i) = code.find(start) else { continue };
                let rest = &code[i + start.len()..];
                // The path (fields, indices), then an assignment operator (not ==, <=, >=, =>).
                let path_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || "_.[]".contains(c))).unwrap_or(rest.len());
                let after = rest[path_end..].trim_start();
                let assigns = ["= ", "+= ", "-= ", "|= ", "&= "].iter().any(|op| after.starts_with(op));
                if assigns && !rest[..path_end].contains('(') {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "policies assign to OS fields (use an Os method):\n{}", found.join("\n"));
}
