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
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
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
    fn rejects_overlong_and_short() {
        let mut p = 0;
        assert_eq!(get_u64(&[0x80, 0x80], &mut p), None);
        let over = [0xffu8; 11];
        p = 0;
        assert_eq!(get_u64(&over, &mut p), None);
    }
}
