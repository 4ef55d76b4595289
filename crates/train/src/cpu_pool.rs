//! A heap for libtorch's CPU tensors (`--allocator pooled`, the default): compact's memory at
//! glibc's speed.
//!
//! A training step allocates and frees the same tensor sizes in the same order, step after step:
//! at 640, batch 2, every layer trained, about 2.8 GB of tensors pass through the allocator per
//! step while at most 190 MB are in use at once. glibc's defaults serve them from heaps whose gaps
//! stay resident, per thread (600–670 MB resident for 400 MB in use, docs/BENCHMARKS.md "The
//! allocator"); a fixed mmap threshold (`compact`) maps every large block fresh and unmaps it on
//! free, and pays a page fault for every page of those 2.8 GB — two to three times the step.
//!
//! This pool is one best-fit heap over a single reserved range of address space: a request takes
//! the smallest free range that holds it (split, the rest stays free), a freed block merges with
//! its free neighbours, and the heap grows at its top only when no free range fits. Its pages are
//! written once and then reused, step after step, without a system call; best fit keeps the heap
//! within about 15 % of the most ever in use on that trace. Two guards bound what stays resident:
//! when the heap's resident pages would pass `1 + slack` times the most ever in use, the free
//! ranges' pages are returned to the system (`madvise(MADV_DONTNEED)`; they fault in again when
//! reused), and [`trim`] returns them at every epoch's end, before validation. Blocks smaller than
//! [`MIN_BYTES`] stay with glibc; a block the reservation cannot hold gets its own mapping.
//!
//! The policy ([`Pool`]) is plain Rust over a [`Pages`] source, tested here; libtorch is given the
//! pool through `vendor/torch-sys/libtch/headroom_cpu_pool.cpp` ([`install`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Blocks below this size stay with glibc's malloc (and its fixed 128 KiB mmap threshold, as in
/// `compact`): small tensors are many and cheap.
pub const MIN_BYTES: usize = 128 * 1024;

/// The default headroom above the most ever in use that the heap's resident pages may take before
/// its free pages go back to the system: 0.25 (docs/BENCHMARKS.md "The allocator"), the planner's
/// [`headroom_plan::memory::POOL_SLACK`], which counts it.
pub const DEFAULT_SLACK: f64 = headroom_plan::memory::POOL_SLACK;

const PAGE: usize = 4096;

/// Where a pool's memory comes from: the system's pages ([`Mmap`]) or, in tests, a ledger.
pub trait Pages {
    /// Reserves `bytes` of address space (not yet usable); `None` when the system refuses.
    fn reserve(&mut self, bytes: usize) -> Option<usize>;
    /// Makes `[addr, addr + bytes)` of the reservation usable (it grows in steps).
    fn commit(&mut self, addr: usize, bytes: usize) -> bool;
    /// Returns the pages of `[addr, addr + bytes)` to the system; the range stays usable (its
    /// pages read as zero and fault in again when written).
    fn release(&mut self, addr: usize, bytes: usize);
    /// A block of its own, outside the reservation.
    fn map(&mut self, bytes: usize) -> Option<usize>;
    /// Returns a block [`Pages::map`] gave, whole.
    fn unmap(&mut self, addr: usize, bytes: usize);
}

/// What a pool did: its counts since it began and its bytes now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Requests served from pages already written (a free range, or the heap's top below the
    /// highest page written): no page faults.
    pub reused: u64,
    /// Requests that took fresh pages, some or all (see `grown_bytes`).
    pub grown: u64,
    /// Bytes of fresh pages handed out (above the highest page written, in released free
    /// ranges, or mapped alone): a page fault each when first written.
    pub grown_bytes: u64,
    /// Times the free ranges' pages went back to the system (the bound or [`trim`]).
    pub releases: u64,
    /// Bytes in tensors now.
    pub in_use: usize,
    /// The most bytes ever in tensors at once.
    pub high_water: usize,
    /// The heap's extent: its top, the end of the highest block ever placed since the last trim.
    pub heap: usize,
    /// An upper bound of the pool's resident bytes now.
    pub resident: usize,
}

/// The policy: a best-fit heap with merging of free neighbours.
#[derive(Debug)]
pub struct Pool<P: Pages> {
    pages: P,
    slack: f64,
    /// The reservation: start and length (0 when the system refused one).
    base: usize,
    reserved: usize,
    /// Usable (committed) bytes from `base`.
    committed: usize,
    /// The end of the highest block in the heap (offsets are from `base`).
    top: usize,
    /// The end of the highest page written since the last release: pages in `[top, touched)` may
    /// still be resident.
    touched: usize,
    /// Free ranges below `top`: offset → (length, whether its pages may be resident).
    free: BTreeMap<usize, (usize, bool)>,
    /// The same ranges by (length, offset), for best fit.
    by_size: BTreeSet<(usize, usize)>,
    /// Bytes of free ranges whose pages may be resident.
    resident_free: usize,
    /// Blocks in tensors: address → (size, whether it has a mapping of its own).
    live: HashMap<usize, (usize, bool)>,
    stats: PoolStats,
}

/// How much of the reservation becomes usable at a time.
const COMMIT_STEP: usize = 64 << 20;

impl<P: Pages> Pool<P> {
    /// An empty pool over `pages`, reserving `reserve` bytes of address space; `slack` ≥ 0.
    pub fn new(mut pages: P, reserve: usize, slack: f64) -> Self {
        let reserved = reserve / PAGE * PAGE;
        let base = if reserved > 0 { pages.reserve(reserved) } else { None };
        Pool {
            pages,
            slack: slack.max(0.0),
            base: base.unwrap_or(0),
            reserved: if base.is_some() { reserved } else { 0 },
            committed: 0,
            top: 0,
            touched: 0,
            free: BTreeMap::new(),
            by_size: BTreeSet::new(),
            resident_free: 0,
            live: HashMap::new(),
            stats: PoolStats::default(),
        }
    }

    /// A block of at least `bytes`, or `None` when the system has no memory for it.
    pub fn alloc(&mut self, bytes: usize) -> Option<usize> {
        let size = bytes.max(1).div_ceil(PAGE) * PAGE;
        let fresh_before = self.stats.grown_bytes;
        let (addr, own) = match self.by_size.range((size, 0)..).next().copied() {
            Some((len, offset)) => {
                let (_, resident) = self.take_free(offset, len);
                if len > size {
                    self.put_free(offset + size, len - size, resident);
                }
                if !resident {
                    self.stats.grown_bytes += size as u64;
                }
                (self.base + offset, false)
            }
            None => match self.grow(size) {
                Some(offset) => (self.base + offset, false),
                None => {
                    self.stats.grown_bytes += size as u64;
                    (self.pages.map(size)?, true)
                }
            },
        };
        if self.stats.grown_bytes > fresh_before {
            self.stats.grown += 1;
        } else {
            self.stats.reused += 1;
        }
        self.live.insert(addr, (size, own));
        self.stats.in_use += size;
        self.stats.high_water = self.stats.high_water.max(self.stats.in_use);
        if self.resident() as f64 > self.stats.high_water as f64 * (1.0 + self.slack) {
            self.release_free();
        }
        Some(addr)
    }

    /// Takes back a block [`Pool::alloc`] gave; false when `addr` is not one of the pool's.
    pub fn free(&mut self, addr: usize) -> bool {
        let Some((size, own)) = self.live.remove(&addr) else { return false };
        self.stats.in_use -= size;
        if own {
            self.pages.unmap(addr, size);
            return true;
        }
        let (mut offset, mut len, mut resident) = (addr - self.base, size, true);
        // Merge with the free range that ends where this block starts, and the one after it.
        if let Some((&before, &(before_len, before_resident))) = self.free.range(..offset).next_back()
            && before + before_len == offset
        {
            self.take_free(before, before_len);
            offset = before;
            len += before_len;
            resident |= before_resident;
        }
        if let Some(&(after_len, after_resident)) = self.free.get(&(offset + len)) {
            self.take_free(offset + len, after_len);
            len += after_len;
            resident |= after_resident;
        }
        if offset + len == self.top {
            // The highest block: the heap shrinks (its pages stay, counted in `touched`).
            self.top = offset;
        } else {
            self.put_free(offset, len, resident);
        }
        true
    }

    /// Returns the pages of every free range (and above the heap's top) to the system: the end of
    /// an epoch, before validation.
    pub fn trim(&mut self) {
        self.release_free();
    }

    /// [`Pool::trim`], and the bound starts again from what is in use now: after a step down to a
    /// smaller batch, the larger passes' most-in-use must not let the smaller ones keep their pages.
    pub fn reset(&mut self) {
        self.release_free();
        self.stats.high_water = self.stats.in_use;
    }

    /// What the pool did so far and holds now.
    pub fn stats(&self) -> PoolStats {
        PoolStats { heap: self.top, resident: self.resident(), ..self.stats }
    }

    fn resident(&self) -> usize {
        self.stats.in_use + self.resident_free + self.touched.saturating_sub(self.top)
    }

    /// Places a block at the heap's top; `None` when the reservation cannot hold it.
    fn grow(&mut self, size: usize) -> Option<usize> {
        let offset = self.top;
        let end = offset.checked_add(size)?;
        if end > self.reserved {
            return None;
        }
        if end > self.committed {
            let to = end.div_ceil(COMMIT_STEP).saturating_mul(COMMIT_STEP).min(self.reserved);
            if !self.pages.commit(self.base + self.committed, to - self.committed) {
                return None;
            }
            self.committed = to;
        }
        self.top = end;
        self.stats.grown_bytes += end.saturating_sub(self.touched) as u64;
        self.touched = self.touched.max(end);
        Some(offset)
    }

    fn release_free(&mut self) {
        let ranges: Vec<(usize, usize)> =
            self.free.iter().filter(|(_, (_, resident))| *resident).map(|(&o, &(l, _))| (o, l)).collect();
        for (offset, len) in ranges {
            self.pages.release(self.base + offset, len);
            self.free.insert(offset, (len, false));
        }
        if self.touched > self.top {
            self.pages.release(self.base + self.top, self.touched - self.top);
        }
        self.touched = self.top;
        self.resident_free = 0;
        self.stats.releases += 1;
    }

    fn take_free(&mut self, offset: usize, len: usize) -> (usize, bool) {
        let (len_now, resident) = self.free.remove(&offset).unwrap_or((len, false));
        self.by_size.remove(&(len_now, offset));
        if resident {
            self.resident_free -= len_now;
        }
        (len_now, resident)
    }

    fn put_free(&mut self, offset: usize, len: usize, resident: bool) {
        self.free.insert(offset, (len, resident));
        self.by_size.insert((len, offset));
        if resident {
            self.resident_free += len;
        }
    }
}

/// The system's pages: one anonymous reservation, made usable as the heap grows.
#[cfg(all(feature = "libtorch", target_os = "linux"))]
#[derive(Debug, Default)]
pub struct Mmap;

#[cfg(all(feature = "libtorch", target_os = "linux"))]
#[allow(unsafe_code)]
impl Pages for Mmap {
    fn reserve(&mut self, bytes: usize) -> Option<usize> {
        // SAFETY: a fresh anonymous mapping without access; nothing else refers to it.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        (addr != libc::MAP_FAILED).then_some(addr as usize)
    }

    fn commit(&mut self, addr: usize, bytes: usize) -> bool {
        // SAFETY: a part of the reservation, not yet in use.
        unsafe { libc::mprotect(addr as *mut libc::c_void, bytes, libc::PROT_READ | libc::PROT_WRITE) == 0 }
    }

    fn release(&mut self, addr: usize, bytes: usize) {
        // SAFETY: free ranges of the heap: no tensor refers to them.
        unsafe {
            libc::madvise(addr as *mut libc::c_void, bytes, libc::MADV_DONTNEED);
        }
    }

    fn map(&mut self, bytes: usize) -> Option<usize> {
        // SAFETY: a fresh anonymous mapping; nothing else refers to it.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        (addr != libc::MAP_FAILED).then_some(addr as usize)
    }

    fn unmap(&mut self, addr: usize, bytes: usize) {
        // SAFETY: a mapping `map` made, no longer referred to.
        unsafe {
            libc::munmap(addr as *mut libc::c_void, bytes);
        }
    }
}

#[cfg(all(feature = "libtorch", target_os = "linux"))]
#[allow(unsafe_code)]
mod native {
    use super::{Mmap, Pool, PoolStats};
    use std::sync::{Mutex, MutexGuard, OnceLock};

    static POOL: OnceLock<Mutex<Pool<Mmap>>> = OnceLock::new();

    fn pool() -> Option<MutexGuard<'static, Pool<Mmap>>> {
        // A panic while the lock was held cannot leave the maps half-updated in a way that matters
        // more than stopping the process would: the poisoned lock is taken as it is.
        POOL.get().map(|p| p.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    unsafe extern "C" {
        /// vendor/torch-sys/libtch/headroom_cpu_pool.cpp.
        fn headroom_cpu_pool_install(
            alloc: extern "C" fn(usize) -> *mut libc::c_void,
            free: extern "C" fn(*mut libc::c_void) -> libc::c_int,
            min_bytes: usize,
        ) -> libc::c_long;
    }

    extern "C" fn pool_alloc(bytes: usize) -> *mut libc::c_void {
        pool().and_then(|mut p| p.alloc(bytes)).map_or(std::ptr::null_mut(), |a| a as *mut libc::c_void)
    }

    extern "C" fn pool_free(addr: *mut libc::c_void) -> libc::c_int {
        pool().is_some_and(|mut p| p.free(addr as usize)).into()
    }

    pub(super) fn install(slack: f64) -> bool {
        // Address space for as much as the machine has: reserved, not used.
        // SAFETY: sysconf reads a number.
        let memory = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES).max(0) as usize * super::PAGE };
        if POOL.set(Mutex::new(Pool::new(Mmap, memory, slack))).is_err() {
            return true;
        }
        // SAFETY: the functions live for the whole process and take the pool's lock themselves.
        let code = unsafe { headroom_cpu_pool_install(pool_alloc, pool_free, super::MIN_BYTES) };
        code >= 0
    }

    pub(super) fn stats() -> Option<PoolStats> {
        pool().map(|p| p.stats())
    }

    pub(super) fn trim() {
        if let Some(mut p) = pool() {
            p.trim();
        }
    }

    pub(super) fn reset() {
        if let Some(mut p) = pool() {
            p.reset();
        }
    }
}

/// Makes the pool libtorch's CPU allocator for the rest of the process, `slack` as in
/// [`Pool::new`] (a second call keeps the first pool). Returns whether libtorch took it (false
/// without libtorch or off Linux).
pub fn install(slack: f64) -> bool {
    #[cfg(all(feature = "libtorch", target_os = "linux"))]
    {
        native::install(slack)
    }
    #[cfg(not(all(feature = "libtorch", target_os = "linux")))]
    {
        let _ = slack;
        false
    }
}

/// The installed pool's figures; `None` when none is installed.
pub fn stats() -> Option<PoolStats> {
    #[cfg(all(feature = "libtorch", target_os = "linux"))]
    {
        native::stats()
    }
    #[cfg(not(all(feature = "libtorch", target_os = "linux")))]
    {
        None
    }
}

/// Returns the installed pool's free pages to the system (the end of an epoch).
pub fn trim() {
    #[cfg(all(feature = "libtorch", target_os = "linux"))]
    native::trim();
}

/// [`trim`], and the pool's bound starts again from what is in use now ([`Pool::reset`]): after a
/// step down.
pub fn reset() {
    #[cfg(all(feature = "libtorch", target_os = "linux"))]
    native::reset();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger of what the pool asked of the system.
    #[derive(Default)]
    struct Ledger {
        committed: usize,
        released: usize,
        mapped: HashMap<usize, usize>,
        refuse_reserve: bool,
    }

    const BASE: usize = 1 << 40;

    impl Pages for Ledger {
        fn reserve(&mut self, _bytes: usize) -> Option<usize> {
            (!self.refuse_reserve).then_some(BASE)
        }
        fn commit(&mut self, addr: usize, bytes: usize) -> bool {
            assert_eq!(addr, BASE + self.committed, "the reservation is made usable in order");
            self.committed += bytes;
            true
        }
        fn release(&mut self, addr: usize, bytes: usize) {
            assert!(addr >= BASE && addr + bytes <= BASE + self.committed);
            assert_eq!((addr % PAGE, bytes % PAGE), (0, 0), "whole pages");
            self.released += bytes;
        }
        fn map(&mut self, bytes: usize) -> Option<usize> {
            let addr = (1 << 50) + self.mapped.len() * (1 << 32);
            self.mapped.insert(addr, bytes);
            Some(addr)
        }
        fn unmap(&mut self, addr: usize, bytes: usize) {
            assert_eq!(self.mapped.remove(&addr), Some(bytes), "unmapped what was mapped, whole");
        }
    }

    const MB: usize = 1 << 20;

    fn pool(reserve: usize, slack: f64) -> Pool<Ledger> {
        Pool::new(Ledger::default(), reserve, slack)
    }

    /// One "training step": a forward that keeps activations, a backward that makes each one's
    /// gradient and frees both, latest first.
    fn step(pool: &mut Pool<Ledger>) {
        let sizes = [8 * MB, 4 * MB, 4 * MB, 2 * MB, MB, 3 * MB];
        let acts: Vec<usize> = sizes.iter().map(|&s| pool.alloc(s).expect("the pool has room")).collect();
        for (i, act) in acts.into_iter().enumerate().rev() {
            let grad = pool.alloc(sizes[i]).expect("the pool has room");
            let scratch = pool.alloc(sizes[i] / 2 + PAGE).expect("the pool has room");
            assert!(pool.free(scratch));
            assert!(pool.free(act));
            assert!(pool.free(grad));
        }
    }

    #[test]
    fn a_repeated_step_reuses_the_heap_without_growing_it() {
        let mut pool = pool(1 << 30, DEFAULT_SLACK);
        step(&mut pool);
        let first = pool.stats();
        assert!(first.grown > 0, "{first:?}");
        for _ in 0..10 {
            step(&mut pool);
        }
        let later = pool.stats();
        assert_eq!(later.grown, first.grown, "no fresh pages after the first step: {later:?}");
        assert_eq!(later.grown_bytes, first.grown_bytes);
        assert_eq!(later.releases, 0, "within the bound: {later:?}");
        assert_eq!(later.in_use, 0);
        assert!(later.reused >= 10 * 18);
        assert!(pool.pages.committed <= 64 * MB && pool.pages.mapped.is_empty());
    }

    #[test]
    fn best_fit_splits_free_ranges_and_merges_neighbours() {
        let mut pool = pool(1 << 30, 10.0);
        let a = pool.alloc(2 * MB).expect("the pool has room");
        let b = pool.alloc(MB).expect("the pool has room");
        let c = pool.alloc(3 * MB).expect("the pool has room");
        let _top = pool.alloc(MB).expect("the pool has room");
        assert_eq!((b - a, c - b), (2 * MB, MB), "placed one after another");
        assert!(pool.free(c));
        assert!(pool.free(b));
        // b and c merged into one 4 MB range; a 1 MB request takes its start (best fit: the
        // only range).
        assert_eq!(pool.alloc(MB), Some(b));
        assert!(pool.free(a));
        // a (2 MB) and the rest of b+c (3 MB) are apart: 3 MB goes to the 3 MB range, not a's.
        assert_eq!(pool.alloc(3 * MB), Some(b + MB));
        assert_eq!(pool.alloc(2 * MB), Some(a));
        assert_eq!(pool.stats().grown, 4, "nothing beyond the first four blocks grew the heap");
    }

    #[test]
    fn resident_pages_stay_within_the_bound() {
        // Sizes that never repeat fragment the heap; the bound releases free pages. It holds after
        // every request (a free that merges a released neighbour counts the whole range as
        // resident until the next request: an upper bound).
        let mut pool = pool(1 << 34, 0.0);
        let mut held = Vec::new();
        for i in 1..300usize {
            held.push(pool.alloc((i % 37 + 1) * PAGE * 13).expect("the pool has room"));
            let s = pool.stats();
            assert!(s.resident <= s.high_water, "{s:?}");
            if held.len() > 4 {
                assert!(pool.free(held.remove(i % 3)));
            }
        }
        assert!(pool.stats().releases > 0 && pool.pages.released > 0);
    }

    #[test]
    fn trim_returns_free_pages_and_the_heap_keeps_working() {
        let mut pool = pool(1 << 30, DEFAULT_SLACK);
        let a = pool.alloc(4 * MB).expect("the pool has room");
        let b = pool.alloc(4 * MB).expect("the pool has room");
        let c = pool.alloc(MB).expect("the pool has room");
        pool.free(a);
        pool.free(c);
        pool.trim();
        let s = pool.stats();
        assert_eq!(s.resident, s.in_use, "{s:?}");
        assert_eq!(pool.pages.released, 5 * MB, "a's range and what lay above the top");
        assert_eq!(pool.alloc(4 * MB), Some(a), "released ranges are reused (fresh pages)");
        pool.free(b);
        assert!(pool.stats().grown_bytes >= 13 * MB as u64);
    }

    #[test]
    fn reset_bounds_smaller_passes_by_their_own_use() {
        let mut pool = pool(1 << 34, DEFAULT_SLACK);
        let big: Vec<usize> = (0..8).map(|_| pool.alloc(4 * MB).expect("the pool has room")).collect();
        for b in big {
            pool.free(b);
        }
        assert_eq!(pool.stats().high_water, 32 * MB);
        pool.reset();
        let s = pool.stats();
        assert_eq!((s.resident, s.high_water), (0, 0), "{s:?}");
        // Smaller passes: within 1.25x of their own most in use, not the larger passes'.
        for _ in 0..5 {
            let small: Vec<usize> = (0..2).map(|_| pool.alloc(4 * MB).expect("the pool has room")).collect();
            for b in small {
                pool.free(b);
            }
            let s = pool.stats();
            assert!(s.resident as f64 <= 1.25 * (8 * MB) as f64, "{s:?}");
        }
    }

    #[test]
    fn blocks_the_reservation_cannot_hold_get_their_own_mapping() {
        let mut pool = pool(8 * MB, DEFAULT_SLACK);
        let a = pool.alloc(6 * MB).expect("the pool has room");
        let b = pool.alloc(6 * MB).expect("the pool has room");
        assert_eq!(a, BASE);
        assert!(pool.pages.mapped.contains_key(&b));
        assert!(pool.free(b));
        assert!(pool.pages.mapped.is_empty(), "unmapped on free");
        assert!(!pool.free(12345), "not the pool's");
        assert!(pool.free(a));
        assert!(!pool.free(a), "freed once");
        let mut none = Pool::new(Ledger { refuse_reserve: true, ..Ledger::default() }, 1 << 30, 0.1);
        let x = none.alloc(MB + 1).expect("the pool has room");
        assert_eq!(none.pages.mapped[&x], MB + PAGE, "rounded to a page, mapped alone");
    }
}
