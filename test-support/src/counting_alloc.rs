//! A counting global allocator: [`allocations`] is how many allocations a
//! closure makes on the calling thread. A test binary installs it itself
//! (were the crate to, every test binary linking it would run on it):
//!
//! ```
//! use limiter_test_support::counting_alloc::{Counting, allocations};
//!
//! #[global_allocator]
//! static GLOBAL: Counting = Counting;
//!
//! fn main() {
//!     let (n, boxed) = allocations(|| Box::new(7_u64));
//!     assert_eq!((n, *boxed), (1, 7));
//!     assert_eq!(allocations(|| 7_u64 + 1).0, 0);
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The allocator: [`System`], counting each allocation on its thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// Safety: every call is forwarded to `System` unchanged; the counter is a
// const-initialised thread-local without a destructor, which is safe to
// touch from inside the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // Safety: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Safety: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // Safety: the caller's contract is System's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // Safety: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations `f` makes on this thread (0 unless [`Counting`] is the
/// binary's global allocator).
pub fn allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    (ALLOCATIONS.with(Cell::get) - before, out)
}
