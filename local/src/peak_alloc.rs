//! A global allocator that counts: the functions' own allocator (`shared::alloc`) underneath,
//! with the bytes currently allocated and the most ever allocated at once (since the last
//! `reset_peak`) kept in atomics.
//! The bench installs it to measure the heap a handler peaks at for one batch:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: local::peak_alloc::PeakAlloc = local::peak_alloc::PeakAlloc::new();
//! ALLOC.reset_peak();
//! let before = ALLOC.current();
//! handler.handle(event).await;
//! let peak_above = ALLOC.peak() - before;
//! ```
//!
//! The figures are the bytes requested (`Layout::size`), process-wide (every thread), without
//! the allocator's own overhead and fragmentation, which the resident set (`VmHWM`) includes.

use shared::alloc::Allocator;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

pub struct PeakAlloc {
    current: AtomicUsize,
    peak: AtomicUsize,
}

impl PeakAlloc {
    pub const fn new() -> Self {
        PeakAlloc {
            current: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Bytes allocated now.
    pub fn current(&self) -> usize {
        self.current.load(Relaxed)
    }

    /// The most bytes allocated at once since the last `reset_peak` (or the start).
    pub fn peak(&self) -> usize {
        self.peak.load(Relaxed)
    }

    /// Starts a new peak from what is allocated now.
    pub fn reset_peak(&self) {
        self.peak.store(self.current.load(Relaxed), Relaxed);
    }

    fn grew(&self, bytes: usize) {
        let now = self.current.fetch_add(bytes, Relaxed) + bytes;
        self.peak.fetch_max(now, Relaxed);
    }

    fn shrank(&self, bytes: usize) {
        self.current.fetch_sub(bytes, Relaxed);
    }
}

impl Default for PeakAlloc {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded to the functions' allocator unchanged; the counters only
// observe sizes.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = Allocator.alloc(layout);
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = Allocator.alloc_zeroed(layout);
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Allocator.dealloc(ptr, layout);
        self.shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = Allocator.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                self.grew(new_size - layout.size());
            } else {
                self.shrank(layout.size() - new_size);
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::PeakAlloc;
    use std::alloc::{GlobalAlloc, Layout};

    /// The lib's unit-test binary allocates through it, so a plain `Vec` is counted.
    #[global_allocator]
    static ALLOC: PeakAlloc = PeakAlloc::new();

    #[test]
    fn a_vec_raises_the_peak_by_its_size_and_dropping_it_lowers_current() {
        // Large enough that other tests running in parallel cannot hide it.
        const SIZE: usize = 64 << 20;
        ALLOC.reset_peak();
        let before = ALLOC.current();
        let v = std::hint::black_box(vec![1u8; SIZE]);
        let with_vec = ALLOC.current();
        assert!(
            ALLOC.peak() >= before + SIZE,
            "peak {} < {before} + {SIZE}",
            ALLOC.peak()
        );
        assert!(with_vec >= before + SIZE / 2);
        drop(v);
        assert!(
            ALLOC.current() + SIZE / 2 <= with_vec,
            "current {} did not fall from {with_vec}",
            ALLOC.current()
        );
        // The peak stays until it is reset, and a reset brings it down to what is allocated now.
        assert!(ALLOC.peak() >= before + SIZE);
        ALLOC.reset_peak();
        assert!(ALLOC.peak() < before + SIZE);
    }

    #[test]
    fn counts_alloc_realloc_and_dealloc_exactly() {
        let a = PeakAlloc::new();
        let layout = Layout::from_size_align(1000, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            assert_eq!((a.current(), a.peak()), (1000, 1000));
            let p = a.realloc(p, layout, 3000);
            assert!(!p.is_null());
            assert_eq!((a.current(), a.peak()), (3000, 3000));
            let bigger = Layout::from_size_align(3000, 8).unwrap();
            let p = a.realloc(p, bigger, 500);
            assert!(!p.is_null());
            assert_eq!((a.current(), a.peak()), (500, 3000));
            a.reset_peak();
            assert_eq!(a.peak(), 500);
            let z = a.alloc_zeroed(layout);
            assert!(!z.is_null() && *z == 0);
            assert_eq!((a.current(), a.peak()), (1500, 1500));
            a.dealloc(z, layout);
            a.dealloc(p, Layout::from_size_align(500, 8).unwrap());
            assert_eq!((a.current(), a.peak()), (0, 1500));
        }
    }
}
