//! A calibration file with a bad value is never read silently (`read_calibration`): a latency
//! the model needs that is missing or of the wrong kind drops the whole calibration with a note
//! naming the key; a probe's table that does not read is left out with a note naming the table;
//! a good file reads with no note.

use superpager_core::mmu::host::{calibrated_toml, read_calibration, Calibration, CalibrationInput, FrameProbe, NearMemory};

mod common;
use common::CALIBRATION_TEMPLATE as TEMPLATE;

/// A calibration with two probes, as calibrate writes it.
fn good() -> String {
    let input = CalibrationInput {
        near_memory: Some(NearMemory { footprint: 8 << 20, ns: 143.4, cycles: 521.6 }),
        frames: Some(FrameProbe { footprint: 256 << 20, new_runs: vec![0.4, 0.4, 0.4], scatter: 0.4, groups_8: vec![], groups_512: vec![] }),
        ..common::calibration_input()
    };
    calibrated_toml(TEMPLATE, &input).unwrap()
}

/// `text` read as `host` reads it: what it gave and the notes.
fn read(text: &str, tag: &str) -> (Option<Calibration>, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("sp-bad-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("host.toml");
    std::fs::write(&path, text).unwrap();
    let mut notes = Vec::new();
    let cal = read_calibration(&path, "Test CPU", &mut notes);
    std::fs::remove_dir_all(&dir).unwrap();
    (cal, notes)
}

/// Where the first line starting `key =` inside `[table]` is in `text`: its start and its end
/// (the newline).
fn key_line(text: &str, table: &str, key: &str) -> (usize, usize) {
    let start = text.find(&format!("[{table}]\n")).unwrap_or_else(|| panic!("no [{table}] in\n{text}"));
    let at = start + text[start..].find(&format!("\n{key} = ")).unwrap_or_else(|| panic!("no {key} in [{table}]")) + 1;
    (at, at + text[at..].find('\n').unwrap())
}

/// `good()` with that line replaced by `key = value`.
fn with(table: &str, key: &str, value: &str) -> String {
    let text = good();
    let (at, end) = key_line(&text, table, key);
    format!("{}{key} = {value}{}", &text[..at], &text[end..])
}

/// `good()` without that line.
fn without(table: &str, key: &str) -> String {
    let text = good();
    let (at, end) = key_line(&text, table, key);
    format!("{}{}", &text[..at], &text[end + 1..])
}

#[test]
fn a_good_file_reads_with_its_probes_and_no_note() {
    let (cal, notes) = read(&good(), "good");
    let cal = cal.expect("read");
    assert!(notes.is_empty(), "{notes:?}");
    assert!(cal.near_memory.is_some() && cal.frames.is_some());
    assert_eq!(cal.dram_cycles, 500.0);
}

#[test]
fn a_latency_of_the_wrong_kind_drops_the_calibration_naming_its_key() {
    for (table, key, value, named) in [
        ("cache", "dram_cycles", "\"x\"", "cache.dram_cycles is missing or not a number"),
        ("cost", "clock_ghz", "\"fast\"", "cost.clock_ghz is not a positive number"),
        ("cost", "clock_ghz", "-2.0", "cost.clock_ghz is not a positive number"),
    ] {
        let (cal, notes) = read(&with(table, key, value), key);
        assert!(cal.is_none(), "{key} = {value} was read");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains(named) && notes[0].contains("host.toml") && notes[0].contains("ESTIMATEs"), "{}", notes[0]);
    }
    let text = good().replacen("cycles = 4.0", "cycles = \"four\"", 1);
    let (cal, notes) = read(&text, "level");
    assert!(cal.is_none());
    assert!(notes[0].contains("cache.levels[0].cycles is not a number"), "{notes:?}");
}

#[test]
fn a_probe_that_does_not_read_is_left_out_with_a_note_naming_its_table() {
    let (cal, notes) = read(&with("calibration.frames", "scatter", "7"), "frames");
    let cal = cal.expect("the latencies still read");
    assert!(cal.frames.is_none(), "a scatter of 7 was taken");
    assert!(cal.near_memory.is_some(), "the other probe stays");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("[calibration.frames] not read: scatter = 7 is of the wrong kind or out of its range"), "{}", notes[0]);
    assert!(notes[0].contains("goes on without that probe"), "{}", notes[0]);
    let (cal, notes) = read(&with("calibration.near_memory", "ns", "\"slow\""), "near");
    assert!(cal.expect("read").near_memory.is_none());
    assert!(notes[0].contains("[calibration.near_memory] not read: ns = \"slow\" is of the wrong kind"), "{notes:?}");
}

#[test]
fn the_note_names_a_missing_key_a_check_across_keys_or_a_value_that_is_not_a_table() {
    let (cal, notes) = read(&without("calibration.near_memory", "footprint"), "missing");
    assert!(cal.expect("read").near_memory.is_none());
    assert!(notes[0].contains("[calibration.near_memory] not read: footprint is missing"), "{notes:?}");

    let (cal, notes) = read(&with("calibration.near_memory", "cycles", "-1.0"), "across");
    assert!(cal.expect("read").near_memory.is_none());
    assert!(notes[0].contains("[calibration.near_memory] not read: ns and cycles are not both above 0"), "{notes:?}");

    // The frames' table replaced by a number under [calibration].
    let text = good();
    let start = text.find("[calibration.frames]\n").expect("the frames' table");
    let end = text[start + 1..].find("\n[").map_or(text.len(), |e| start + 1 + e + 1);
    let rest = format!("{}{}", &text[..start], &text[end..]);
    let at = rest.find("[calibration]\n").expect("[calibration]") + "[calibration]\n".len();
    let (cal, notes) = read(&format!("{}frames = 3\n{}", &rest[..at], &rest[at..]), "number");
    assert!(cal.expect("read").frames.is_none());
    assert!(notes[0].contains("[calibration.frames] not read: it is not a table of keys"), "{notes:?}");
}

#[test]
fn a_file_without_a_calibration_table_says_so() {
    let (cal, notes) = read(TEMPLATE, "none");
    assert!(cal.is_none());
    assert!(notes[0].contains("no [calibration] table"), "{notes:?}");
}
