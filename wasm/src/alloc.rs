//! Heap accounting: on wasm32 the package's global allocator is [`talc`] (smaller and faster
//! than the standard library's dlmalloc on wasm) wrapped in a live-bytes counter, so JS can
//! check that `.free()` really returned a session's memory (`WebAssembly.Memory` itself never
//! shrinks; see `wasm/README.md`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes currently allocated on the heap through the counting allocator.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Bytes currently allocated by Rust code in this module (0 on non-wasm targets, where the
/// counting allocator is not installed).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

#[cfg(target_arch = "wasm32")]
mod counting {
    use std::alloc::{GlobalAlloc, Layout};
    use std::sync::atomic::Ordering;

    use super::LIVE;

    /// Talc on memory grown from the wasm linear memory (single-threaded wasm only: this crate
    /// is built without the `atomics` target feature).
    static TALC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

    /// Talc plus a live-bytes counter.
    struct Counting;

    // SAFETY: every method forwards to the Talc allocator with the caller's arguments unchanged
    // and only updates a counter, so Talc's guarantees carry over.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { TALC.alloc(layout) };
            if !p.is_null() {
                LIVE.fetch_add(layout.size(), Ordering::Relaxed);
            }
            p
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { TALC.alloc_zeroed(layout) };
            if !p.is_null() {
                LIVE.fetch_add(layout.size(), Ordering::Relaxed);
            }
            p
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { TALC.dealloc(ptr, layout) };
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let p = unsafe { TALC.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
                LIVE.fetch_add(new_size, Ordering::Relaxed);
            }
            p
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;
}

/// Bytes of wasm heap currently allocated by kvscope (traces, sessions, buffers). Drops back
/// when objects are `.free()`d, even though `WebAssembly.Memory` never shrinks.
#[wasm_bindgen::prelude::wasm_bindgen(js_name = heapBytes)]
pub fn heap_bytes() -> usize {
    live_bytes()
}
