//! The receiving end of a capture: packets from the qemu-user plugin
//! (python/superpager/capture/spt_capture.c) in, an `.spt` trace out.
//!
//! The plugin sends raw records in datagrams, one thread's records per packet, and does no
//! encoding; this side renumbers processes and threads (1, 2, ... in order of appearance, the
//! traced command being process 1), puts a child's records after the `fork` that made it, and
//! writes the trace. Wire format, as the plugin's header comment states it:
//!
//! ```text
//! packet := u32 magic "SPQ1" | u32 pid | u32 tid | u32 nwords | u64 word[nwords]
//! access := bit 63 = 0 | bits 61-62 kind | bits 58-60 log2 size | bit 57 count word follows | bits 0-56 address
//! event  := bit 63 = 1 | bits 48-55 code | bits 0-15 argument words that follow
//! ```
//!
//! Invariants: every packet is whole (a datagram); a process's packets arrive in its order;
//! a child's packets may arrive before its parent's `fork` event (the child runs at once), so
//! they are held until that event. How each process ended is kept: `exit`, an `exec` of an
//! untraced program, a fatal signal, or nothing (its records were cut off: the trace is then
//! marked truncated).

use super::spt::{SptWriter, WriteSummary};
use super::{Access, AccessKind, Event, Provenance, RecordSink};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const PKT_MAGIC: u32 = 0x3151_5053; // "SPQ1"
const PKT_HEADER: usize = 16;
/// The plugin's packet size limit (PKT_WORDS) plus slack.
pub const MAX_PACKET: usize = PKT_HEADER + 8 * 16384;
const SOURCE: &str = "<capture stream>";

// Plugin-only event codes (the others are the .spt event codes).
const EV_EXEC: u8 = 64;
const EV_THREAD: u8 = 65;
const EV_SIGNAL: u8 = 66;

/// Counters a driver can read while the capture runs.
#[derive(Default, Debug)]
pub struct Progress {
    pub accesses: AtomicU64,
    pub packets: AtomicU64,
    pub bytes_in: AtomicU64,
    pub stop: AtomicBool,
    /// Writing the trace failed (e.g. a full disk): the driver should stop the program.
    pub write_failed: AtomicBool,
}

/// How a traced process ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    Exit(i32),
    /// It called execve: the new program ran natively, untraced.
    Exec(String),
    /// It ended without exit(2): a fatal signal.
    Signal,
}

/// What a finished capture reports.
#[derive(Clone, Debug, Default)]
pub struct CaptureSummary {
    pub write: WriteSummary,
    pub processes: u32,
    pub threads: u32,
    pub packets: u64,
    /// (pid in the trace, host pid, how it ended; None if its records were cut off)
    pub endings: Vec<(u32, u32, Option<Ending>)>,
    /// Processes whose records came without a fork naming them (their parent's was lost).
    pub orphans: u32,
    /// Phase marks (zero-length madvise calls) in the trace.
    pub phase_marks: u64,
    pub truncated: bool,
    /// Set when writing failed (e.g. a full disk); the file was salvaged up to its last chunk.
    pub write_error: Option<String>,
}

pub struct Receiver {
    writer: SptWriter<File>,
    root: u32,
    pids: HashMap<u32, u32>,
    tids: HashMap<u32, u32>,
    host_of: BTreeMap<u32, u32>,
    endings: HashMap<u32, Ending>,
    held: HashMap<u32, Vec<Vec<u8>>>,
    /// Each process's first thread (the one a synthetic exit is written for).
    first_tid: HashMap<u32, u32>,
    cur: Option<(u32, u32)>,
    packets: u64,
    orphans: u32,
    phase_marks: u64,
    /// The first write error; after it, packets are read and dropped.
    failed: Option<Error>,
}

#[inline]
fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[PKT_HEADER + 8 * i..PKT_HEADER + 8 * i + 8].try_into().unwrap())
}

fn path_arg(args: &[u64]) -> Option<String> {
    let len = *args.first()? as usize;
    let bytes: Vec<u8> = args[1..].iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.get(..len).map(|b| String::from_utf8_lossy(b).into_owned())
}

impl Receiver {
    /// `root` is the host pid of the traced command (qemu-user's own pid).
    pub fn create(path: &str, provenance: &Provenance, root: u32) -> Result<Receiver> {
        let writer = SptWriter::create_unbuffered(path, provenance)?;
        let mut pids = HashMap::new();
        pids.insert(root, 1);
        let mut host_of = BTreeMap::new();
        host_of.insert(1, root);
        Ok(Receiver {
            writer,
            root,
            pids,
            tids: HashMap::new(),
            host_of,
            endings: HashMap::new(),
            held: HashMap::new(),
            first_tid: HashMap::new(),
            cur: None,
            packets: 0,
            orphans: 0,
            phase_marks: 0,
            failed: None,
        })
    }

    /// Take one packet (a whole datagram).
    pub fn packet(&mut self, p: &[u8], progress: &Progress) -> Result<()> {
        let at = self.packets;
        self.packets += 1;
        let bad = |m: String| Error::trace(SOURCE, at, format!("packet {at}: {m}"));
        if p.len() < PKT_HEADER || u32::from_le_bytes(p[0..4].try_into().unwrap()) != PKT_MAGIC {
            return Err(bad("not a capture packet (bad magic): is the plugin the same version as superpager?".into()));
        }
        let n = u32::from_le_bytes(p[12..16].try_into().unwrap()) as usize;
        if PKT_HEADER + 8 * n != p.len() {
            return Err(bad(format!("{} bytes do not hold the {n} words it announces", p.len())));
        }
        let host_pid = u32::from_le_bytes(p[4..8].try_into().unwrap());
        if !self.pids.contains_key(&host_pid) {
            // A child whose parent has not yet sent the fork: wait for it.
            self.held.entry(host_pid).or_default().push(p.to_vec());
            return Ok(());
        }
        self.decode(p, progress).map_err(|e| match e {
            Error::Usage(m) => bad(m),
            e => e,
        })
    }

    fn decode(&mut self, p: &[u8], progress: &Progress) -> Result<()> {
        if self.failed.is_some() {
            return Ok(());
        }
        if let Err(e) = self.decode_inner(p, progress) {
            if matches!(e, Error::Io { .. }) {
                self.failed = Some(e);
                progress.write_failed.store(true, Ordering::Relaxed);
                return Ok(());
            }
            return Err(e);
        }
        Ok(())
    }

    fn decode_inner(&mut self, p: &[u8], progress: &Progress) -> Result<()> {
        let host_pid = u32::from_le_bytes(p[4..8].try_into().unwrap());
        let host_tid = u32::from_le_bytes(p[8..12].try_into().unwrap());
        let n = (p.len() - PKT_HEADER) / 8;
        let pid = self.pids[&host_pid];
        let next_tid = self.tids.len() as u32 + 1;
        let tid = *self.tids.entry(host_tid).or_insert(next_tid);
        self.first_tid.entry(pid).or_insert(tid);
        if self.cur != Some((pid, tid)) {
            self.cur = Some((pid, tid));
            self.writer.event(Event::Context { pid, tid })?;
        }
        let mut i = 0;
        let mut accesses = 0u64;
        while i < n {
            let w = word(p, i);
            i += 1;
            if w >> 63 == 0 {
                let mut a =
                    Access { addr: ((w << 7) as i64 >> 7) as u64, count: 1, kind: AccessKind::from_bits((w >> 61) as u8), size: 1u8 << ((w >> 58) & 7).min(6) };
                if w & (1 << 57) != 0 {
                    if i >= n {
                        return Err(Error::usage("an access's count word is missing"));
                    }
                    a.count = word(p, i).clamp(1, u32::MAX as u64) as u32;
                    i += 1;
                }
                accesses += a.count as u64;
                self.writer.access(a)?;
                continue;
            }
            let code = (w >> 48) as u8;
            let nargs = (w & 0xffff) as usize;
            if i + nargs > n {
                return Err(Error::usage(format!("event {code} announces {nargs} argument words past the packet's end")));
            }
            let args: Vec<u64> = (i..i + nargs).map(|k| word(p, k)).collect();
            i += nargs;
            self.event(code, &args, pid, tid, progress)?;
        }
        progress.accesses.fetch_add(accesses, Ordering::Relaxed);
        Ok(())
    }

    fn event(&mut self, code: u8, a: &[u64], pid: u32, tid: u32, progress: &Progress) -> Result<()> {
        let need = |k: usize| {
            if a.len() < k {
                Err(Error::usage(format!("event {code} has {} arguments, needs {k}", a.len())))
            } else {
                Ok(())
            }
        };
        let fd = |v: u64| v as i64 as i32;
        let e = match code {
            1 => {
                need(6)?;
                Event::Mmap { addr: a[0], len: a[1], prot: a[2] as u8, flags: a[3] as u32, fd: fd(a[4]), offset: a[5] }
            }
            2 => {
                need(2)?;
                Event::Munmap { addr: a[0], len: a[1] }
            }
            3 => {
                need(4)?;
                Event::Mremap { old_addr: a[0], old_len: a[1], new_addr: a[2], new_len: a[3] }
            }
            4 => {
                need(3)?;
                Event::Mprotect { addr: a[0], len: a[1], prot: a[2] as u8 }
            }
            5 => {
                need(1)?;
                Event::Brk { addr: a[0] }
            }
            6 => {
                need(3)?;
                self.phase_marks += u64::from(a[1] == 0);
                Event::Madvise { addr: a[0], len: a[1], advice: a[2] as u32 }
            }
            7 => {
                need(1)?;
                let host = a[0] as u32;
                let child = self.pids.len() as u32 + 1;
                self.pids.insert(host, child);
                self.host_of.insert(child, host);
                self.writer.event(Event::Fork { child })?;
                // The child's records that came early, now that it exists.
                if let Some(held) = self.held.remove(&host) {
                    for p in held {
                        self.decode(&p, progress)?;
                    }
                    // Back to the parent for whatever follows in its packet.
                    self.cur = Some((pid, tid));
                    self.writer.event(Event::Context { pid, tid })?;
                }
                return Ok(());
            }
            8 => {
                need(1)?;
                self.endings.insert(pid, Ending::Exit(a[0] as i64 as i32));
                Event::Exit { code: a[0] as i64 as i32 }
            }
            9 => {
                need(3)?;
                let path = path_arg(&a[2..]).ok_or_else(|| Error::usage("open: path longer than its words"))?;
                Event::FileOpen { fd: fd(a[0]), path, size: a[1] }
            }
            10 => {
                need(1)?;
                Event::FileClose { fd: fd(a[0]) }
            }
            11 => {
                need(3)?;
                Event::FileRead { fd: fd(a[0]), offset: a[1], len: a[2] }
            }
            12 => {
                need(1)?;
                Event::Insns { count: a[0] }
            }
            EV_EXEC => {
                self.endings.insert(pid, Ending::Exec(path_arg(a).unwrap_or_default()));
                return Ok(());
            }
            EV_THREAD => return Ok(()),
            EV_SIGNAL => {
                self.endings.entry(pid).or_insert(Ending::Signal);
                return Ok(());
            }
            c => return Err(Error::usage(format!("unknown event code {c}"))),
        };
        // An exec that failed is followed by more of the same program.
        if matches!(self.endings.get(&pid), Some(Ending::Exec(_))) && !matches!(e, Event::Exit { .. }) {
            self.endings.remove(&pid);
        }
        self.writer.event(e)
    }

    /// Read packets from `fd` (the receiving end of the plugin's SOCK_SEQPACKET socket) until
    /// every sender has closed it, or `progress.stop` is set.
    /// Collapse runs within 2^shift bytes (the plugin's `collapse=line` sends runs of one line;
    /// the writer must not join them again into runs of a page).
    pub fn set_collapse_shift(&mut self, shift: u32) {
        self.writer.set_collapse_shift(shift);
    }

    pub fn receive(&mut self, fd: i32, progress: &Progress) -> Result<()> {
        let mut buf = vec![0u8; MAX_PACKET + 1];
        loop {
            if progress.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, 200) };
            if r == 0 {
                continue;
            }
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io(SOURCE, &e));
            }
            // SAFETY: buf is valid for buf.len() bytes.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            if n == 0 {
                return Ok(()); // every writer closed its end
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted || e.kind() == std::io::ErrorKind::WouldBlock {
                    continue;
                }
                return Err(Error::io(SOURCE, &e));
            }
            let n = n as usize;
            if n > MAX_PACKET {
                return Err(Error::trace(SOURCE, self.packets, format!("packet {}: larger than any the plugin sends", self.packets)));
            }
            progress.packets.fetch_add(1, Ordering::Relaxed);
            progress.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
            self.packet(&buf[..n], progress)?;
        }
    }

    /// The write error that stopped recording, if any.
    pub fn write_error(&self) -> Option<&Error> {
        self.failed.as_ref()
    }

    /// End the trace. `interrupted`: the capture was stopped before the program finished.
    /// Processes that exec'd an untraced program get an `exit` here; any process whose records
    /// simply stop (killed outright) makes the trace truncated.
    pub fn finish(mut self, interrupted: bool) -> Result<CaptureSummary> {
        // Children whose fork never came (their parent was killed before sending it).
        let mut orphans: Vec<u32> = self.held.keys().copied().collect();
        orphans.sort_unstable();
        for host in orphans {
            let child = self.pids.len() as u32 + 1;
            self.pids.insert(host, child);
            self.host_of.insert(child, host);
            self.orphans += 1;
            for p in self.held.remove(&host).unwrap_or_default() {
                self.decode(&p, &Progress::default())?;
            }
        }
        let mut endings = Vec::new();
        let mut cut = false;
        let host_of = self.host_of.clone();
        for (&pid, &host) in &host_of {
            let end = self.endings.get(&pid).cloned();
            if self.failed.is_none() {
                match &end {
                    Some(Ending::Exec(_)) | Some(Ending::Signal) => {
                        if self.cur.map(|c| c.0) != Some(pid) {
                            let tid = self.first_tid.get(&pid).copied().unwrap_or(0);
                            self.writer.event(Event::Context { pid, tid })?;
                            self.cur = Some((pid, tid));
                        }
                        self.writer.event(Event::Exit { code: if matches!(end, Some(Ending::Signal)) { -1 } else { 0 } })?;
                    }
                    Some(Ending::Exit(_)) => {}
                    None => cut = true,
                }
            }
            endings.push((pid, host, end));
        }
        let truncated = interrupted || cut || self.failed.is_some();
        if truncated {
            self.writer.mark_truncated();
        }
        let threads = self.tids.len() as u32;
        let processes = self.pids.len() as u32;
        let (write, write_error) = match self.failed.take() {
            Some(e) => (self.writer.salvage()?, Some(e.to_string())),
            None => match self.writer.finish_or_salvage() {
                Ok(w) => (w, None),
                Err((w, e)) => (w, Some(e.to_string())),
            },
        };
        Ok(CaptureSummary {
            write,
            processes,
            threads,
            packets: self.packets,
            endings,
            orphans: self.orphans,
            phase_marks: self.phase_marks,
            truncated: truncated || write_error.is_some(),
            write_error,
        })
    }

    /// Host pid of the traced command.
    pub fn root(&self) -> u32 {
        self.root
    }
}
