//! smaps parsing, VMA kinds and the eligibility rule live policies use.

use superpager_live::procfs::{aligned_inside, parse_smaps, VmaKind};
use superpager_live::ranges::{eligible, VmaSkip};

const SMAPS: &str = "\
7f0000000000-7f0000a00000 rw-p 00000000 00:00 0 
Size:              10240 kB
Rss:                8192 kB
Anonymous:          8192 kB
AnonHugePages:      4096 kB
Swap:                  0 kB
KernelPageSize:        4 kB
THPeligible:    1
VmFlags: rd wr mr mw me ac hg
7f0000c00000-7f0001000000 rw-p 00000000 00:00 0 
Rss:                4096 kB
KernelPageSize:        4 kB
THPeligible:    0
VmFlags: rd wr mr mw me ac nh
55d000000000-55d000021000 rw-p 00000000 00:00 0                          [heap]
Rss:                 132 kB
VmFlags: rd wr mr mw me ac
7f1000000000-7f1040000000 rw-s 00000000 00:10 123                        /anon_hugepage (deleted)
Rss:             1048576 kB
KernelPageSize:  1048576 kB
VmFlags: rd wr sh mr mw me ms de ht
7f2000000000-7f2000200000 r-xp 00000000 08:01 4242                       /usr/lib/libc.so.6
Rss:                1024 kB
VmFlags: rd ex mr mw me
";

#[test]
fn parses_fields_in_bytes_and_kinds() {
    let v = parse_smaps(SMAPS, "test").unwrap();
    assert_eq!(v.len(), 5);
    assert_eq!((v[0].start, v[0].end), (0x7f00_0000_0000, 0x7f00_00a0_0000));
    assert_eq!(v[0].rss, 8 << 20);
    assert_eq!(v[0].anon_huge, 4 << 20);
    assert!(v[0].thp_eligible && v[0].has_flag("hg"));
    assert_eq!(v[0].kind(), VmaKind::Anon);
    assert_eq!(v[2].kind(), VmaKind::Heap);
    assert_eq!(v[3].kind(), VmaKind::Hugetlb);
    assert_eq!(v[3].kernel_page_size, 1 << 30);
    assert_eq!(v[4].kind(), VmaKind::File);
    assert_eq!(v[4].name, "/usr/lib/libc.so.6");
}

#[test]
fn eligibility_names_its_reason() {
    let v = parse_smaps(SMAPS, "test").unwrap();
    assert_eq!(eligible(&v[0]), Ok(()), "not THPeligible in madvise mode does not matter to MADV_COLLAPSE");
    assert_eq!(eligible(&v[1]), Err(VmaSkip::NoHugepage));
    assert_eq!(eligible(&v[2]), Err(VmaSkip::TooSmall));
    assert_eq!(eligible(&v[3]), Err(VmaSkip::NotAnonymous));
    assert_eq!(eligible(&v[4]), Err(VmaSkip::NotAnonymous));
}

#[test]
fn aligned_ranges_inside_a_vma() {
    let m = 2 << 20;
    assert_eq!(aligned_inside(m + 4096, 4 * m, m), (2 * m, 4 * m));
    assert_eq!(aligned_inside(m + 4096, 2 * m + 4096, m), (2 * m, 2 * m), "no whole range");
    assert_eq!(aligned_inside(0, m, m), (0, m));
}

#[test]
fn bad_lines_name_the_file_and_line() {
    let e = parse_smaps("Rss: 4 kB\n", "/proc/1/smaps").unwrap_err().to_string();
    assert!(e.contains("/proc/1/smaps: line 1"), "{e}");
    let e = parse_smaps("7f00-7f10 rw-p 0 00:00 0\nRss: lots kB\n", "f").unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("Rss"), "{e}");
    let e = parse_smaps("7f10-7f00 rw-p 0 00:00 0\n", "f").unwrap_err().to_string();
    assert!(e.contains("start >= end"), "{e}");
}
