//! Memory handed back to the system after a burst; imports nothing of the crate.

/// Hand memory freed after a burst (the start-up scan, a rescan, the index build) back to
/// the system: glibc keeps freed memory in its arenas otherwise, and the daemon's resident
/// size would stay at its peak.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's heaps to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}
