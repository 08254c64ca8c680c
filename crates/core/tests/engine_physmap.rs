//! The physical-memory map (os/physmap.rs): a cell per aligned region, each with one state,
//! kept every `map_every` accesses for reports.
mod common;
use superpager_core::engine::EngineConfig;
use superpager_core::stats::Results;

const SCENARIO: &str = r#"
memory = "1GiB"
seed = 1
machine = "skylake"

[[process]]
gen = "gups"
size = "256MiB"
accesses = "100K"
"#;

fn run(policy: &str, map_every: u64, region: Option<u32>) -> Results {
    common::run_scenario(
        SCENARIO,
        "physmap.toml",
        "skylake",
        policy,
        EngineConfig { validate: true, map_every, map_region_shift: region, ..Default::default() },
    )
}

fn count(cells: &str, code: u8) -> usize {
    cells.bytes().filter(|&b| b == b'0' + code).count()
}

#[test]
fn superpage_cells_match_the_mapped_2mb_pages_and_base_pages_make_none() {
    let r = run("fixed:2MiB", 50_000, Some(21));
    let map = r.map.as_ref().expect("a map was asked for");
    assert_eq!(map.region_bytes, 2 << 20);
    assert_eq!(map.legend, ["free", "partly used", "reserved", "unmovable", "superpage 2MiB", "superpage 1GiB"]);
    // 200K accesses (GUPS: a load and a store per update), a frame every 50K: four, the last at the end.
    assert_eq!(map.frames.len(), 4);
    assert!(map.frames.windows(2).all(|w| w[0].accesses < w[1].accesses));
    let last = &map.frames.last().unwrap().cells;
    assert_eq!(last.len(), 512, "1GiB in 2MiB cells");
    // Each 2MB page is one aligned buddy block: exactly one cell.
    let pages = r.counters["footprint.bytes.2MiB"] / (2 << 20);
    assert!(pages > 0);
    assert_eq!(count(last, 4) as u64, pages);
    // The kernel's boot reservation sits in low memory: unmovable cells.
    assert!(count(last, 3) > 0);

    let b = run("base", 50_000, Some(21));
    let last = &b.map.as_ref().unwrap().frames.last().unwrap().cells;
    assert_eq!(count(last, 4), 0);
    assert!(count(last, 1) > 0, "base pages make partly used cells");
}

#[test]
fn reservations_show_as_reserved_and_default_cells_are_the_largest_page() {
    let r = run("navarro", 0, Some(21));
    let map = r.map.as_ref();
    assert!(map.is_none(), "no map unless asked");
    let r = run("navarro", 1 << 40, Some(21));
    // Only the frame at the exit (the interval was never reached).
    let frames = &r.map.as_ref().unwrap().frames;
    assert_eq!(frames.len(), 1);
    let cells = &frames[0].cells;
    // GUPS populates reservations partly over 100K updates: some stay reservations.
    assert!(count(cells, 2) > 0, "{cells}");

    let r = run("base", 1 << 40, None);
    let map = r.map.as_ref().unwrap();
    assert_eq!(map.region_bytes, 1 << 30, "skylake's largest page");
    assert_eq!(map.frames[0].cells.len(), 1);
}
