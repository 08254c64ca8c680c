//! The human-readable text form of a trace: one record per line. `trace dump` prints it and
//! `trace import --from text` reads it, so tests can write traces by hand.
//!
//! ```text
//! # superpager text trace v1
//! ctx 1 1                                   # pid tid
//! mmap 0x7f0000000000 0x200000 rw- private|anonymous -1 0
//! L 0x7f0000000010 8                        # kind address size
//! S 0x7f0000000018 8 x3                     # a run of 3 accesses in one 4KiB page
//! insns 1000
//! ```

use super::*;
use crate::error::{Error, Result};
use std::io::BufRead;

pub const TEXT_MAGIC: &str = "# superpager text trace v1";

pub fn prot_str(p: u8) -> String {
    let mut s = String::with_capacity(3);
    s.push(if p & PROT_READ != 0 { 'r' } else { '-' });
    s.push(if p & PROT_WRITE != 0 { 'w' } else { '-' });
    s.push(if p & PROT_EXEC != 0 { 'x' } else { '-' });
    s
}

fn parse_prot(s: &str) -> Option<u8> {
    if s.len() != 3 {
        return None;
    }
    let mut p = 0;
    for (i, c) in s.chars().enumerate() {
        match (i, c) {
            (0, 'r') => p |= PROT_READ,
            (1, 'w') => p |= PROT_WRITE,
            (2, 'x') => p |= PROT_EXEC,
            (_, '-') => {}
            _ => return None,
        }
    }
    Some(p)
}

const FLAG_NAMES: [(u32, &str); 6] = [
    (MAP_SHARED, "shared"),
    (MAP_PRIVATE, "private"),
    (MAP_FIXED, "fixed"),
    (MAP_ANONYMOUS, "anonymous"),
    (MAP_GROWSDOWN, "growsdown"),
    (MAP_HUGETLB, "hugetlb"),
];

pub fn flags_str(f: u32) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut rest = f;
    for (bit, name) in FLAG_NAMES {
        if f & bit != 0 {
            parts.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 || parts.is_empty() {
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

fn parse_flags(s: &str) -> Option<u32> {
    let mut f = 0;
    for part in s.split('|') {
        if let Some(&(bit, _)) = FLAG_NAMES.iter().find(|(_, n)| *n == part) {
            f |= bit;
        } else {
            f |= parse_num(part)? as u32;
        }
    }
    Some(f)
}

fn parse_num(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

fn parse_int(s: &str) -> Option<i64> {
    if let Some(r) = s.strip_prefix('-') {
        parse_num(r).map(|v| -(v as i64))
    } else {
        parse_num(s).map(|v| v as i64)
    }
}

pub fn format_access(a: &Access) -> String {
    if a.count > 1 {
        format!("{} {:#x} {} x{}", a.kind.letter(), a.addr, a.size, a.count)
    } else {
        format!("{} {:#x} {}", a.kind.letter(), a.addr, a.size)
    }
}

pub fn format_event(e: &Event) -> String {
    match e {
        Event::Context { pid, tid } => format!("ctx {pid} {tid}"),
        Event::Mmap { addr, len, prot, flags, fd, offset } => {
            format!("mmap {addr:#x} {len:#x} {} {} {fd} {offset:#x}", prot_str(*prot), flags_str(*flags))
        }
        Event::Munmap { addr, len } => format!("munmap {addr:#x} {len:#x}"),
        Event::Mremap { old_addr, old_len, new_addr, new_len } => {
            format!("mremap {old_addr:#x} {old_len:#x} {new_addr:#x} {new_len:#x}")
        }
        Event::Mprotect { addr, len, prot } => format!("mprotect {addr:#x} {len:#x} {}", prot_str(*prot)),
        Event::Brk { addr } => format!("brk {addr:#x}"),
        Event::Madvise { addr, len, advice } => format!("madvise {addr:#x} {len:#x} {advice}"),
        Event::Fork { child } => format!("fork {child}"),
        Event::Exit { code } => format!("exit {code}"),
        Event::FileOpen { fd, path, size } => format!("open {fd} {size} {path}"),
        Event::FileClose { fd } => format!("close {fd}"),
        Event::FileRead { fd, offset, len } => format!("read {fd} {offset:#x} {len:#x}"),
        Event::Insns { count } => format!("insns {count}"),
    }
}

/// Parse one line (without its newline). Ok(None) for blank and comment lines.
pub fn parse_line(line: &str) -> std::result::Result<Option<either::Rec>, String> {
    let line = match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    };
    let t: Vec<&str> = line.split_whitespace().collect();
    if t.is_empty() {
        return Ok(None);
    }
    let n = |i: usize, what: &str| -> std::result::Result<u64, String> {
        t.get(i).and_then(|s| parse_num(s)).ok_or_else(|| format!("'{}': field {} ({what}) missing or not a number", t[0], i))
    };
    let int = |i: usize, what: &str| -> std::result::Result<i64, String> {
        t.get(i).and_then(|s| parse_int(s)).ok_or_else(|| format!("'{}': field {} ({what}) missing or not an integer", t[0], i))
    };
    let want = |k: usize| -> std::result::Result<(), String> {
        if t.len() != k + 1 {
            Err(format!("'{}' takes {k} fields, found {}", t[0], t.len() - 1))
        } else {
            Ok(())
        }
    };
    use either::Rec;
    let kind = match t[0] {
        "L" => Some(AccessKind::Load),
        "S" => Some(AccessKind::Store),
        "M" => Some(AccessKind::Modify),
        "F" => Some(AccessKind::Fetch),
        _ => None,
    };
    if let Some(kind) = kind {
        if t.len() < 3 || t.len() > 4 {
            return Err(format!("access takes: KIND ADDRESS SIZE [xCOUNT], found {} fields", t.len() - 1));
        }
        let addr = n(1, "address")?;
        let size = n(2, "size")?;
        if size == 0 || size > 255 {
            return Err(format!("access size {size} out of range 1..255"));
        }
        let count = match t.get(3) {
            Some(c) => {
                c.strip_prefix('x').and_then(|c| c.parse::<u32>().ok()).filter(|c| *c >= 1).ok_or_else(|| format!("run count '{c}' should look like x3"))?
            }
            None => 1,
        };
        return Ok(Some(Rec::Access(Access { addr, count, kind, size: size as u8 })));
    }
    let e = match t[0] {
        "ctx" => {
            want(2)?;
            Event::Context { pid: n(1, "pid")? as u32, tid: n(2, "tid")? as u32 }
        }
        "mmap" => {
            want(6)?;
            Event::Mmap {
                addr: n(1, "addr")?,
                len: n(2, "len")?,
                prot: parse_prot(t[3]).ok_or_else(|| format!("bad protection '{}' (like rw-)", t[3]))?,
                flags: parse_flags(t[4]).ok_or_else(|| format!("bad flags '{}' (like private|anonymous)", t[4]))?,
                fd: int(5, "fd")? as i32,
                offset: n(6, "offset")?,
            }
        }
        "munmap" => {
            want(2)?;
            Event::Munmap { addr: n(1, "addr")?, len: n(2, "len")? }
        }
        "mremap" => {
            want(4)?;
            Event::Mremap { old_addr: n(1, "old_addr")?, old_len: n(2, "old_len")?, new_addr: n(3, "new_addr")?, new_len: n(4, "new_len")? }
        }
        "mprotect" => {
            want(3)?;
            Event::Mprotect { addr: n(1, "addr")?, len: n(2, "len")?, prot: parse_prot(t[3]).ok_or_else(|| format!("bad protection '{}'", t[3]))? }
        }
        "brk" => {
            want(1)?;
            Event::Brk { addr: n(1, "addr")? }
        }
        "madvise" => {
            want(3)?;
            Event::Madvise { addr: n(1, "addr")?, len: n(2, "len")?, advice: n(3, "advice")? as u32 }
        }
        "fork" => {
            want(1)?;
            Event::Fork { child: n(1, "child")? as u32 }
        }
        "exit" => {
            want(1)?;
            Event::Exit { code: int(1, "code")? as i32 }
        }
        "open" => {
            if t.len() < 4 {
                return Err("'open' takes: FD SIZE PATH".into());
            }
            // The path is the rest of the line, spaces included.
            let rest = line.trim_start();
            let path = rest.splitn(4, char::is_whitespace).nth(3).unwrap_or("").trim().to_string();
            Event::FileOpen { fd: int(1, "fd")? as i32, size: n(2, "size")?, path }
        }
        "close" => {
            want(1)?;
            Event::FileClose { fd: int(1, "fd")? as i32 }
        }
        "read" => {
            want(3)?;
            Event::FileRead { fd: int(1, "fd")? as i32, offset: n(2, "offset")?, len: n(3, "len")? }
        }
        "insns" => {
            want(1)?;
            Event::Insns { count: n(1, "count")? }
        }
        other => return Err(format!("unknown record '{other}'")),
    };
    Ok(Some(Rec::Event(e)))
}

pub mod either {
    use super::{Access, Event};
    /// One parsed record of either kind.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Rec {
        Access(Access),
        Event(Event),
    }
}

/// Read a text trace into a sink. Errors name the file and byte offset of the bad line.
/// `progress` is called now and then with the bytes read so far; returning false stops the
/// import with an "interrupted" error.
pub fn import<R: BufRead, S: RecordSink>(mut r: R, path: &str, sink: &mut S, progress: &mut dyn FnMut(u64) -> bool) -> Result<u64> {
    let mut line = String::new();
    let mut offset = 0u64;
    let mut lineno = 0u64;
    let mut n = 0u64;
    loop {
        line.clear();
        let got = r.read_line(&mut line).map_err(|e| Error::trace(path, offset, format!("cannot read text: {e}")))?;
        if got == 0 {
            break;
        }
        lineno += 1;
        if lineno & 0xFFFFF == 0 && !progress(offset) {
            return Err(Error::usage("interrupted"));
        }
        match parse_line(line.trim_end_matches(['\n', '\r'])) {
            Ok(Some(either::Rec::Access(a))) => {
                sink.access(a)?;
                n += 1;
            }
            Ok(Some(either::Rec::Event(e))) => {
                sink.event(e)?;
                n += 1;
            }
            Ok(None) => {}
            Err(m) => return Err(Error::trace(path, offset, format!("line {lineno}: {m}"))),
        }
        offset += got as u64;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::either::Rec;
    use super::*;

    #[test]
    fn every_record_roundtrips_through_text() {
        let evs = vec![
            Event::Context { pid: 3, tid: 4 },
            Event::Mmap { addr: 0x7f00_0000_0000, len: 0x20_0000, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 },
            Event::Munmap { addr: 0x1000, len: 0x2000 },
            Event::Mremap { old_addr: 1, old_len: 2, new_addr: 3, new_len: 4 },
            Event::Mprotect { addr: 0x1000, len: 0x1000, prot: 1 },
            Event::Brk { addr: 0x55_0000 },
            Event::Madvise { addr: 0, len: 4096, advice: MADV_HUGEPAGE },
            Event::Fork { child: 9 },
            Event::Exit { code: -2 },
            Event::FileOpen { fd: 3, path: "/tmp/a b".into(), size: 77 },
            Event::FileClose { fd: 3 },
            Event::FileRead { fd: 3, offset: 8, len: 16 },
            Event::Insns { count: 1000 },
        ];
        for e in evs {
            let s = format_event(&e);
            assert_eq!(parse_line(&s).unwrap(), Some(Rec::Event(e.clone())), "{s}");
        }
        let a = Access { addr: 0xdead_b000, count: 3, kind: AccessKind::Modify, size: 8 };
        assert_eq!(parse_line(&format_access(&a)).unwrap(), Some(Rec::Access(a)));
    }

    #[test]
    fn bad_lines_say_why() {
        assert!(parse_line("L 0x10").unwrap_err().contains("KIND ADDRESS SIZE"));
        assert!(parse_line("frob 1").unwrap_err().contains("unknown record"));
        assert!(parse_line("mmap 0 0x1000 rwq private -1 0").unwrap_err().contains("protection"));
        assert_eq!(parse_line("   # only a comment").unwrap(), None);
    }
}
