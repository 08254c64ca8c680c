//! pagemap and kpageflags words decoded as the kernel documents them, and errno -> failure.

use superpager_core::units::Pfn;
use superpager_live::collapse::CollapseFailure;
use superpager_live::pagemap::{KpageFlags, PagemapEntry};

#[test]
fn pagemap_entries() {
    let present = PagemapEntry((1 << 63) | 0x1234);
    assert!(present.present() && !present.swapped());
    assert_eq!(present.pfn(), Some(Pfn(0x1234)));
    let hidden = PagemapEntry(1 << 63); // present, frame hidden from an unprivileged reader
    assert_eq!(hidden.pfn(), None);
    let swapped = PagemapEntry((1 << 62) | 0x55);
    assert!(!swapped.present() && swapped.swapped() && swapped.pfn().is_none());
    assert!(PagemapEntry((1 << 63) | (1 << 61) | 1).file_or_shared());
    assert_eq!(PagemapEntry((1 << 63) | (1 << 55) | 7).pfn(), Some(Pfn(7)), "bit 55 (soft-dirty) is not part of the frame");
}

#[test]
fn page_flags() {
    let head = KpageFlags((1 << 15) | (1 << 22) | (1 << 12));
    assert!(head.head() && !head.tail() && head.has(KpageFlags::THP) && head.has(KpageFlags::ANON));
    assert!(KpageFlags(1 << 16).tail());
    assert!(KpageFlags(1 << 24).zero_page());
}

#[test]
fn collapse_failures_by_errno() {
    assert_eq!(CollapseFailure::from_errno(libc::EAGAIN), CollapseFailure::Busy);
    assert_eq!(CollapseFailure::from_errno(libc::ENOMEM), CollapseFailure::NoHugePage);
    assert_eq!(CollapseFailure::from_errno(libc::EINVAL), CollapseFailure::NotEligible);
    assert_eq!(CollapseFailure::from_errno(libc::EPERM), CollapseFailure::NotPermitted);
    assert_eq!(CollapseFailure::from_errno(libc::ESRCH), CollapseFailure::Gone);
    assert_eq!(CollapseFailure::from_errno(libc::EIO), CollapseFailure::Other);
    let names: Vec<_> = CollapseFailure::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["busy", "no_huge_page", "not_eligible", "not_permitted", "gone", "other"]);
}
