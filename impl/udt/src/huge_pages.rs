//! Large buffers on transparent huge pages: a global allocator for the stacks' binaries.
//!
//! A connection's send and receive buffers are each a few thousand packets (12 MiB for
//! UDT's default 8192-packet buffer), written by one thread and read by another up to a
//! second later. On 4 KiB pages every third packet copied in or out is a new page, and on a
//! virtual machine each TLB miss walks two page tables: at 100 Mb/s the copies into and out
//! of the send buffer took a quarter of the sender's CPU. Linux backs such buffers with
//! 2 MiB pages where the process asks for them (`madvise(MADV_HUGEPAGE)`; the distributions'
//! default, `transparent_hugepage=madvise`, gives none unasked). [`HugePages`] asks for every
//! allocation of [`HUGE_PAGES_FROM`] bytes or more and leaves the rest to the system
//! allocator (docs/results/2026-11-29-sender-copies.md).
//!
//! It is the runtime's choice, not the protocol's: the sans-IO cores allocate their buffers
//! as plain vectors and never know. A binary opts in (the family's tools do, once, in
//! `udt_cli`):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: udt::HugePages = udt::HugePages;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};

/// The huge page size the mappings are aligned to (x86-64's and arm64's with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;
/// Allocations of at least this many bytes are mappings of their own on huge pages: a smaller
/// one could not hold a whole huge page.
pub const HUGE_PAGES_FROM: usize = HUGE_PAGE;

/// The system allocator for small allocations; every one of [`HUGE_PAGES_FROM`] bytes or more
/// is its own anonymous mapping, aligned to 2 MiB and advised onto huge pages before any page
/// of it is touched (see the [module docs](self)).
pub struct HugePages;

/// Whether an allocation of `layout` is one of ours (the same answer for its `dealloc`).
fn ours(layout: Layout) -> bool {
    layout.size() >= HUGE_PAGES_FROM && layout.align() <= HUGE_PAGE
}

/// The mapping's length for `size` bytes: whole 4 KiB pages.
fn mapped_len(size: usize) -> usize {
    size.next_multiple_of(4096)
}

/// A fresh anonymous mapping of `size` bytes (zeroed, as every new mapping is), starting on a
/// 2 MiB boundary and advised onto huge pages; null when the kernel refuses the mapping.
fn map(size: usize) -> *mut u8 {
    let len = mapped_len(size);
    let over = len + HUGE_PAGE;
    // SAFETY: a new private anonymous mapping; nothing else refers to it.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let raw = raw as usize;
    let start = raw.next_multiple_of(HUGE_PAGE);
    // SAFETY: both pieces lie in the mapping just made, outside [start, start + len), on page
    // boundaries; the advice changes how the rest is backed, never its contents (where the
    // kernel has no transparent huge pages it refuses it and nothing changes).
    unsafe {
        if start > raw {
            libc::munmap(raw as *mut libc::c_void, start - raw);
        }
        let tail = raw + over - (start + len);
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    start as *mut u8
}

// SAFETY: small allocations go to `System`, which upholds GlobalAlloc's contract; large ones
// are mappings of their own, aligned to 2 MiB (at least any alignment `ours` accepts),
// unmapped by `dealloc`, which `ours` routes by the same layout.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ours(layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's layout, as GlobalAlloc::alloc received it.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ours(layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's layout, as GlobalAlloc::alloc_zeroed received it.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ours(layout) {
            // SAFETY: `ptr` is a mapping `map` made for this layout's size.
            unsafe { libc::munmap(ptr as *mut libc::c_void, mapped_len(layout.size())) };
        } else {
            // SAFETY: `ours` said no to this layout at its allocation too: `System` made it.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !ours(layout) && !ours(new) {
            // SAFETY: `System` made `ptr` with `layout` (`ours` said no) and keeps it there.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `new` is a valid layout of non-zero size (see above).
        let p = unsafe { self.alloc(new) };
        if !p.is_null() {
            // SAFETY: both blocks are live and at least this long, and distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kB of the `len` bytes at `ptr` on huge pages: the AnonHugePages of every mapping in
    /// /proc/self/smaps that overlaps them (the advice splits the allocation's mapping).
    fn anon_huge_kb(ptr: *const u8, len: usize) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let (lo, hi) = (ptr as usize, ptr as usize + len);
        let (mut inside, mut seen, mut kb) = (false, false, 0);
        for line in smaps.lines() {
            let range = line.split_once(' ').and_then(|(r, _)| r.split_once('-'));
            if let Some((a, b)) =
                range.and_then(|(a, b)| Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?)))
            {
                inside = a < hi && lo < b;
                seen |= inside;
                continue;
            }
            if let Some(v) = line.strip_prefix("AnonHugePages:").filter(|_| inside) {
                kb += v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()?;
            }
        }
        seen.then_some(kb)
    }

    fn thp_mode() -> Option<String> {
        let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
        Some(s.split('[').nth(1)?.split(']').next()?.to_string())
    }

    /// A block from [`HugePages`], freed when dropped.
    struct Block {
        p: *mut u8,
        layout: Layout,
    }

    impl Block {
        fn new(size: usize, zeroed: bool) -> Block {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: a valid layout of non-zero size.
            let p = unsafe {
                if zeroed {
                    HugePages.alloc_zeroed(layout)
                } else {
                    HugePages.alloc(layout)
                }
            };
            assert!(!p.is_null());
            Block { p, layout }
        }

        fn resize(&mut self, size: usize) {
            // SAFETY: `p` was made by HugePages with `layout`; `size` is non-zero.
            let p = unsafe { HugePages.realloc(self.p, self.layout, size) };
            assert!(!p.is_null());
            self.p = p;
            self.layout = Layout::from_size_align(size, self.layout.align()).unwrap();
        }

        fn bytes(&mut self) -> &mut [u8] {
            // SAFETY: `p` is live for `layout.size()` bytes, and only this borrow reaches them.
            unsafe { std::slice::from_raw_parts_mut(self.p, self.layout.size()) }
        }
    }

    impl Drop for Block {
        fn drop(&mut self) {
            // SAFETY: `p` was made by HugePages with `layout` and is freed once.
            unsafe { HugePages.dealloc(self.p, self.layout) }
        }
    }

    #[test]
    fn a_large_buffer_is_zeroed_and_backed_by_huge_pages_where_the_kernel_gives_them() {
        let mut b = Block::new(12 << 20, true);
        assert_eq!(b.p as usize % HUGE_PAGE, 0, "a large allocation starts on a huge page");
        // Touch every page, as a send buffer's first pass does.
        for (i, page) in b.bytes().chunks_mut(4096).enumerate() {
            assert!(page.iter().all(|&x| x == 0), "page {i} of a zeroed allocation");
            page[0] = 1;
        }
        let huge = anon_huge_kb(b.p, b.layout.size());
        drop(b);
        if !matches!(thp_mode().as_deref(), Some("madvise" | "always")) {
            eprintln!("huge pages not checked: this kernel gives none on request");
            return;
        }
        // Most of it: a kernel short of contiguous memory may give fewer than all six.
        let huge = huge.expect("the allocation is in /proc/self/smaps");
        assert!(huge >= 6 << 10, "only {huge} kB of 12 MiB on huge pages");
    }

    #[test]
    fn contents_survive_growing_past_the_threshold_and_shrinking_below_it() {
        let mut b = Block::new(1000, false);
        for (i, x) in b.bytes().iter_mut().enumerate() {
            *x = i as u8;
        }
        b.resize(12 << 20);
        assert_eq!(b.p as usize % HUGE_PAGE, 0, "grown past the threshold: a mapping of its own");
        *b.bytes().last_mut().unwrap() = 9;
        b.resize(500);
        assert!(b.bytes().iter().enumerate().all(|(i, &x)| x == i as u8));
    }
}
