//! Every note's vectors in one contiguous arena: a search reads every chunk's bytes, and
//! read in order from one allocation they stream from memory, where a map of per-note
//! allocations made the scan wait on a cache miss per note. A note's chunks stay side by
//! side; a replaced or removed note leaves its chunks dead until the dead outnumber the
//! live, when the arena is packed again.

use std::collections::HashMap;

use rayon::prelude::*;

use serde::{Deserialize, Serialize};

/// One note's vectors: the stamp of the version they were computed from (content hash and
/// path) and one unit-length vector per chunk, quantized: `chunks × dim` signed bytes and
/// one scale per chunk (a value is its byte × its chunk's scale). A quarter of the bytes
/// of f32, which is what a search reads: the scan of every chunk is bound by memory
/// bandwidth, not arithmetic; a cosine moves by well under 0.01.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub stamp: String,
    pub vectors: Vec<i8>,
    pub scales: Vec<f32>,
}

impl Entry {
    /// The entry of `vectors` (`chunks × dim` values): each chunk scaled so that its
    /// largest magnitude is 127, and rounded.
    pub fn quantize(stamp: String, vectors: &[f32], dim: usize) -> Entry {
        let dim = dim.max(1);
        let mut bytes = Vec::with_capacity(vectors.len());
        let mut scales = Vec::with_capacity(vectors.len() / dim);
        for chunk in vectors.chunks_exact(dim) {
            let max = chunk.iter().fold(0f32, |m, x| m.max(x.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            bytes.extend(
                chunk
                    .iter()
                    .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
            );
            scales.push(scale);
        }
        Entry {
            stamp,
            vectors: bytes,
            scales,
        }
    }
}

/// A note's place in the arena and the version its vectors were computed from.
#[derive(Debug, Clone)]
pub struct Slot {
    pub stamp: String,
    first: usize,
    count: usize,
}

/// An [`Entry`] as the arena holds it, for the file (serialized as an `Entry` is).
#[derive(Serialize)]
pub struct EntryRef<'a> {
    pub stamp: &'a str,
    pub vectors: &'a [i8],
    pub scales: &'a [f32],
}

/// The arena: chunk `i` is `bytes[i * dim..(i + 1) * dim]` times `scales[i]`, of the note
/// `owner[i]` (`None`: dead).
#[derive(Debug, Default)]
pub struct Notes {
    dim: usize,
    slots: HashMap<u64, Slot>,
    bytes: Vec<i8>,
    scales: Vec<f32>,
    owner: Vec<Option<u64>>,
    dead: usize,
}

impl Notes {
    pub fn new(dim: usize) -> Notes {
        Notes {
            dim: dim.max(1),
            ..Notes::default()
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn get(&self, key: &u64) -> Option<&Slot> {
        self.slots.get(key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &u64> {
        self.slots.keys()
    }

    /// Put `entry` (`chunks × dim` bytes, a scale per chunk) as `key`'s vectors.
    pub fn insert(&mut self, key: u64, entry: Entry) {
        self.remove(&key);
        let count = entry.scales.len();
        debug_assert_eq!(entry.vectors.len(), count * self.dim);
        let first = self.scales.len();
        self.bytes.extend_from_slice(&entry.vectors);
        self.scales.extend_from_slice(&entry.scales);
        self.owner.extend(std::iter::repeat_n(Some(key), count));
        self.slots.insert(
            key,
            Slot {
                stamp: entry.stamp,
                first,
                count,
            },
        );
    }

    /// Drop `key`'s vectors; its slot when it had one.
    pub fn remove(&mut self, key: &u64) -> Option<Slot> {
        let slot = self.slots.remove(key)?;
        self.owner[slot.first..slot.first + slot.count].fill(None);
        self.dead += slot.count;
        // Packed once the dead are a quarter of the live: the arena stays near the live
        // size, and a pack (a copy of the live) comes after that many removals.
        if self.dead > 1024 && self.dead * 4 > self.owner.len() - self.dead {
            self.pack();
        }
        Some(slot)
    }

    /// The arena again with only the live chunks, in their notes' order.
    fn pack(&mut self) {
        let live = self.owner.len() - self.dead;
        let mut bytes = Vec::with_capacity(live * self.dim);
        let mut scales = Vec::with_capacity(live);
        let mut owner = Vec::with_capacity(live);
        for (key, slot) in &mut self.slots {
            let (from, to) = (slot.first, slot.first + slot.count);
            slot.first = scales.len();
            bytes.extend_from_slice(&self.bytes[from * self.dim..to * self.dim]);
            scales.extend_from_slice(&self.scales[from..to]);
            owner.extend(std::iter::repeat_n(Some(*key), slot.count));
        }
        (self.bytes, self.scales, self.owner, self.dead) = (bytes, scales, owner, 0);
    }

    /// Hand back what growing the arena left spare (after a whole sync or a load).
    pub fn shrink(&mut self) {
        if self.dead > 0 {
            self.pack();
        }
        self.bytes.shrink_to_fit();
        self.scales.shrink_to_fit();
        self.owner.shrink_to_fit();
    }

    /// Each note's vectors, for the file.
    pub fn entries(&self) -> impl Iterator<Item = (u64, EntryRef<'_>)> {
        self.slots.iter().map(|(key, slot)| {
            let (from, to) = (slot.first, slot.first + slot.count);
            (
                *key,
                EntryRef {
                    stamp: &slot.stamp,
                    vectors: &self.bytes[from * self.dim..to * self.dim],
                    scales: &self.scales[from..to],
                },
            )
        })
    }

    /// Every note `allowed` lets through with its best chunk's similarity to `query` (a
    /// unit vector of `dim` values), when above `min`; and how many notes have vectors.
    /// A large arena is scanned in parts, one a thread of the pool: one core does not
    /// draw all the memory bandwidth there is.
    pub fn best(
        &self,
        query: Option<&[f32]>,
        allowed: impl Fn(u64) -> bool + Sync,
        min: f32,
    ) -> (Vec<(u64, f32)>, usize) {
        let parts = (self.bytes.len() / SPLIT_BYTES).clamp(1, rayon::current_num_threads());
        self.best_in(parts, query, allowed, min)
    }

    /// [`Notes::best`] in `parts` parts.
    fn best_in(
        &self,
        parts: usize,
        query: Option<&[f32]>,
        allowed: impl Fn(u64) -> bool + Sync,
        min: f32,
    ) -> (Vec<(u64, f32)>, usize) {
        let covered = self.slots.len();
        let (Some(query), true) = (query, self.dim > 0) else {
            return (Vec::new(), covered);
        };
        let query = Query::new(query);
        let query = &query;
        let chunks = self.owner.len();
        if parts <= 1 {
            return (self.scan(query, &allowed, min, 0..chunks), covered);
        }
        let per = chunks.div_ceil(parts);
        let found: Vec<Vec<(u64, f32)>> = (0..parts)
            .into_par_iter()
            .map(|i| {
                let range = (i * per).min(chunks)..((i + 1) * per).min(chunks);
                self.scan(query, &allowed, min, range)
            })
            .collect();
        // A note whose chunks straddle a cut is found by both parts, one after the other.
        let mut scored: Vec<(u64, f32)> = Vec::with_capacity(found.iter().map(Vec::len).sum());
        for (key, sim) in found.into_iter().flatten() {
            match scored.last_mut() {
                Some(last) if last.0 == key => last.1 = last.1.max(sim),
                _ => scored.push((key, sim)),
            }
        }
        (scored, covered)
    }

    /// [`Notes::best`] of the chunks in `range`. Compiled twice: for AVX2 (eight lanes a
    /// step) where the CPU has it, and for the baseline.
    fn scan(
        &self,
        query: &Query,
        allowed: &impl Fn(u64) -> bool,
        min: f32,
        range: std::ops::Range<usize>,
    ) -> Vec<(u64, f32)> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has the feature `scan_avx2` is compiled for.
            return unsafe { self.scan_avx2(query, allowed, min, range) };
        }
        self.scan_here(query, allowed, min, range)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn scan_avx2(
        &self,
        query: &Query,
        allowed: &impl Fn(u64) -> bool,
        min: f32,
        range: std::ops::Range<usize>,
    ) -> Vec<(u64, f32)> {
        self.scan_here(query, allowed, min, range)
    }

    #[inline(always)]
    fn scan_here(
        &self,
        query: &Query,
        allowed: &impl Fn(u64) -> bool,
        min: f32,
        range: std::ops::Range<usize>,
    ) -> Vec<(u64, f32)> {
        let mut scored = Vec::new();
        // The note whose run of chunks is being read, whether it is allowed, its best.
        let mut current: Option<(u64, bool, f32)> = None;
        let flush = |c: Option<(u64, bool, f32)>, scored: &mut Vec<(u64, f32)>| {
            if let Some((key, true, best)) = c {
                if best > min {
                    scored.push((key, best));
                }
            }
        };
        let bytes = &self.bytes[range.start * self.dim..range.end * self.dim];
        let chunks = bytes.chunks_exact(self.dim);
        let owners = self.scales[range.clone()].iter().zip(&self.owner[range]);
        for (bytes, (scale, owner)) in chunks.zip(owners) {
            let Some(key) = *owner else { continue };
            if current.is_none_or(|(k, ..)| k != key) {
                flush(current.take(), &mut scored);
                current = Some((key, allowed(key), f32::MIN));
            }
            if let Some((_, true, best)) = &mut current {
                *best = best.max(dot(bytes, &query.values) as f32 * scale * query.scale);
            }
        }
        flush(current, &mut scored);
        scored
    }
}

/// A query vector as the scan reads it: 16-bit integers and one scale (a value is its
/// integer × the scale). Against the notes' bytes, a chunk's dot product is a sum of
/// integer products, which AVX2 takes sixteen at a time (`vpmaddwd`), twice what
/// converting each byte to a float allowed.
pub struct Query {
    pub values: Vec<i16>,
    pub scale: f32,
}

impl Query {
    /// The largest magnitude is as large as a chunk's sum cannot overflow an `i32`
    /// (128 × it × the dimensions), and at most 2^14: a relative error under 1e-4,
    /// far below the notes' bytes'.
    pub fn new(query: &[f32]) -> Query {
        let max = query.iter().fold(0f32, |m, x| m.max(x.abs()));
        let top = (i32::MAX as usize / 128 / query.len().max(1)).clamp(1, 16384);
        let scale = if max > 0.0 { max / top as f32 } else { 1.0 };
        let top = top as f32;
        Query {
            values: query
                .iter()
                .map(|x| (x / scale).round().clamp(-top, top) as i16)
                .collect(),
            scale,
        }
    }
}

/// The dot product of a chunk's bytes and a query's integers: eight lanes of `i32`, each
/// the sum of two neighbours' products, which is `vpmaddwd`'s shape.
#[inline(always)]
pub fn dot(a: &[i8], b: &[i16]) -> i32 {
    let mut lanes = [0i32; 8];
    let (a16, a_rest) = a.split_at(a.len() - a.len() % 16);
    let (b16, b_rest) = b.split_at(a16.len().min(b.len()));
    for (x, y) in a16.chunks_exact(16).zip(b16.chunks_exact(16)) {
        for i in 0..8 {
            lanes[i] += i32::from(x[2 * i]) * i32::from(y[2 * i])
                + i32::from(x[2 * i + 1]) * i32::from(y[2 * i + 1]);
        }
    }
    let rest: i32 = a_rest
        .iter()
        .zip(b_rest)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    lanes.iter().sum::<i32>() + rest
}

/// Bytes of vectors a part of the scan reads at least: below this a second thread costs
/// more than it saves.
const SPLIT_BYTES: usize = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(stamp: &str, vectors: &[f32]) -> Entry {
        Entry::quantize(stamp.into(), vectors, 2)
    }

    fn sorted(mut v: Vec<(u64, f32)>) -> Vec<(u64, f32)> {
        v.sort_by_key(|a| a.0);
        v
    }

    #[test]
    fn notes_replaced_and_removed_score_as_their_current_vectors_across_packs() {
        let mut notes = Notes::new(2);
        notes.insert(1, entry("a", &[1.0, 0.0, 0.0, 1.0]));
        notes.insert(2, entry("b", &[0.0, 1.0]));
        notes.insert(3, entry("c", &[-1.0, 0.0]));
        let q = [1.0, 0.0];
        let (best, covered) = notes.best(Some(&q), |_| true, 0.0);
        assert_eq!(covered, 3);
        assert_eq!(sorted(best), vec![(1, 1.0)]);
        // Replaced: the old chunks are dead, the new ones score.
        notes.insert(2, entry("b2", &[0.6, 0.8]));
        assert_eq!(notes.get(&2).unwrap().stamp, "b2");
        let (best, _) = notes.best(Some(&q), |_| true, 0.0);
        let best = sorted(best);
        assert_eq!(best[0], (1, 1.0));
        assert_eq!(best[1].0, 2);
        assert!((best[1].1 - 0.6).abs() < 0.01, "{best:?}");
        // Filtered out and removed notes are no hits.
        let (best, _) = notes.best(Some(&q), |k| k != 1, 0.0);
        assert_eq!(best.iter().map(|b| b.0).collect::<Vec<_>>(), vec![2]);
        assert!(notes.remove(&1).is_some());
        assert!(notes.remove(&1).is_none());
        let (best, covered) = notes.best(Some(&q), |_| true, 0.0);
        assert_eq!((best.len(), covered), (1, 2));
        // Many replacements pack the arena: what scores is unchanged, the dead are gone.
        for round in 0..2000 {
            let x = if round % 2 == 0 { 1.0 } else { -1.0 };
            notes.insert(9, entry("n", &[x, 0.0, 0.0, x]));
        }
        assert!(notes.dead * 4 <= notes.owner.len() - notes.dead || notes.dead <= 1024);
        let (best, _) = notes.best(Some(&q), |_| true, 0.0);
        assert_eq!(
            sorted(best).last().unwrap().0,
            2,
            "note 9 ends pointing away"
        );
        notes.shrink();
        assert_eq!(notes.dead, 0);
        assert_eq!(notes.owner.len(), 1 + 1 + 2);
        let mut files: Vec<(u64, Vec<i8>)> = notes
            .entries()
            .map(|(k, e)| (k, e.vectors.to_vec()))
            .collect();
        files.sort();
        assert_eq!(
            files,
            vec![
                (2, vec![95, 127]),
                (3, vec![-127, 0]),
                (9, vec![-127, 0, 0, -127])
            ]
        );
        // The baseline build of the scan and the one this CPU runs agree.
        let q = [0.6, 0.8];
        assert_eq!(
            sorted(notes.best(Some(&q), |_| true, -1.0).0),
            sorted(notes.scan_here(&Query::new(&q), &|_| true, -1.0, 0..notes.owner.len()))
        );
        // No query vector: nothing near, every note still counted.
        assert_eq!(notes.best(None, |_| true, 0.0), (vec![], 3));
    }

    #[test]
    fn the_scan_for_this_cpu_agrees_with_the_baseline_on_wide_vectors() {
        let dim = 384;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        };
        let mut notes = Notes::new(dim);
        for key in 0..50u64 {
            let chunks = 1 + key as usize % 4;
            let v: Vec<f32> = (0..chunks * dim).map(|_| next()).collect();
            notes.insert(key, Entry::quantize(format!("{key}"), &v, dim));
        }
        let q: Vec<f32> = (0..dim).map(|_| next()).collect();
        let (fast, n) = notes.best(Some(&q), |k| k % 7 != 0, f32::MIN);
        let plain = notes.scan_here(
            &Query::new(&q),
            &|k| k % 7 != 0,
            f32::MIN,
            0..notes.owner.len(),
        );
        assert_eq!(n, 50);
        let (fast, plain) = (sorted(fast), sorted(plain));
        assert_eq!(fast.len(), 50 - 8);
        for (a, b) in fast.iter().zip(&plain) {
            assert_eq!(a.0, b.0);
            assert!((a.1 - b.1).abs() < 1e-3 * b.1.abs().max(1.0), "{a:?} {b:?}");
        }
    }

    /// Scanned in parts, a note whose chunks straddle a cut is one hit with its best
    /// chunk, as in one part; a dead chunk at a cut changes nothing.
    #[test]
    fn a_scan_in_parts_finds_what_one_part_finds() {
        let mut notes = Notes::new(2);
        for key in 0..40u64 {
            // 1 to 5 chunks a note, the best one anywhere in its run.
            let chunks = 1 + key as usize % 5;
            let v: Vec<f32> = (0..chunks)
                .flat_map(|c| {
                    let a = (key as f32 * 0.37 + c as f32 * 1.3).sin();
                    [a, (1.0 - a * a).sqrt()]
                })
                .collect();
            notes.insert(key, Entry::quantize(format!("{key}"), &v, 2));
        }
        notes.insert(7, entry("seven again", &[0.0, 1.0]));
        let q = [0.6, 0.8];
        let (whole, n) = notes.best_in(1, Some(&q), |k| k != 3, -1.0);
        assert_eq!((whole.len(), n), (39, 40));
        for parts in 2..=9 {
            let (split, m) = notes.best_in(parts, Some(&q), |k| k != 3, -1.0);
            assert_eq!(m, 40);
            assert_eq!(sorted(split), sorted(whole.clone()), "{parts} parts");
        }
    }
}
