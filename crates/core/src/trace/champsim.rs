//! Importer for ChampSim `input_instr` traces: 64-byte little-endian records
//! (`u64 ip`@0, `u8 is_branch`@8, `u8 branch_taken`@9, `u8 dst_regs[2]`@10, `u8 src_regs[4]`@12,
//! `u64 dst_mem[2]`@16, `u64 src_mem[4]`@32; layout from ChampSim `inc/trace_instruction.h`).
//! Plain, gzip or xz, detected by magic bytes. Each record becomes an instruction fetch at `ip`,
//! a load per non-zero source address and a store per non-zero destination address.

use super::*;
use crate::error::{Error, Result};
use std::io::Read;

pub const RECORD_BYTES: usize = 64;
/// Emit an instruction-count mark every this many records.
const INSN_MARK_EVERY: u64 = 1 << 16;

/// Counts the bytes read through it (for progress on the compressed side).
pub struct Counting<R> {
    inner: R,
    pub count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// Open a possibly-compressed file as a byte stream; `count` tracks the file bytes consumed.
pub fn open_decompressed(path: &str, count: std::sync::Arc<std::sync::atomic::AtomicU64>) -> Result<Box<dyn Read>> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, &e))?;
    let mut magic = [0u8; 6];
    let n = f.read(&mut magic).map_err(|e| Error::io(path, &e))?;
    drop(f);
    let f = std::io::BufReader::with_capacity(1 << 20, Counting { inner: std::fs::File::open(path).map_err(|e| Error::io(path, &e))?, count });
    Ok(if n >= 2 && magic[..2] == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else if n >= 6 && magic == [0xfd, b'7', b'z', b'X', b'Z', 0] {
        Box::new(xz2::read::XzDecoder::new_multi_decoder(f))
    } else {
        Box::new(f)
    })
}

/// `progress` is called now and then with the (compressed) file bytes read so far; returning
/// false stops the import with an "interrupted" error.
pub fn import<S: RecordSink>(path: &str, fetches: bool, sink: &mut S, progress: &mut dyn FnMut(u64) -> bool) -> Result<u64> {
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut r = open_decompressed(path, count.clone())?;
    sink.event(Event::Context { pid: 1, tid: 1 })?;
    let mut buf = vec![0u8; RECORD_BYTES * 4096];
    let mut have = 0usize;
    let mut offset = 0u64; // uncompressed offset of buf[0]
    let mut insns = 0u64;
    let mut since_mark = 0u64;
    loop {
        let got = r.read(&mut buf[have..]).map_err(|e| Error::trace(path, offset + have as u64, format!("cannot decompress: {e}")))?;
        if got == 0 {
            break;
        }
        have += got;
        let whole = have / RECORD_BYTES * RECORD_BYTES;
        for rec in buf[..whole].chunks_exact(RECORD_BYTES) {
            let u = |o: usize| u64::from_le_bytes(rec[o..o + 8].try_into().unwrap());
            if fetches {
                sink.access(Access::new(u(0), AccessKind::Fetch, 4))?;
            }
            for i in 0..4 {
                let a = u(32 + 8 * i);
                if a != 0 {
                    sink.access(Access::new(a, AccessKind::Load, 8))?;
                }
            }
            for i in 0..2 {
                let a = u(16 + 8 * i);
                if a != 0 {
                    sink.access(Access::new(a, AccessKind::Store, 8))?;
                }
            }
            insns += 1;
            since_mark += 1;
            if since_mark == INSN_MARK_EVERY {
                sink.event(Event::Insns { count: since_mark })?;
                since_mark = 0;
            }
        }
        if !progress(count.load(std::sync::atomic::Ordering::Relaxed)) {
            return Err(Error::usage("interrupted"));
        }
        buf.copy_within(whole..have, 0);
        offset += whole as u64;
        have -= whole;
    }
    if have != 0 {
        return Err(Error::trace(path, offset, format!("truncated ChampSim record: {have} of {RECORD_BYTES} bytes (offset in the uncompressed stream)")));
    }
    if insns == 0 {
        return Err(Error::trace(path, 0, "empty ChampSim trace: no 64-byte records"));
    }
    if since_mark > 0 {
        sink.event(Event::Insns { count: since_mark })?;
    }
    Ok(insns)
}
