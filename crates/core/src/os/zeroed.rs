//! A fixed-length array of integers backed by its own anonymous memory mapping: zero without
//! being written, committed by the host only where touched, returned whole on drop.
//!
//! Why not `vec![0; n]`: the allocator serves a large zeroed `Vec` from calloc, which returns
//! fresh (already zero) pages only the first time; once a large block has been freed, glibc
//! raises its mmap threshold and later ones come from the heap, zeroed with memset. A frame
//! table for 64GiB of simulated memory is 300MB, and every simulation in a process (a `compare`,
//! a notebook, the benchmark's rounds) would pay to clear it.

use std::ops::{Deref, DerefMut};

/// Integer types for which all-zero bytes are a valid value.
pub trait Zeroable: Copy {}
impl Zeroable for u8 {}
impl Zeroable for u32 {}
impl Zeroable for u64 {}

pub struct ZeroedBuf<T: Zeroable> {
    ptr: *mut T,
    len: usize,
}

// The buffer owns its memory exclusively, like a Vec.
unsafe impl<T: Zeroable + Send> Send for ZeroedBuf<T> {}
unsafe impl<T: Zeroable + Sync> Sync for ZeroedBuf<T> {}

impl<T: Zeroable> ZeroedBuf<T> {
    pub fn new(len: usize) -> Result<ZeroedBuf<T>, String> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or("frame table size overflows")?;
        if bytes == 0 {
            return Ok(ZeroedBuf { ptr: std::ptr::NonNull::dangling().as_ptr(), len: 0 });
        }
        // SAFETY: a private anonymous mapping of `bytes`; checked for failure below.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(format!("cannot map {bytes} bytes for the frame table: {}", std::io::Error::last_os_error()));
        }
        Ok(ZeroedBuf { ptr: p as *mut T, len })
    }
}

impl<T: Zeroable> Deref for ZeroedBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` maps `len` zero-initialised (or since written) values of T.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Zeroable> DerefMut for ZeroedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: Zeroable> Drop for ZeroedBuf<T> {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping exactly the mapping made in `new`.
            unsafe {
                libc::munmap(self.ptr as *mut libc::c_void, self.len * std::mem::size_of::<T>());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_zero_and_keeps_writes() {
        let mut b: ZeroedBuf<u32> = ZeroedBuf::new(1 << 20).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        b[12345] = 7;
        b[..4].fill(3);
        assert_eq!((b[12345], b[3], b.len()), (7, 3, 1 << 20));
        let e: ZeroedBuf<u64> = ZeroedBuf::new(0).unwrap();
        assert!(e.is_empty());
    }
}
