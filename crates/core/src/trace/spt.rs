//! The `.spt` trace format, version 2 (spec: docs/TRACE_FORMAT.md). Version 1 files (magic
//! "SPTRACE1") read unchanged: version 2 only gives meaning to a tag bit version 1 kept at 0.
//!
//! ```text
//! file   := header chunk* index?
//! header := "SPTRACE2" u32:json_len json u32:crc32(json)
//! chunk  := "SPCK" u32:raw_len u32:comp_len u32:n_records u64:n_accesses u32:crc32(comp) zstd(comp)
//! index  := "SPIX" u32:n_chunks (u64:offset u32:n_records u64:n_accesses)* u32:flags
//!           u64:total_accesses u32:crc32(from n_chunks to total) u64:index_offset "SPTEND\0\0"
//! ```
//! All integers little-endian. Each chunk decodes on its own: address predictors restart at 0 and
//! the writer repeats the current `Context` at the top of every chunk. A file without an index
//! was cut short; it is an error unless the reader is told to accept a truncated trace, in which
//! case every complete chunk is read.
//!
//! Invariants the reader checks: magic at every boundary, crc32 of every chunk and the header,
//! record counts and access counts per chunk, varints that end inside the chunk.

use super::varint::{get_u64, put_u64, unzigzag, zigzag};
use super::{Access, AccessKind, Chunk, Event, Provenance, RecordSink, COLLAPSE_SHIFT, LINE_COLLAPSE_SHIFT};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::mpsc;

pub const FILE_MAGIC: &[u8; 8] = b"SPTRACE2";
/// The first version's magic, still read.
pub const FILE_MAGIC_V1: &[u8; 8] = b"SPTRACE1";
pub const CHUNK_MAGIC: &[u8; 4] = b"SPCK";
pub const INDEX_MAGIC: &[u8; 4] = b"SPIX";
pub const END_MAGIC: &[u8; 8] = b"SPTEND\0\0";
const CHUNK_HEADER_LEN: u64 = 28;
/// No chunk may claim more than this many raw bytes: a guard against corrupt lengths.
const MAX_CHUNK_BYTES: u32 = 64 << 20;
/// The largest provenance header a reader accepts (and a writer writes): 16MiB, so that a
/// corrupt length cannot make a reader allocate gigabytes before it can tell.
pub const MAX_PROVENANCE_BYTES: u32 = 16 << 20;
/// Index flag: the writer was stopped before the traced program finished (capture interrupted).
pub const FLAG_TRUNCATED: u32 = 1;

/// Default records per chunk; big enough that zstd has context, small enough to stream.
pub const DEFAULT_CHUNK_RECORDS: u32 = 1 << 16;
const TAG_EVENT: u8 = 0x80;
const TAG_COUNT: u8 = 0x20;
/// Data access: its address is a delta from the second data predictor (version 2).
const TAG_PRED_B: u8 = 0x40;
/// Address predictors: 0 data A, 1 instruction fetches, 2 data B.
const PRED_DATA_A: usize = 0;
const PRED_FETCH: usize = 1;
const PRED_DATA_B: usize = 2;
/// A data access within this distance of a data predictor is encoded from the nearer one;
/// farther, from the less recently used one (which it then replaces). Two interleaved streams
/// (a sequential sweep and random probes, a stack and a heap) so keep a predictor each.
const PRED_NEAR: u64 = 64 << 10;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChunkInfo {
    pub offset: u64,
    pub n_records: u32,
    pub n_accesses: u64,
}

/// What a finished writer reports.
#[derive(Clone, Debug, Default)]
pub struct WriteSummary {
    pub records: u64,
    pub accesses: u64,
    pub chunks: u64,
    pub bytes: u64,
    /// The index says the trace is cut short (`mark_truncated`, or a salvaged file).
    pub truncated: bool,
}

/// Streaming writer: constant memory (one chunk buffer plus a 20-byte index entry per chunk).
pub struct SptWriter<W: Write> {
    out: W,
    path: String,
    raw: Vec<u8>,
    pending: Option<Access>,
    prev: [u64; 3],
    /// The data predictor used last (the other one is replaced by a far access).
    last_data: usize,
    context: Option<(u32, u32)>,
    chunk_records: u32,
    chunk_accesses: u64,
    max_records: u32,
    collapse: bool,
    /// Runs collapse within aligned blocks of 2^collapse_shift bytes (`COLLAPSE_SHIFT`, or
    /// `LINE_COLLAPSE_SHIFT` to keep each cache line of a page as its own record).
    collapse_shift: u32,
    offset: u64,
    index: Vec<ChunkInfo>,
    summary: WriteSummary,
    level: i32,
    flags: u32,
}

/// Refuse an output path that must not be replaced: an existing file that is not a regular
/// file (a device such as /dev/full, a FIFO, a directory), or one of the inputs (writing the
/// output would destroy it). Writers write `PATH.partial` and rename it over `PATH`.
pub fn check_output(path: &str, inputs: &[&str]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(path, &e)),
    };
    if !m.file_type().is_file() {
        let what = if m.is_dir() { "a directory" } else { "not a regular file (a device, FIFO or socket)" };
        return Err(Error::usage(format!("{path}: is {what}; superpager writes whole regular files only and will not replace it")));
    }
    for i in inputs {
        if let Ok(im) = std::fs::metadata(i) {
            if im.dev() == m.dev() && im.ino() == m.ino() {
                return Err(Error::usage(format!("{path}: is also the input; writing it would destroy the input (choose another output)")));
            }
        }
    }
    Ok(())
}

impl SptWriter<BufWriter<File>> {
    pub fn create(path: &str, provenance: &Provenance) -> Result<Self> {
        let f = File::create(path).map_err(|e| Error::io(path, &e))?;
        SptWriter::new(BufWriter::with_capacity(1 << 20, f), path, provenance)
    }
}

impl<W: Write> SptWriter<W> {
    pub fn new(mut out: W, path: &str, provenance: &Provenance) -> Result<Self> {
        let json = serde_json::to_vec(provenance).map_err(|e| Error::usage(e.to_string()))?;
        if json.len() > MAX_PROVENANCE_BYTES as usize {
            return Err(Error::usage(format!("{path}: provenance of {} bytes is over the format's limit of {MAX_PROVENANCE_BYTES}", json.len())));
        }
        let mut head = Vec::with_capacity(json.len() + 16);
        head.extend_from_slice(FILE_MAGIC);
        head.extend_from_slice(&(json.len() as u32).to_le_bytes());
        head.extend_from_slice(&json);
        head.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        out.write_all(&head).map_err(|e| Error::io(path, &e))?;
        Ok(SptWriter {
            out,
            path: path.to_string(),
            raw: Vec::with_capacity(8 << 20),
            pending: None,
            prev: [0; 3],
            last_data: PRED_DATA_B,
            context: None,
            chunk_records: 0,
            chunk_accesses: 0,
            max_records: DEFAULT_CHUNK_RECORDS,
            collapse: true,
            collapse_shift: COLLAPSE_SHIFT,
            offset: head.len() as u64,
            index: Vec::new(),
            summary: WriteSummary::default(),
            level: 3,
            flags: 0,
        })
    }

    /// Keep every access as its own record (no same-page run collapsing).
    pub fn set_collapse(&mut self, on: bool) {
        self.collapse = on;
    }
    /// Collapse runs within aligned blocks of 2^shift bytes instead of 4KiB pages. Only a
    /// finer block than a page is allowed (6..=12): a run must stay inside one page of any size.
    pub fn set_collapse_shift(&mut self, shift: u32) {
        assert!((LINE_COLLAPSE_SHIFT..=COLLAPSE_SHIFT).contains(&shift), "collapse block of 2^{shift} bytes is outside 64B..4KiB");
        self.collapse_shift = shift;
    }
    pub fn set_chunk_records(&mut self, n: u32) {
        self.max_records = n.max(1);
    }
    /// Mark the trace as cut short by its producer (e.g. an interrupted capture).
    pub fn mark_truncated(&mut self) {
        self.flags |= FLAG_TRUNCATED;
    }

    /// Which predictor encodes `a`; updates the data predictors' recency.
    #[inline]
    fn predictor(&mut self, a: &Access) -> usize {
        if a.kind.is_fetch() {
            return PRED_FETCH;
        }
        let da = a.addr.abs_diff(self.prev[PRED_DATA_A]);
        let db = a.addr.abs_diff(self.prev[PRED_DATA_B]);
        let p = if da.min(db) <= PRED_NEAR {
            if da <= db {
                PRED_DATA_A
            } else {
                PRED_DATA_B
            }
        } else if self.last_data == PRED_DATA_A {
            PRED_DATA_B
        } else {
            PRED_DATA_A
        };
        self.last_data = p;
        p
    }

    fn encode_access(&mut self, a: Access) {
        let stream = self.predictor(&a);
        let size_code = match a.size {
            1 => 0u8,
            2 => 1,
            4 => 2,
            8 => 3,
            16 => 4,
            32 => 5,
            64 => 6,
            _ => 7,
        };
        let mut tag = (a.kind as u8) | (size_code << 2);
        if a.count > 1 {
            tag |= TAG_COUNT;
        }
        if stream == PRED_DATA_B {
            tag |= TAG_PRED_B;
        }
        self.raw.push(tag);
        if size_code == 7 {
            put_u64(&mut self.raw, a.size as u64);
        }
        put_u64(&mut self.raw, zigzag(a.addr.wrapping_sub(self.prev[stream]) as i64));
        self.prev[stream] = a.addr;
        if a.count > 1 {
            put_u64(&mut self.raw, a.count as u64);
        }
        self.chunk_records += 1;
        self.chunk_accesses += a.count as u64;
    }

    fn encode_event(&mut self, e: &Event) {
        let r = &mut self.raw;
        let code: u8 = match e {
            Event::Context { .. } => 0,
            Event::Mmap { .. } => 1,
            Event::Munmap { .. } => 2,
            Event::Mremap { .. } => 3,
            Event::Mprotect { .. } => 4,
            Event::Brk { .. } => 5,
            Event::Madvise { .. } => 6,
            Event::Fork { .. } => 7,
            Event::Exit { .. } => 8,
            Event::FileOpen { .. } => 9,
            Event::FileClose { .. } => 10,
            Event::FileRead { .. } => 11,
            Event::Insns { .. } => 12,
        };
        r.push(TAG_EVENT | code);
        let zz = |v: i32| zigzag(v as i64);
        match e {
            Event::Context { pid, tid } => {
                put_u64(r, *pid as u64);
                put_u64(r, *tid as u64);
            }
            Event::Mmap { addr, len, prot, flags, fd, offset } => {
                for v in [*addr, *len, *prot as u64, *flags as u64, zz(*fd), *offset] {
                    put_u64(r, v);
                }
            }
            Event::Munmap { addr, len } => {
                put_u64(r, *addr);
                put_u64(r, *len);
            }
            Event::Mremap { old_addr, old_len, new_addr, new_len } => {
                for v in [*old_addr, *old_len, *new_addr, *new_len] {
                    put_u64(r, v);
                }
            }
            Event::Mprotect { addr, len, prot } => {
                for v in [*addr, *len, *prot as u64] {
                    put_u64(r, v);
                }
            }
            Event::Brk { addr } => put_u64(r, *addr),
            Event::Madvise { addr, len, advice } => {
                for v in [*addr, *len, *advice as u64] {
                    put_u64(r, v);
                }
            }
            Event::Fork { child } => put_u64(r, *child as u64),
            Event::Exit { code } => put_u64(r, zz(*code)),
            Event::FileOpen { fd, path, size } => {
                put_u64(r, zz(*fd));
                put_u64(r, *size);
                put_u64(r, path.len() as u64);
                r.extend_from_slice(path.as_bytes());
            }
            Event::FileClose { fd } => put_u64(r, zz(*fd)),
            Event::FileRead { fd, offset, len } => {
                for v in [zz(*fd), *offset, *len] {
                    put_u64(r, v);
                }
            }
            Event::Insns { count } => put_u64(r, *count),
        }
        self.chunk_records += 1;
    }

    fn flush_pending(&mut self) -> Result<()> {
        if let Some(p) = self.pending.take() {
            self.encode_access(p);
            if self.chunk_records >= self.max_records || self.raw.len() >= (8 << 20) {
                self.flush_chunk()?;
            }
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.chunk_records == 0 {
            return Ok(());
        }
        let comp = zstd::bulk::compress(&self.raw, self.level).map_err(|e| Error::Io { file: self.path.clone(), msg: format!("zstd: {e}") })?;
        let mut h = [0u8; CHUNK_HEADER_LEN as usize];
        h[0..4].copy_from_slice(CHUNK_MAGIC);
        h[4..8].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(comp.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&self.chunk_records.to_le_bytes());
        h[16..24].copy_from_slice(&self.chunk_accesses.to_le_bytes());
        h[24..28].copy_from_slice(&crc32fast::hash(&comp).to_le_bytes());
        let io = |e: std::io::Error| Error::io(&self.path, &e);
        self.out.write_all(&h).map_err(io)?;
        self.out.write_all(&comp).map_err(|e| Error::io(&self.path, &e))?;
        self.index.push(ChunkInfo { offset: self.offset, n_records: self.chunk_records, n_accesses: self.chunk_accesses });
        self.offset += CHUNK_HEADER_LEN + comp.len() as u64;
        self.summary.records += self.chunk_records as u64;
        self.summary.accesses += self.chunk_accesses;
        self.summary.chunks += 1;
        self.raw.clear();
        self.chunk_records = 0;
        self.chunk_accesses = 0;
        self.prev = [0; 3];
        self.last_data = PRED_DATA_B;
        // Every chunk opens with the context in force, so it decodes alone.
        if let Some((pid, tid)) = self.context {
            self.encode_event(&Event::Context { pid, tid });
        }
        Ok(())
    }

    /// Write the index and trailer; the file is complete only after this.
    pub fn finish(mut self) -> Result<WriteSummary> {
        self.close_out()?;
        Ok(self.summary)
    }

    fn close_out(&mut self) -> Result<()> {
        self.flush_pending()?;
        // A chunk holding only the repeated context carries nothing: drop it.
        if self.chunk_accesses == 0 && self.context.is_some() && self.chunk_records == 1 {
            self.raw.clear();
            self.chunk_records = 0;
        }
        self.flush_chunk()?;
        self.write_index()
    }

    /// Accesses in complete chunks so far (what a salvaged file would hold).
    pub fn accesses_written(&self) -> u64 {
        self.summary.accesses
    }

    /// The index (marked truncated if so) and the trailer, at the end of the complete chunks.
    fn write_index(&mut self) -> Result<()> {
        let mut idx = Vec::with_capacity(self.index.len() * 20 + 64);
        idx.extend_from_slice(INDEX_MAGIC);
        idx.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        for c in &self.index {
            idx.extend_from_slice(&c.offset.to_le_bytes());
            idx.extend_from_slice(&c.n_records.to_le_bytes());
            idx.extend_from_slice(&c.n_accesses.to_le_bytes());
        }
        idx.extend_from_slice(&self.flags.to_le_bytes());
        idx.extend_from_slice(&self.summary.accesses.to_le_bytes());
        let crc = crc32fast::hash(&idx[4..]);
        let index_offset = self.offset;
        idx.extend_from_slice(&crc.to_le_bytes());
        idx.extend_from_slice(&index_offset.to_le_bytes());
        idx.extend_from_slice(END_MAGIC);
        let io = |e: std::io::Error| Error::io(&self.path, &e);
        self.out.write_all(&idx).map_err(io)?;
        self.out.flush().map_err(|e| Error::io(&self.path, &e))?;
        self.summary.bytes = index_offset + idx.len() as u64;
        self.summary.truncated = self.flags & FLAG_TRUNCATED != 0;
        Ok(())
    }
}

impl SptWriter<File> {
    /// A writer straight to the file (no user-space buffer), so that after a failed write the
    /// file holds exactly the complete chunks plus the failed chunk's bytes: see `salvage`.
    pub fn create_unbuffered(path: &str, provenance: &Provenance) -> Result<Self> {
        let f = File::create(path).map_err(|e| Error::io(path, &e))?;
        SptWriter::new(f, path, provenance)
    }

    /// `finish`, or if writing fails, `salvage` (the error comes back with what was kept).
    pub fn finish_or_salvage(mut self) -> std::result::Result<WriteSummary, (WriteSummary, Error)> {
        match self.close_out() {
            Ok(()) => Ok(self.summary),
            Err(e) => match self.salvage() {
                Ok(s) => Err((s, e)),
                Err(_) => Err((WriteSummary::default(), e)),
            },
        }
    }

    /// After a write failed (a full disk): cut the file back to its last complete chunk and
    /// end it with an index marked truncated, so every recorded chunk stays readable. If even
    /// the index does not fit, the file is left without one, which readers also accept as a
    /// truncated trace (`--allow-truncated`). Returns what the file holds.
    pub fn salvage(mut self) -> Result<WriteSummary> {
        self.flags |= FLAG_TRUNCATED;
        let io = |e: std::io::Error| Error::io(&self.path, &e);
        self.out.set_len(self.offset).map_err(io)?;
        self.out.seek(SeekFrom::Start(self.offset)).map_err(|e| Error::io(&self.path, &e))?;
        if self.write_index().is_err() {
            let _ = self.out.set_len(self.offset);
            self.summary.bytes = self.offset;
        }
        Ok(self.summary)
    }
}

impl<W: Write> RecordSink for SptWriter<W> {
    #[inline]
    fn access(&mut self, a: Access) -> Result<()> {
        if self.collapse {
            if let Some(p) = &mut self.pending {
                if p.addr >> self.collapse_shift == a.addr >> self.collapse_shift && p.kind.is_fetch() == a.kind.is_fetch() && p.count < u32::MAX - a.count {
                    p.count += a.count;
                    p.kind = p.kind.merge(a.kind);
                    return Ok(());
                }
            }
        }
        self.flush_pending()?;
        self.pending = Some(a);
        Ok(())
    }

    fn event(&mut self, e: Event) -> Result<()> {
        self.flush_pending()?;
        if let Event::Context { pid, tid } = e {
            self.context = Some((pid, tid));
        }
        self.encode_event(&e);
        if self.chunk_records >= self.max_records {
            self.flush_chunk()?;
        }
        Ok(())
    }
}

/// Header and index of an .spt file.
#[derive(Clone, Debug)]
pub struct TraceMeta {
    pub path: String,
    pub provenance: Provenance,
    pub data_offset: u64,
    pub file_len: u64,
    /// None when the file has no index (cut short).
    pub index: Option<Vec<ChunkInfo>>,
    pub flags: u32,
    pub total_accesses: Option<u64>,
}

impl TraceMeta {
    pub fn truncated(&self) -> bool {
        self.index.is_none() || self.flags & FLAG_TRUNCATED != 0
    }

    /// (records, accesses) summed over the index, no chunk read; None without an index.
    pub fn totals(&self) -> Option<(u64, u64)> {
        self.index.as_ref().map(|ix| ix.iter().fold((0, 0), |(r, a), c| (r + c.n_records as u64, a + c.n_accesses)))
    }
}

fn read_exact_at<R: Read>(r: &mut R, buf: &mut [u8], path: &str, off: u64, what: &str) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(Error::trace(path, off + got as u64, format!("truncated: file ends inside the {what} ({} of {} bytes present)", got, buf.len())))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, &e)),
        }
    }
    Ok(())
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().unwrap())
}
fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}

/// Guess what a non-.spt file is, to make the error useful.
fn sniff(head: &[u8]) -> &'static str {
    if head.starts_with(&[0x1f, 0x8b]) {
        "it looks gzip-compressed (a ChampSim trace? use `superpager trace import FILE --from champsim`)"
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
        "it looks xz-compressed (a ChampSim trace? use `superpager trace import FILE --from champsim`)"
    } else if head.starts_with(b"==") || head.starts_with(b"I  ") || head.starts_with(b" L ") {
        "it looks like Valgrind lackey text (use `superpager trace import FILE --from lackey`)"
    } else if head.starts_with(b"# superpager text") {
        "it is superpager's text form (use `superpager trace import FILE --from text`)"
    } else {
        "expected the magic \"SPTRACE2\" (or \"SPTRACE1\")"
    }
}

/// Open an .spt file: read and check the header, then the index when present.
pub fn open_meta(path: &str) -> Result<(TraceMeta, BufReader<File>)> {
    let f = File::open(path).map_err(|e| Error::io(path, &e))?;
    let file_len = f.metadata().map_err(|e| Error::io(path, &e))?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    if file_len == 0 {
        return Err(Error::trace(path, 0, "empty file: not a superpager trace (expected the magic \"SPTRACE2\" or \"SPTRACE1\")"));
    }
    let mut magic = [0u8; 12];
    let n = (file_len as usize).min(12);
    read_exact_at(&mut r, &mut magic[..n], path, 0, "file header")?;
    if n < 8 && (magic[..n] == FILE_MAGIC[..n] || magic[..n] == FILE_MAGIC_V1[..n]) {
        return Err(Error::trace(path, n as u64, format!("truncated: file ends inside the header ({n} bytes present)")));
    }
    if n < 8 || (&magic[..8] != FILE_MAGIC && &magic[..8] != FILE_MAGIC_V1) {
        return Err(Error::trace(path, 0, format!("not a superpager .spt trace: {}", sniff(&magic[..n]))));
    }
    if n < 12 {
        return Err(Error::trace(path, n as u64, "truncated: file ends inside the header"));
    }
    let json_len = le_u32(&magic[8..]);
    if json_len as u64 > file_len {
        return Err(Error::trace(path, 8, format!("corrupt header: provenance length {json_len} exceeds the file")));
    }
    if json_len > MAX_PROVENANCE_BYTES {
        return Err(Error::trace(path, 8, format!("corrupt header: provenance length {json_len} is over the format's limit of {MAX_PROVENANCE_BYTES} bytes")));
    }
    let mut json = vec![0u8; json_len as usize + 4];
    read_exact_at(&mut r, &mut json, path, 12, "header")?;
    let crc = le_u32(&json[json_len as usize..]);
    json.truncate(json_len as usize);
    if crc32fast::hash(&json) != crc {
        return Err(Error::trace(path, 12, "corrupt header: checksum mismatch"));
    }
    let provenance: Provenance =
        serde_json::from_slice(&json).map_err(|e| Error::trace(path, 12, format!("corrupt header: provenance is not a JSON object: {e}")))?;
    let data_offset = 12 + json_len as u64 + 4;
    let mut meta = TraceMeta { path: path.to_string(), provenance, data_offset, file_len, index: None, flags: 0, total_accesses: None };
    // The trailer, if the writer finished.
    if file_len >= data_offset + 16 {
        let mut tail = [0u8; 16];
        let f = r.get_mut();
        f.seek(SeekFrom::Start(file_len - 16)).map_err(|e| Error::io(path, &e))?;
        f.read_exact(&mut tail).map_err(|e| Error::io(path, &e))?;
        if &tail[8..] == END_MAGIC {
            let index_offset = le_u64(&tail);
            meta.index = Some(read_index(f, path, index_offset, file_len, &mut meta)?);
        }
    }
    r.seek(SeekFrom::Start(data_offset)).map_err(|e| Error::io(path, &e))?;
    Ok((meta, r))
}

fn read_index(f: &mut File, path: &str, index_offset: u64, file_len: u64, meta: &mut TraceMeta) -> Result<Vec<ChunkInfo>> {
    if index_offset < meta.data_offset || index_offset + 8 + 16 > file_len {
        return Err(Error::trace(path, file_len - 16, format!("corrupt trailer: index offset {index_offset} is outside the file")));
    }
    let body_len = (file_len - 16 - index_offset) as usize;
    let mut body = vec![0u8; body_len];
    f.seek(SeekFrom::Start(index_offset)).map_err(|e| Error::io(path, &e))?;
    f.read_exact(&mut body).map_err(|e| Error::io(path, &e))?;
    if &body[..4] != INDEX_MAGIC {
        return Err(Error::trace(path, index_offset, "corrupt index: bad magic (expected \"SPIX\")"));
    }
    let n = le_u32(&body[4..]) as usize;
    let need = 4 + 4 + n * 20 + 4 + 8 + 4;
    if need != body_len {
        return Err(Error::trace(path, index_offset + 4, format!("corrupt index: {n} chunks do not fit its {body_len} bytes")));
    }
    let crc_at = body_len - 4;
    if crc32fast::hash(&body[4..crc_at]) != le_u32(&body[crc_at..]) {
        return Err(Error::trace(path, index_offset, "corrupt index: checksum mismatch"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let b = &body[8 + i * 20..];
        out.push(ChunkInfo { offset: le_u64(b), n_records: le_u32(&b[8..]), n_accesses: le_u64(&b[12..]) });
    }
    let tail = &body[8 + n * 20..];
    meta.flags = le_u32(tail);
    meta.total_accesses = Some(le_u64(&tail[4..]));
    Ok(out)
}

/// Decode one chunk's raw (decompressed) payload into `out`.
pub fn decode_payload(raw: &[u8], n_records: u32, n_accesses: u64, path: &str, base: u64, out: &mut Chunk) -> Result<()> {
    let mut pos = 0usize;
    let mut prev = [0u64; 3];
    let mut records = 0u32;
    let mut accesses = 0u64;
    // Offsets inside the payload are reported as "chunk at B, payload byte P": the payload is
    // compressed, so a file offset would not point at the bad byte.
    let bad = |p: usize, m: &str| Error::trace(path, base, format!("corrupt chunk: payload byte {p}: {m}"));
    // The header's record count sizes the buffer (bounded: each record takes a payload byte).
    out.accesses.reserve((n_records as usize).min(raw.len()));
    while pos < raw.len() {
        let at = pos;
        let tag = raw[pos];
        pos += 1;
        if tag & TAG_EVENT == 0 {
            let kind = AccessKind::from_bits(tag);
            if tag & TAG_PRED_B != 0 && kind.is_fetch() {
                return Err(bad(at, &format!("bad record tag {tag:#04x}")));
            }
            let code = (tag >> 2) & 7;
            let size = if code == 7 {
                let s = get_u64(raw, &mut pos).ok_or_else(|| bad(pos, "bad varint (access size)"))?;
                if s > 255 {
                    return Err(bad(at, &format!("access size {s} is over 255")));
                }
                s as u8
            } else {
                1u8 << code
            };
            let d = get_u64(raw, &mut pos).ok_or_else(|| bad(pos, "bad varint (address delta)"))?;
            let stream = if kind.is_fetch() {
                PRED_FETCH
            } else if tag & TAG_PRED_B != 0 {
                PRED_DATA_B
            } else {
                PRED_DATA_A
            };
            let addr = prev[stream].wrapping_add(unzigzag(d) as u64);
            prev[stream] = addr;
            let count = if tag & TAG_COUNT != 0 {
                let c = get_u64(raw, &mut pos).ok_or_else(|| bad(pos, "bad varint (run count)"))?;
                if c < 2 || c > u32::MAX as u64 {
                    return Err(bad(at, &format!("run count {c} out of range")));
                }
                c as u32
            } else {
                1
            };
            accesses += count as u64;
            out.accesses.push(Access { addr, count, kind, size });
        } else {
            let ev = decode_event(tag, raw, &mut pos).ok_or_else(|| {
                if tag & 0x7f > 12 {
                    bad(at, &format!("unknown event tag {tag:#04x}"))
                } else {
                    bad(at, "bad varint in event")
                }
            })?;
            out.events.push((out.accesses.len() as u32, ev));
        }
        records += 1;
    }
    if records != n_records || accesses != n_accesses {
        return Err(Error::trace(path, base, format!("corrupt chunk: holds {records} records / {accesses} accesses, header says {n_records} / {n_accesses}")));
    }
    Ok(())
}

fn decode_event(tag: u8, raw: &[u8], pos: &mut usize) -> Option<Event> {
    let mut v = || get_u64(raw, pos);
    let izz = |x: u64| unzigzag(x) as i32;
    Some(match tag & 0x7f {
        0 => Event::Context { pid: v()? as u32, tid: v()? as u32 },
        1 => Event::Mmap { addr: v()?, len: v()?, prot: v()? as u8, flags: v()? as u32, fd: izz(v()?), offset: v()? },
        2 => Event::Munmap { addr: v()?, len: v()? },
        3 => Event::Mremap { old_addr: v()?, old_len: v()?, new_addr: v()?, new_len: v()? },
        4 => Event::Mprotect { addr: v()?, len: v()?, prot: v()? as u8 },
        5 => Event::Brk { addr: v()? },
        6 => Event::Madvise { addr: v()?, len: v()?, advice: v()? as u32 },
        7 => Event::Fork { child: v()? as u32 },
        8 => Event::Exit { code: izz(v()?) },
        9 => {
            let fd = izz(v()?);
            let size = v()?;
            let n = v()? as usize;
            if n > raw.len() || *pos + n > raw.len() {
                return None;
            }
            let path = String::from_utf8_lossy(&raw[*pos..*pos + n]).into_owned();
            *pos += n;
            Event::FileOpen { fd, path, size }
        }
        10 => Event::FileClose { fd: izz(v()?) },
        11 => Event::FileRead { fd: izz(v()?), offset: v()?, len: v()? },
        12 => Event::Insns { count: v()? },
        _ => return None,
    })
}

/// Sequential chunk reader over a file, constant memory.
pub struct SptReader {
    pub meta: TraceMeta,
    r: BufReader<File>,
    pos: u64,
    comp: Vec<u8>,
    raw: Vec<u8>,
    /// One decompression context for every chunk (creating one per chunk showed in profiles).
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    allow_truncated: bool,
    done: bool,
    chunk_no: usize,
    /// The context in force at the end of the previous chunk.
    last_ctx: Option<Event>,
}

impl SptReader {
    pub fn open(path: &str) -> Result<SptReader> {
        let (meta, r) = open_meta(path)?;
        let pos = meta.data_offset;
        Ok(SptReader { meta, r, pos, comp: Vec::new(), raw: Vec::new(), zstd: None, allow_truncated: false, done: false, chunk_no: 0, last_ctx: None })
    }

    /// Accept a file that was cut short: read its complete chunks and stop quietly.
    pub fn allow_truncated(&mut self, yes: bool) {
        self.allow_truncated = yes;
    }

    pub fn position(&self) -> u64 {
        self.pos
    }

    fn cut(&self, at: u64, e: Error) -> Result<bool> {
        if self.allow_truncated && self.meta.index.is_none() {
            let _ = at;
            Ok(false)
        } else {
            Err(e)
        }
    }

    /// Decode the next chunk into `out` (cleared first). Returns false at the end.
    pub fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        out.clear();
        if self.done {
            return Ok(false);
        }
        let path = self.meta.path.clone();
        let start = self.pos;
        if let Some(idx) = &self.meta.index {
            if self.chunk_no >= idx.len() {
                self.done = true;
                return Ok(false);
            }
            if idx[self.chunk_no].offset != start {
                return Err(Error::trace(
                    &path,
                    start,
                    format!("corrupt index: chunk {} should start here, index says {}", self.chunk_no, idx[self.chunk_no].offset),
                ));
            }
        } else if start == self.meta.file_len {
            self.done = true;
            return self.cut(start, Error::trace(&path, start, "truncated: the file ends without its index (was the writer stopped?)"));
        }
        let mut h = [0u8; CHUNK_HEADER_LEN as usize];
        if let Err(e) = read_exact_at(&mut self.r, &mut h, &path, start, "chunk header") {
            self.done = true;
            return self.cut(start, e);
        }
        if &h[0..4] != CHUNK_MAGIC {
            if self.meta.index.is_none() && &h[0..4] == INDEX_MAGIC {
                // The chunks are whole and the index after them was cut (or its end marker
                // damaged): a truncated trace, readable up to here when that is allowed.
                self.done = true;
                return self.cut(
                    start,
                    Error::trace(
                        &path,
                        start,
                        "corrupt trailer: an index is present but cut short or its end marker is damaged (read it with --allow-truncated)",
                    ),
                );
            }
            return Err(Error::trace(&path, start, "corrupt chunk: bad magic (expected \"SPCK\")"));
        }
        let raw_len = le_u32(&h[4..]);
        let comp_len = le_u32(&h[8..]);
        let n_records = le_u32(&h[12..]);
        let n_accesses = le_u64(&h[16..]);
        let crc = le_u32(&h[24..]);
        if raw_len > MAX_CHUNK_BYTES || comp_len > MAX_CHUNK_BYTES {
            return Err(Error::trace(&path, start + 4, format!("corrupt chunk: implausible length ({raw_len} raw, {comp_len} compressed bytes)")));
        }
        self.comp.resize(comp_len as usize, 0);
        if let Err(e) = read_exact_at(&mut self.r, &mut self.comp, &path, start + CHUNK_HEADER_LEN, "chunk payload") {
            self.done = true;
            return self.cut(start, e);
        }
        if crc32fast::hash(&self.comp) != crc {
            return Err(Error::trace(&path, start, "corrupt chunk: checksum mismatch"));
        }
        // Keep the buffer at its high-water length: no allocation or clearing per chunk.
        if self.raw.len() < raw_len as usize {
            self.raw.resize(raw_len as usize, 0);
        }
        let zerr = |e: std::io::Error| Error::trace(&path, start + CHUNK_HEADER_LEN, format!("corrupt chunk: zstd: {e}"));
        if self.zstd.is_none() {
            self.zstd = Some(zstd::bulk::Decompressor::new().map_err(zerr)?);
        }
        let got = self.zstd.as_mut().unwrap().decompress_to_buffer(&self.comp, &mut self.raw[..raw_len as usize]).map_err(zerr)?;
        if got != raw_len as usize {
            return Err(Error::trace(&path, start, format!("corrupt chunk: decompressed to {got} bytes, header says {raw_len}")));
        }
        out.file_offset = start;
        decode_payload(&self.raw[..raw_len as usize], n_records, n_accesses, &path, start, out)?;
        // The writer repeats the context at the top of each chunk so chunks decode alone; a
        // sequential reader drops that repeat, so readers see each switch once.
        if let Some((0, e @ Event::Context { .. })) = out.events.first() {
            if self.last_ctx.as_ref() == Some(e) {
                out.events.remove(0);
            }
        }
        if let Some((_, e)) = out.events.iter().rev().find(|(_, e)| matches!(e, Event::Context { .. })) {
            self.last_ctx = Some(e.clone());
        }
        self.pos = start + CHUNK_HEADER_LEN + comp_len as u64;
        out.end_offset = self.pos;
        self.chunk_no += 1;
        Ok(true)
    }

    /// Stream every record into a sink.
    pub fn replay<S: RecordSink>(&mut self, sink: &mut S) -> Result<()> {
        let mut c = Chunk::default();
        while self.next_chunk(&mut c)? {
            replay_chunk(&c, sink)?;
        }
        Ok(())
    }
}

/// Feed a decoded chunk's records, in order, to a sink.
pub fn replay_chunk<S: RecordSink>(c: &Chunk, sink: &mut S) -> Result<()> {
    let mut ev = c.events.iter().peekable();
    for (i, a) in c.accesses.iter().enumerate() {
        while let Some((p, e)) = ev.peek() {
            if *p as usize > i {
                break;
            }
            sink.event(e.clone())?;
            ev.next();
        }
        sink.access(*a)?;
    }
    for (_, e) in ev {
        sink.event(e.clone())?;
    }
    Ok(())
}

/// Decodes chunks on a second thread while the caller simulates: a bounded pipeline of two
/// buffers in flight, recycled, so steady state allocates nothing.
pub struct PrefetchReader {
    rx: mpsc::Receiver<Result<Chunk>>,
    recycle: mpsc::SyncSender<Chunk>,
    pub meta: TraceMeta,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl PrefetchReader {
    pub fn open(path: &str, allow_truncated: bool) -> Result<PrefetchReader> {
        Self::open_ahead(path, allow_truncated, 2)
    }

    /// As `open`, decoding up to `ahead` chunks in advance (a caller that holds a window of
    /// several chunks at once needs the next window decoded while it works on this one).
    pub fn open_ahead(path: &str, allow_truncated: bool, ahead: usize) -> Result<PrefetchReader> {
        let mut reader = SptReader::open(path)?;
        reader.allow_truncated(allow_truncated);
        let meta = reader.meta.clone();
        let ahead = ahead.max(1);
        let (tx, rx) = mpsc::sync_channel::<Result<Chunk>>(ahead);
        // Room for every buffer that can be in flight (decoded ahead, held, being decoded), so
        // buffers given back are always kept for reuse.
        let (recycle, back) = mpsc::sync_channel::<Chunk>(2 * ahead + 2);
        let handle = std::thread::spawn(move || loop {
            let mut c = back.try_recv().unwrap_or_default();
            match reader.next_chunk(&mut c) {
                Ok(true) => {
                    if tx.send(Ok(c)).is_err() {
                        return;
                    }
                }
                Ok(false) => return,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        });
        Ok(PrefetchReader { rx, recycle, meta, handle: Some(handle) })
    }

    /// The next decoded chunk, or None at the end. (Not `Iterator::next`: a decode error ends
    /// the stream with a value, and chunks are given back for reuse.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Chunk>> {
        match self.rx.recv() {
            Ok(Ok(c)) => Ok(Some(c)),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                if let Some(h) = self.handle.take() {
                    let _ = h.join();
                }
                Ok(None)
            }
        }
    }

    /// Give a chunk buffer back for reuse.
    pub fn give_back(&self, c: Chunk) {
        let _ = self.recycle.try_send(c);
    }
}
