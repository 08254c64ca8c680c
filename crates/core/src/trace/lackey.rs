//! Importer for Valgrind lackey `--trace-mem=yes` text: `I  addr,size`, ` L addr,size`,
//! ` S addr,size`, ` M addr,size` (hex addresses without 0x). Lines starting with `==` are
//! Valgrind's own messages and are skipped. Lackey traces carry no address-space events; the
//! engine infers anonymous regions from the accesses (docs/MODEL.md).

use super::*;
use crate::error::{Error, Result};
use std::io::BufRead;

/// `progress` is called now and then with the bytes read so far; returning false stops the
/// import with an "interrupted" error.
pub fn import<R: BufRead, S: RecordSink>(r: R, path: &str, sink: &mut S, progress: &mut dyn FnMut(u64) -> bool) -> Result<u64> {
    import_with_end(r, path, sink, progress).map(|(n, _)| n)
}

/// As `import`, and whether the log ran to lackey's closing summary (its last line,
/// `==PID== Exit code: N`, printed by lackey's fini when the program ended). A log without
/// it was cut short (valgrind killed, the capture stopped): its trace is marked truncated.
pub fn import_with_end<R: BufRead, S: RecordSink>(mut r: R, path: &str, sink: &mut S, progress: &mut dyn FnMut(u64) -> bool) -> Result<(u64, bool)> {
    let mut complete = false;
    sink.event(Event::Context { pid: 1, tid: 1 })?;
    let mut line = Vec::new();
    let mut offset = 0u64;
    let mut lineno = 0u64;
    let mut n = 0u64;
    let mut seen_record = false;
    loop {
        line.clear();
        let got = r.read_until(b'\n', &mut line).map_err(|e| Error::trace(path, offset, format!("cannot read: {e}")))?;
        if got == 0 {
            break;
        }
        lineno += 1;
        if lineno & 0xFFFFF == 0 && !progress(offset) {
            return Err(Error::usage("interrupted"));
        }
        let l = trim_newline(&line);
        if l.is_empty() || l.starts_with(b"==") || l.starts_with(b"--") {
            if l.starts_with(b"==") && is_exit_line(l) {
                complete = true;
            }
            offset += got as u64;
            continue;
        }
        match parse(l) {
            Some(a) => {
                sink.access(a)?;
                n += 1;
                seen_record = true;
            }
            None => {
                let shown = String::from_utf8_lossy(&l[..l.len().min(60)]).into_owned();
                let hint = if seen_record { "" } else { " (is this a lackey --trace-mem=yes trace?)" };
                return Err(Error::trace(path, offset, format!("line {lineno}: not a lackey record: '{shown}'{hint}")));
            }
        }
        offset += got as u64;
    }
    if !seen_record {
        return Err(Error::trace(path, 0, "no lackey records found (expected lines like ' L 04222cac,8')"));
    }
    Ok((n, complete))
}

/// `==123== Exit code:       0`: lackey's last line.
fn is_exit_line(l: &[u8]) -> bool {
    let rest = l[2..].splitn(2, |&b| b == b'=').nth(1).and_then(|r| r.strip_prefix(b"= ")).unwrap_or(b"");
    rest.trim_ascii_start().starts_with(b"Exit code:")
}

fn trim_newline(l: &[u8]) -> &[u8] {
    let mut e = l.len();
    while e > 0 && (l[e - 1] == b'\n' || l[e - 1] == b'\r') {
        e -= 1;
    }
    &l[..e]
}

/// Parse one record line; None if it is not one.
pub fn parse(l: &[u8]) -> Option<Access> {
    if l.len() < 4 {
        return None;
    }
    let (kind, rest) = match (l[0], l[1]) {
        (b'I', b' ') => (AccessKind::Fetch, &l[2..]),
        (b' ', b'L') => (AccessKind::Load, &l[2..]),
        (b' ', b'S') => (AccessKind::Store, &l[2..]),
        (b' ', b'M') => (AccessKind::Modify, &l[2..]),
        _ => return None,
    };
    let rest = std::str::from_utf8(rest).ok()?.trim();
    let (a, s) = rest.split_once(',')?;
    let addr = u64::from_str_radix(a.trim(), 16).ok()?;
    let size: u64 = s.trim().parse().ok()?;
    if size == 0 || size > 255 {
        return None;
    }
    Some(Access::new(addr, kind, size as u8))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses_each_kind() {
        assert_eq!(parse(b"I  04010173,3").unwrap(), Access::new(0x4010173, AccessKind::Fetch, 3));
        assert_eq!(parse(b" L 7ff000ab8,8").unwrap().kind, AccessKind::Load);
        assert_eq!(parse(b" S 1f,8").unwrap().kind, AccessKind::Store);
        assert_eq!(parse(b" M 0421f4d8,4").unwrap().kind, AccessKind::Modify);
        assert!(parse(b" X 10,4").is_none());
        assert!(parse(b" L zz,4").is_none());
    }

    struct Count(u64);
    impl RecordSink for Count {
        fn access(&mut self, _: Access) -> Result<()> {
            self.0 += 1;
            Ok(())
        }
        fn event(&mut self, _: Event) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_log_without_lackeys_exit_line_was_cut_short() {
        let whole = b"==7== Lackey\nI  0400,3\n L 1f,8\n==7== \n==7== Exit code:       0\n";
        let (n, complete) = import_with_end(&whole[..], "t", &mut Count(0), &mut |_| true).unwrap();
        assert_eq!((n, complete), (2, true));
        let cut = b"==7== Lackey\nI  0400,3\n L 1f,8\n";
        assert!(!import_with_end(&cut[..], "t", &mut Count(0), &mut |_| true).unwrap().1);
        assert!(!is_exit_line(b"==7== Exit"));
    }
}
