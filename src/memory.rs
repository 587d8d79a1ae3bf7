//! The process's allocator, and memory handed back to the system after a burst; imports
//! nothing of the crate.
//!
//! The allocator is mimalloc: searches and requests allocate and free many small buffers
//! on every core, where glibc's malloc took ~18 % of a search's CPU (benches/README,
//! "search — mimalloc"). It is set up to keep a daemon's resident size low: freed pages go
//! back to the system at once (but for a moment while a local vault starts or serves:
//! [`starting`], [`serving`]; and in hosted mode, up to 32 MiB of large blocks a vault's
//! index writer keeps for reuse: [`keep_here`]), and no transparent huge pages, which
//! would round small heaps up to 2 MiB (mimalloc does not ask for them: the `no_thp`
//! feature; the process refuses them where the host gives them unasked: [`configure`]).

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// mimalloc, with large blocks kept for reuse by a thread that [`keep_here`] says keeps
/// them.
struct Allocator;

/// Blocks of at least this size are kept.
const KEEP_FROM: usize = 128 * 1024;

/// At most this many bytes are kept by one thread, in at most [`SLOTS`] blocks (one
/// overlay part of ~17 notes used ~18 MiB in 16), and by all threads together.
const KEEP_AT_MOST: usize = 32 * 1024 * 1024;
const SLOTS: usize = 32;
const KEEP_IN_ALL: usize = 96 * 1024 * 1024;

/// Large blocks a thread freed, kept for its next allocation of the same layout instead
/// of handed back to the system and faulted in again, zeroed by the kernel, a moment
/// later. Every search index segment, however small (a hosted vault's overlay part of one
/// note), allocates and frees several MiB of them (tantivy's 1 MiB arena pages, term
/// tables) in the vault's index writer thread; purged at once (hosted mode's purge delay
/// is 0), their page faults were most of an instance's CPU under writes (benches/README.md,
/// "hosted creates in one flight"). Unlike a purge delay, which kept the pages of every
/// thread's heap and grew the memory of every idle open vault, only the threads that ask
/// keep, a bounded amount, and hand it back once their writes pause ([`release_here`]) and
/// when they end. One pool per thread, not one for the process: with one pool, an
/// instance whose vaults had all closed kept 15–39 MiB more than without any (likely
/// blocks passed between threads' heaps that stayed with the heaps of ended threads;
/// benches/README.md, "a pool per thread").
struct Kept {
    on: bool,
    slots: [(usize, usize, usize); SLOTS],
    bytes: usize,
}

impl Kept {
    const EMPTY: Kept = Kept {
        on: false,
        slots: [(0, 0, 0); SLOTS],
        bytes: 0,
    };

    /// A kept block of exactly `layout`, taken out.
    fn take(&mut self, layout: std::alloc::Layout) -> Option<*mut u8> {
        let slot = self.slots.iter_mut().find(|(ptr, size, align)| {
            *ptr != 0 && *size == layout.size() && *align == layout.align()
        })?;
        let ptr = std::mem::replace(&mut slot.0, 0);
        self.bytes -= layout.size();
        KEPT_IN_ALL.fetch_sub(layout.size(), std::sync::atomic::Ordering::Relaxed);
        Some(ptr as *mut u8)
    }

    /// Keep `ptr` if this thread keeps and there is room: whether it was kept.
    fn put(&mut self, ptr: *mut u8, layout: std::alloc::Layout) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.on || self.bytes + layout.size() > KEEP_AT_MOST {
            return false;
        }
        let Some(slot) = self.slots.iter_mut().find(|s| s.0 == 0) else {
            return false;
        };
        let room = KEPT_IN_ALL.fetch_update(Relaxed, Relaxed, |all| {
            (all + layout.size() <= KEEP_IN_ALL).then_some(all + layout.size())
        });
        if room.is_err() {
            return false;
        }
        *slot = (ptr as usize, layout.size(), layout.align());
        self.bytes += layout.size();
        true
    }
}

/// Whether [`keep_here`] keeps (hosted mode: [`keep_large_blocks`]).
static KEEPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The bytes kept by every thread together, at most [`KEEP_IN_ALL`].
static KEPT_IN_ALL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

std::thread_local! {
    // No destructor (a const initializer, a type without Drop): the allocator may run
    // while a thread's locals are torn down, and registering one could allocate.
    static HERE: std::cell::RefCell<Kept> = const { std::cell::RefCell::new(Kept::EMPTY) };
}
const _: () = assert!(!std::mem::needs_drop::<std::cell::RefCell<Kept>>());

/// `f` with this thread's pool, if `layout` is large enough to be kept (and the pool is
/// reachable and not in use further up this thread's stack, which nothing that holds it
/// does).
fn with_kept<T>(layout: std::alloc::Layout, f: impl FnOnce(&mut Kept) -> Option<T>) -> Option<T> {
    if layout.size() < KEEP_FROM {
        return None;
    }
    HERE.try_with(|kept| f(&mut *kept.try_borrow_mut().ok()?))
        .ok()
        .flatten()
}

// SAFETY: every block comes from mimalloc and goes back to it with its layout; a kept
// block is owned by its thread's `HERE` alone until it is handed out again, for the very
// layout it was allocated with.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if let Some(ptr) = with_kept(layout, |kept| kept.take(layout)) {
            return ptr;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if let Some(ptr) = with_kept(layout, |kept| kept.take(layout)) {
            // SAFETY: the block is `layout.size()` bytes, owned by the caller now.
            unsafe { std::ptr::write_bytes(ptr, 0, layout.size()) };
            return ptr;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if with_kept(layout, |kept| kept.put(ptr, layout).then_some(())).is_some() {
            return;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on (a block handed out from a pool is
        // mimalloc's, of this layout).
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// From now on, threads that call [`keep_here`] keep large freed blocks (hosted mode:
/// see [`Kept`]).
pub fn keep_large_blocks() {
    KEEPING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// This thread keeps large blocks it frees for its own reuse (if [`keep_large_blocks`]
/// was called), up to [`KEEP_AT_MOST`] bytes, until the guard drops; they are handed
/// back then and by [`release_here`] or [`release_free_memory`] on this thread. For a
/// thread that builds index segments again and again: a vault's index writer. One guard
/// at a time on a thread.
pub fn keep_here() -> KeepingHere {
    if KEEPING.load(std::sync::atomic::Ordering::Relaxed) {
        HERE.with(|kept| {
            let mut kept = kept.borrow_mut();
            debug_assert!(!kept.on, "keep_here while a guard of this thread lives");
            kept.on = true;
        });
    }
    KeepingHere(std::marker::PhantomData)
}

/// This thread keeps large blocks while it lives ([`keep_here`]); not `Send`.
pub struct KeepingHere(std::marker::PhantomData<*const ()>);

impl Drop for KeepingHere {
    fn drop(&mut self) {
        HERE.with(|kept| kept.borrow_mut().on = false);
        release_here();
    }
}

/// Hand this thread's kept blocks back (to mimalloc, which purges them): its writes
/// paused, or it is about to wait with no end.
pub fn release_here() {
    let blocks = HERE.with(|kept| {
        let mut kept = kept.borrow_mut();
        KEPT_IN_ALL.fetch_sub(kept.bytes, std::sync::atomic::Ordering::Relaxed);
        kept.bytes = 0;
        std::mem::replace(&mut kept.slots, [(0, 0, 0); SLOTS])
    });
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
/// the system, from both allocators: mimalloc's (the Rust code's; this thread's kept
/// blocks, [`release_here`]) and glibc's, which the C code (SQLite) allocates with; the
/// daemon's resident size would stay at its peak.
pub fn release_free_memory() {
    release_here();
    // SAFETY: collects this thread's free pages and purges what mimalloc holds free.
    unsafe { libmimalloc_sys::mi_collect(true) }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's heaps to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}
