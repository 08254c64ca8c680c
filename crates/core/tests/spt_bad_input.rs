//! Bad traces give one-line errors naming the file and byte offset, never a panic.
mod common;
use common::*;
use superpager_core::trace::*;
use superpager_core::Error;

fn good_file(name: &str) -> (String, Vec<u8>) {
    let p = tmp(name);
    let recs: Vec<Rec> = std::iter::once(Rec::E(Event::Context { pid: 1, tid: 1 }))
        .chain((0..3000u64).map(|i| Rec::A(Access::new(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20 << 12, AccessKind::Load, 8))))
        .collect();
    write(&p, &recs, 1000, true);
    let bytes = std::fs::read(&p).unwrap();
    (p, bytes)
}

fn err_of(path: &str) -> Error {
    match read_all(path) {
        Ok(_) => panic!("{path}: expected an error"),
        Err(e) => e,
    }
}

fn assert_trace_error(e: &Error, path: &str, needle: &str) {
    let s = e.to_string();
    assert!(matches!(e, Error::Trace { .. }), "{s}");
    assert!(s.starts_with(path), "{s}");
    assert!(s.contains("byte "), "{s}");
    assert!(s.contains(needle), "expected '{needle}' in: {s}");
    assert!(!s.contains('\n'));
}

#[test]
fn empty_file() {
    let p = tmp("empty.spt");
    std::fs::write(&p, b"").unwrap();
    assert_trace_error(&err_of(&p), &p, "empty file");
}

#[test]
fn wrong_format_is_named() {
    let p = tmp("lackey.txt");
    std::fs::write(&p, b"==123== Lackey\nI  04010173,3\n L 7ff000ab8,8\n").unwrap();
    assert_trace_error(&err_of(&p), &p, "lackey");
    let p = tmp("other.bin");
    std::fs::write(&p, b"PK\x03\x04 zip file here").unwrap();
    assert_trace_error(&err_of(&p), &p, "SPTRACE1");
}

#[test]
fn truncated_anywhere_is_an_error_with_its_offset() {
    let (_, bytes) = good_file("trunc-src.spt");
    for cut in [5usize, 11, 30, bytes.len() / 3, bytes.len() / 2, bytes.len() - 20, bytes.len() - 1] {
        let p = tmp(&format!("trunc-{cut}.spt"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let e = err_of(&p);
        let s = e.to_string();
        assert!(s.starts_with(&p) && s.contains("byte "), "cut {cut}: {s}");
        assert!(s.contains("truncated") || s.contains("corrupt"), "cut {cut}: {s}");
    }
}

#[test]
fn truncated_trace_reads_up_to_its_last_complete_chunk_when_allowed() {
    let (_, bytes) = good_file("lenient-src.spt");
    let p = tmp("lenient.spt");
    std::fs::write(&p, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let mut r = spt::SptReader::open(&p).unwrap();
    r.allow_truncated(true);
    assert!(r.meta.truncated());
    let mut c = Chunk::default();
    let mut n = 0;
    while r.next_chunk(&mut c).unwrap() {
        n += c.accesses.len();
    }
    assert!((1000..3000).contains(&n), "{n}");
}

#[test]
fn bad_magic_and_checksum() {
    let (_, bytes) = good_file("crc-src.spt");
    let mut b = bytes.clone();
    b[0] = b'X';
    let p = tmp("badmagic.spt");
    std::fs::write(&p, &b).unwrap();
    assert_trace_error(&err_of(&p), &p, "SPTRACE1");
    // Flip a byte inside the first chunk's compressed payload.
    let (meta, _) = spt::open_meta(&tmp("crc-src.spt")).unwrap();
    let first = meta.index.as_ref().unwrap()[0].offset as usize;
    let mut b = bytes.clone();
    b[first + 28 + 5] ^= 0xff;
    let p = tmp("badcrc.spt");
    std::fs::write(&p, &b).unwrap();
    let e = err_of(&p);
    assert_trace_error(&e, &p, "checksum");
    assert!(e.to_string().contains(&format!("byte {first}")), "{e}");
}

/// A chunk whose payload holds a varint that never ends, with a correct checksum.
#[test]
fn bad_varint() {
    let p = tmp("badvarint.spt");
    let json = b"{}";
    let mut f = Vec::new();
    f.extend_from_slice(spt::FILE_MAGIC);
    f.extend_from_slice(&(json.len() as u32).to_le_bytes());
    f.extend_from_slice(json);
    f.extend_from_slice(&crc32fast::hash(json).to_le_bytes());
    let raw = [0x03u8, 0xff, 0xff, 0xff]; // a load whose address delta runs off the end
    let comp = zstd::bulk::compress(&raw, 3).unwrap();
    let off = f.len();
    f.extend_from_slice(spt::CHUNK_MAGIC);
    f.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    f.extend_from_slice(&(comp.len() as u32).to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&1u64.to_le_bytes());
    f.extend_from_slice(&crc32fast::hash(&comp).to_le_bytes());
    f.extend_from_slice(&comp);
    std::fs::write(&p, &f).unwrap();
    let e = err_of(&p);
    assert_trace_error(&e, &p, "bad varint");
    assert!(e.to_string().contains(&format!("byte {off}")), "{e}");
}

/// Damage every byte of a small file in turn: each read either succeeds or fails cleanly.
#[test]
fn no_single_byte_corruption_panics() {
    let p = tmp("fuzz-src.spt");
    let recs: Vec<Rec> = std::iter::once(Rec::E(Event::Mmap { addr: 0x1000, len: 0x2000, prot: 3, flags: 0x22, fd: -1, offset: 0 }))
        .chain((0..200u64).map(|i| Rec::A(Access::new(i * 8192, AccessKind::Store, 4))))
        .collect();
    write(&p, &recs, 64, true);
    let bytes = std::fs::read(&p).unwrap();
    let q = tmp("fuzz.spt");
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= flip;
            std::fs::write(&q, &b).unwrap();
            let r = std::panic::catch_unwind(|| read_all(&q).map(|v| v.len()));
            assert!(r.is_ok(), "panic at byte {i} flip {flip:#x}");
        }
    }
}
