//! LEB128 varints and zigzag, the building blocks of the .spt record encoding.

#[inline(always)]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline(always)]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline(always)]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Read a varint at `*pos`. Returns None if the bytes end first or the value exceeds 64 bits.
#[inline(always)]
pub fn get_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    // Fast path, the common case in a chunk's payload: eight bytes are there and the varint ends
    // within them. Its 7-bit groups are gathered from one little-endian word without a loop
    // (the trace decoder runs beside the simulation, on the core it would otherwise share).
    if let Some(b) = buf.get(*pos..*pos + 8) {
        let w = u64::from_le_bytes(b.try_into().unwrap());
        let stops = !w & 0x8080_8080_8080_8080;
        if stops != 0 {
            // The bits up to the first byte without a continuation bit, and that byte's length.
            let keep = stops ^ (stops - 1);
            *pos += (stops.trailing_zeros() / 8 + 1) as usize;
            let w = w & keep & 0x7f7f_7f7f_7f7f_7f7f;
            let w = (w & 0x007f_007f_007f_007f) | ((w & 0x7f00_7f00_7f00_7f00) >> 1);
            let w = (w & 0x0000_3fff_0000_3fff) | ((w & 0x3fff_0000_3fff_0000) >> 2);
            return Some((w & 0x0fff_ffff) | ((w & 0x0fff_ffff_0000_0000) >> 4));
        }
    }
    // By value, so that `pos` does not escape and can stay in a register in the caller's loop.
    let (v, end) = get_u64_slow(buf, *pos)?;
    *pos = end;
    Some(v)
}

/// The byte-at-a-time reader: varints near the end of the buffer, or longer than eight bytes.
/// Returns the value and the position after it.
#[inline(never)]
fn get_u64_slow(buf: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(pos)?;
        pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some((v, pos));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn roundtrip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_u64(&mut b, v);
            let mut p = 0;
            assert_eq!(get_u64(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
    #[test]
    fn word_path_equals_byte_path() {
        // Every length from 1 to 10 bytes, at the end of the buffer (byte path) and with
        // padding after it (word path), including non-canonical encodings.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..20_000u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let v = rng >> (i % 64);
            let mut b = Vec::new();
            put_u64(&mut b, v);
            if i % 5 == 0 && b.len() < 10 {
                // Overlong: a redundant zero group.
                *b.last_mut().unwrap() |= 0x80;
                b.push(0);
            }
            let mut p2 = 0;
            let (short, p1) = match get_u64_slow(&b, 0) {
                Some((v, end)) => (Some(v), end),
                None => (None, 0),
            };
            let mut padded = b.clone();
            padded.extend_from_slice(&[0xff; 9]);
            assert_eq!(get_u64(&padded, &mut p2), short, "{b:02x?}");
            assert_eq!(short, Some(v));
            assert_eq!((p1, p2), (b.len(), b.len()));
        }
    }
    #[test]
    fn rejects_overlong_and_short() {
        let mut p = 0;
        assert_eq!(get_u64(&[0x80, 0x80], &mut p), None);
        let over = [0xffu8; 11];
        p = 0;
        assert_eq!(get_u64(&over, &mut p), None);
    }
}
