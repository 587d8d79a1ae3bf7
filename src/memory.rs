//! The process's allocator, and memory handed back to the system after a burst; imports
//! nothing of the crate.
//!
//! The allocator is mimalloc: searches and requests allocate and free many small buffers
//! on every core, where glibc's malloc took ~18 % of a search's CPU (benches/README,
//! "search — mimalloc"). It is set up to keep a daemon's resident size low: freed pages go
//! back to the system at once (but for a moment while a local vault starts or serves:
//! [`starting`], [`serving`]; and up to 32 MiB of large blocks kept for reuse in hosted
//! mode: [`keep_large_blocks`]), and no transparent huge pages, which would round small
//! heaps up to 2 MiB (mimalloc does not ask for them: the `no_thp` feature; the process
//! refuses them where the host gives them unasked: [`configure`]).

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// mimalloc, with large blocks kept for reuse when [`keep_large_blocks`] says so.
struct Allocator;

/// Blocks of at least this size are kept.
const KEEP_FROM: usize = 128 * 1024;

/// At most this many bytes are kept, in at most [`SLOTS`] blocks.
const KEEP_AT_MOST: usize = 32 * 1024 * 1024;
const SLOTS: usize = 64;

/// Large blocks freed and kept for the next allocation of the same layout, instead of
/// handed back to the system and faulted in again, zeroed by the kernel, a moment later.
/// Every search index segment, however small (a hosted vault's overlay part of one
/// note), allocates and frees several MiB of them (tantivy's 1 MiB arena pages, term
/// tables); purged at once (hosted mode's purge delay is 0), their page faults were
/// most of an instance's CPU under writes (benches/README.md, "hosted creates in one
/// flight"). A process-wide pool of bounded size, unlike a purge delay, which kept pages
/// in each thread's heap and grew the memory of every idle open vault. Emptied by
/// [`release_free_memory`] (any vault's index writer going idle, idle vaults closing);
/// first come, first kept until then.
struct Kept {
    slots: [(usize, usize, usize); SLOTS],
    bytes: usize,
}

static KEEPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static KEPT: std::sync::Mutex<Kept> = std::sync::Mutex::new(Kept {
    slots: [(0, 0, 0); SLOTS],
    bytes: 0,
});

fn kept() -> std::sync::MutexGuard<'static, Kept> {
    // Nothing panics while it is held.
    KEPT.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Kept {
    /// A kept block of exactly `layout`, taken out.
    fn take(&mut self, layout: std::alloc::Layout) -> Option<*mut u8> {
        let slot = self.slots.iter_mut().find(|(ptr, size, align)| {
            *ptr != 0 && *size == layout.size() && *align == layout.align()
        })?;
        let ptr = std::mem::replace(&mut slot.0, 0);
        self.bytes -= layout.size();
        Some(ptr as *mut u8)
    }

    /// Keep `ptr` if there is room: whether it was kept.
    fn put(&mut self, ptr: *mut u8, layout: std::alloc::Layout) -> bool {
        if self.bytes + layout.size() > KEEP_AT_MOST {
            return false;
        }
        let Some(slot) = self.slots.iter_mut().find(|s| s.0 == 0) else {
            return false;
        };
        *slot = (ptr as usize, layout.size(), layout.align());
        self.bytes += layout.size();
        true
    }
}

fn keeps(layout: std::alloc::Layout) -> bool {
    layout.size() >= KEEP_FROM && KEEPING.load(std::sync::atomic::Ordering::Relaxed)
}

// SAFETY: every block comes from mimalloc and goes back to it with its layout; a kept
// block is owned by `KEPT` alone until it is handed out again, for the very layout it
// was allocated with.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if keeps(layout) {
            if let Some(ptr) = kept().take(layout) {
                return ptr;
            }
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if keeps(layout) {
            if let Some(ptr) = kept().take(layout) {
                // SAFETY: the block is `layout.size()` bytes, owned by the caller now.
                unsafe { std::ptr::write_bytes(ptr, 0, layout.size()) };
                return ptr;
            }
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if keeps(layout) && kept().put(ptr, layout) {
            return;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on (a block handed out from `KEPT` is
        // mimalloc's, of this layout).
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// From now on, keep large freed blocks for reuse (hosted mode: see [`Kept`]), up to
/// [`KEEP_AT_MOST`] bytes for the whole process.
pub fn keep_large_blocks() {
    KEEPING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Hand the kept blocks back (to mimalloc, which purges them).
fn release_kept() {
    let blocks = {
        let mut kept = kept();
        kept.bytes = 0;
        std::mem::replace(&mut kept.slots, [(0, 0, 0); SLOTS])
    };
    for (ptr, size, align) in blocks.into_iter().filter(|s| s.0 != 0) {
        // SAFETY: a kept block, of this layout, owned by nobody else.
        unsafe {
            std::alloc::GlobalAlloc::dealloc(
                &mimalloc::MiMalloc,
                ptr as *mut u8,
                std::alloc::Layout::from_size_align_unchecked(size, align),
            )
        }
    }
}

/// `mi_option_purge_delay` in mimalloc.h (the same number in its v2 and v3; the crate's
/// bindings do not name it, and `libmimalloc-sys` is pinned in Cargo.toml).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Set the allocator up for a long-running daemon; call first thing in `main`. Freed pages
/// are purged (handed back to the system) at once instead of after mimalloc's default
/// second (this overrides `MIMALLOC_PURGE_DELAY`; a local vault's start keeps them
/// [`START_PURGE_DELAY_MS`]), so a burst (the first start's scan,
/// index build and history pack together) does not hold the pages of one step while the
/// next allocates its own. And the process takes no transparent huge pages, also on a
/// host whose setting is `always` rather than `madvise`.
pub fn configure() {
    purge_delay(0);
    #[cfg(target_os = "linux")]
    // SAFETY: a flag of this process (inherited by its children), no memory is touched.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// How long freed pages are kept while a local vault starts ([`starting`]).
const START_PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Before a local vault's start-up scan: freed pages are kept [`START_PURGE_DELAY_MS`]
/// before they go back to the system. The catalog keeps the notes' bytes packed, not as
/// read, so the pages a file's parse frees empty out; purged at once, the next file's
/// parse faulted them in again, and the scan spent far more time in the kernel
/// (benches/README.md, "packed note bytes"). That short a delay leaves the start's peak
/// as it was. Ended by [`serving`] or [`started`].
pub fn starting() {
    purge_delay(START_PURGE_DELAY_MS);
}

/// The start of a vault that will not call [`serving`] is over (a daemon without a
/// watch, a hosted instance's lobby): freed pages go back at once again, as
/// [`configure`] set. Kept any time in hosted mode, they grew each idle open vault's
/// memory (benches/README.md, "packed note bytes").
pub fn started() {
    purge_delay(0);
}

/// How long freed pages are kept once the daemon serves ([`serving`]).
const SERVING_PURGE_DELAY_MS: std::ffi::c_long = 100;

/// Once the start of a local daemon that watches its folder is over (the index built,
/// the rescan done): freed pages are kept [`SERVING_PURGE_DELAY_MS`] before they go back
/// to the system. Every search index segment, however small, fills and frees ~15 MiB (a
/// term table, arenas, a term dictionary builder per field); purged at once, its pages
/// were faulted in again at the next segment: 7.5 ms for a one-note segment, 1 ms with
/// the pages kept (benches/README.md, "the overlay without an index writer"). Not in
/// hosted mode: there the pages kept doubled an instance's memory per idle open vault
/// (548 to 1,008 KiB; where they stay is not known).
pub fn serving() {
    purge_delay(SERVING_PURGE_DELAY_MS);
}

/// How long mimalloc keeps freed pages before it hands them back, from now on.
fn purge_delay(ms: std::ffi::c_long) {
    // SAFETY: sets a number in mimalloc's option table, which it reads at each purge
    // (other threads may read the old number once: no memory is involved).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms) }
}

/// Hand back what the threads of rayon's pool (the scan's workers) hold free: what they
/// made and another thread freed waits in their heaps until they allocate again, and
/// idle workers may not for a long time. (Waits for each worker's current job: called
/// after a scan, not from the index writer.)
pub fn release_workers_free_memory() {
    // SAFETY: collects each pool thread's free pages and purges what mimalloc holds free.
    rayon::broadcast(|_| unsafe { libmimalloc_sys::mi_collect(true) });
}

/// Hand memory freed after a burst (the start-up scan, a rescan, the index build) back to
/// the system, from both allocators: mimalloc's (the Rust code's) and glibc's, which the
/// C code (SQLite) allocates with; the daemon's resident size would stay at its peak.
pub fn release_free_memory() {
    release_kept();
    // SAFETY: collects this thread's free pages and purges what mimalloc holds free.
    unsafe { libmimalloc_sys::mi_collect(true) }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's heaps to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}
