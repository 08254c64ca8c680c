//! Units as types where a mix-up is easy and silent: byte counts (`Bytes`), page sizes
//! (`PageSize`, never a bare shift or byte count), physical frame numbers (`Pfn`, in base
//! pages) and buddy orders (`Order`) across the frame allocator's interface, and simulated time
//! (`Cycles`) at the policy interface.
//!
//! Virtual addresses stay `u64`, and size indices `u32` (an index into the machine's sizes,
//! smallest first). A `Vaddr`/`Vpn` pair was defined here and never adopted; it was removed
//! (issue 19) rather than threaded through: every use of a virtual address in the TLB, the
//! walker and the policies is mask-and-shift arithmetic at a size the code names next to it,
//! so a wrapper would be unwrapped at nearly every use, on the per-access path among others.
//! The mix-up a type would catch there, a frame number passed as an address, is caught by
//! `Pfn` already: page tables, reverse maps and the allocator take and return `Pfn`.

use std::fmt;

/// A byte count. Parses and prints human units (binary: 1KiB = 1024 bytes; "KB" is read as KiB,
/// as page-size names conventionally are).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Parse "4GiB", "4G", "4GB", "64k", "4096", "1.5GiB".
    pub fn parse(s: &str) -> Result<Bytes, String> {
        let t = s.trim();
        if t.is_empty() {
            return Err("empty size".into());
        }
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let num = num.replace('_', "");
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            other => return Err(format!("unknown size unit '{other}' in '{s}' (use B, KiB, MiB, GiB, TiB)")),
        };
        if let Ok(n) = num.parse::<u64>() {
            return n.checked_mul(mult).map(Bytes).ok_or_else(|| format!("size '{s}' overflows"));
        }
        match num.parse::<f64>() {
            Ok(f) if f >= 0.0 && f.is_finite() => {
                let v = f * mult as f64;
                if v.fract() != 0.0 {
                    return Err(format!("size '{s}' is not a whole number of bytes"));
                }
                Ok(Bytes(v as u64))
            }
            _ => Err(format!("not a size: '{s}' (examples: 4096, 64KiB, 2MiB, 4GiB)")),
        }
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        const UNITS: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (m, u) in UNITS {
            if v >= m && v.is_multiple_of(m) {
                return write!(f, "{}{}", v / m, u);
            }
        }
        write!(f, "{}B", v)
    }
}

/// A page size: a power of two from 1KiB to 16GiB, stored as its log2 (the shift).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSize(u8);

impl PageSize {
    pub const K4: PageSize = PageSize(12);
    pub const K8: PageSize = PageSize(13);
    pub const K64: PageSize = PageSize(16);
    pub const M2: PageSize = PageSize(21);
    pub const G1: PageSize = PageSize(30);

    pub fn from_shift(shift: u8) -> Result<PageSize, String> {
        if (10..=34).contains(&shift) {
            Ok(PageSize(shift))
        } else {
            Err(format!("page size 2^{shift} is out of range (1KiB..16GiB)"))
        }
    }
    pub fn from_bytes(b: u64) -> Result<PageSize, String> {
        if b == 0 || !b.is_power_of_two() {
            return Err(format!("page size {} is not a power of two", Bytes(b)));
        }
        PageSize::from_shift(b.trailing_zeros() as u8)
    }
    pub fn parse(s: &str) -> Result<PageSize, String> {
        PageSize::from_bytes(Bytes::parse(s)?.0)
    }
    #[inline(always)]
    pub fn shift(self) -> u32 {
        self.0 as u32
    }
    #[inline(always)]
    pub fn bytes(self) -> u64 {
        1u64 << self.0
    }
    #[inline(always)]
    pub fn mask(self) -> u64 {
        self.bytes() - 1
    }
    /// How many pages of `smaller` one page of this size holds.
    pub fn pages_of(self, smaller: PageSize) -> u64 {
        debug_assert!(smaller.0 <= self.0);
        1u64 << (self.0 - smaller.0)
    }
    pub fn name(self) -> String {
        Bytes(self.bytes()).to_string()
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Bytes(self.bytes()))
    }
}

/// A physical frame number, always in units of the machine's base page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pfn(pub u64);

/// A buddy order: an extent of 2^order base frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Order(pub u8);

/// Simulated processor cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cycles(pub u64);

impl Cycles {
    /// The time handed to a hook that declared it never reads it (`Features::untimed_tlb_misses`).
    pub const UNTIMED: Cycles = Cycles(u64::MAX);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_sizes() {
        assert_eq!(Bytes::parse("4GiB").unwrap(), Bytes(4 << 30));
        assert_eq!(Bytes::parse("4G").unwrap(), Bytes(4 << 30));
        assert_eq!(Bytes::parse("64k").unwrap(), Bytes(64 << 10));
        assert_eq!(Bytes::parse("1.5KiB").unwrap(), Bytes(1536));
        assert_eq!(Bytes::parse("4096").unwrap(), Bytes(4096));
        assert!(Bytes::parse("4 parsecs").is_err());
        assert!(Bytes::parse("").is_err());
        assert!(Bytes::parse("0.3B").is_err());
    }

    #[test]
    fn page_sizes_print_and_split() {
        assert_eq!(PageSize::M2.to_string(), "2MiB");
        assert_eq!(PageSize::parse("2MiB").unwrap(), PageSize::M2);
        assert!(PageSize::parse("3KiB").is_err());
        assert_eq!(PageSize::M2.pages_of(PageSize::K4), 512);
    }
}
