//! Git's delta format (a pack's `OFS_DELTA` entries): how to make an object from an
//! earlier one by copying ranges of it and inserting new bytes.
//!
//! Two cheap encoders, each linear in the sizes: a tree against an earlier version of
//! the same folder's tree (entries are sorted by name, so one merge walk finds the ones
//! added, removed or changed: a create in a folder of 20,000 notes is a few dozen
//! bytes), and any object against another by their common start and end (a note's edit).

use std::cmp::Ordering;

/// A delta of `target` from `base`: `None` when it would not save at least half.
pub(crate) fn tree(base: &[u8], target: &[u8]) -> Option<Vec<u8>> {
    let (old, new) = (records(base)?, records(target)?);
    let mut delta = Delta::new(base.len(), target.len());
    let (mut i, mut j) = (0, 0);
    while j < new.len() {
        let n = new[j];
        if let Some(&o) = old.get(i) {
            // Most entries are unchanged: equal bytes, no need to order them.
            if base[o.0..o.1] == target[n.0..n.1] {
                delta.copy(o.0, o.1 - o.0);
                i += 1;
                j += 1;
                continue;
            }
        }
        match old.get(i).map(|&o| (o, order(base, o, target, n))) {
            Some((_, Ordering::Less)) => i += 1,
            Some((o, Ordering::Equal)) => {
                if base[o.0..o.1] == target[n.0..n.1] {
                    delta.copy(o.0, o.1 - o.0);
                } else {
                    delta.insert(&target[n.0..n.1]);
                }
                i += 1;
                j += 1;
            }
            _ => {
                delta.insert(&target[n.0..n.1]);
                j += 1;
            }
        }
    }
    delta.done(target.len())
}

/// A delta of `target` from `base` by their common start and end: `None` when it would
/// not save at least half.
pub(crate) fn ends(base: &[u8], target: &[u8]) -> Option<Vec<u8>> {
    let start = base.iter().zip(target).take_while(|(a, b)| a == b).count();
    let end = base[start..]
        .iter()
        .rev()
        .zip(target[start..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut delta = Delta::new(base.len(), target.len());
    delta.copy(0, start);
    delta.insert(&target[start..target.len() - end]);
    delta.copy(base.len() - end, end);
    delta.done(target.len())
}

/// The byte range of each entry of a tree (`<mode> <name>\0<20-byte id>`), in order;
/// `None` for bytes that are not a tree.
pub(crate) fn records(tree: &[u8]) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < tree.len() {
        let nul = at + memchr::memchr(0, &tree[at..])?;
        let end = nul + 1 + 20;
        if end > tree.len() {
            return None;
        }
        out.push((at, end));
        at = end;
    }
    Some(out)
}

/// Two entries in git's tree order: by name, a folder's as if it ended in `/`. (Only how
/// much is copied depends on it: every entry of the target is copied or inserted.)
pub(crate) fn order(
    a: &[u8],
    (a0, a1): (usize, usize),
    b: &[u8],
    (b0, b1): (usize, usize),
) -> Ordering {
    let ((an, af), (bn, bf)) = (name(&a[a0..a1 - 21]), name(&b[b0..b1 - 21]));
    let n = an.len().min(bn.len());
    an[..n].cmp(&bn[..n]).then_with(|| {
        let next = |name: &[u8], folder: bool| name.get(n).copied().or(folder.then_some(b'/'));
        next(an, af).cmp(&next(bn, bf))
    })
}

/// An entry's name (its record without the id), and whether it is a folder.
fn name(record: &[u8]) -> (&[u8], bool) {
    let space = record.iter().position(|&c| c == b' ').unwrap_or(0);
    (
        record.get(space + 1..).unwrap_or_default(),
        record.starts_with(b"40000 "),
    )
}

/// An entry of a tree found by [`records`]: its mode (`40000` a folder, `160000` a
/// submodule's commit, else a file), name and id.
pub(crate) fn record(tree: &[u8], (start, end): (usize, usize)) -> (&[u8], &[u8], &[u8]) {
    let head = &tree[start..end - 21];
    let (mode, name) = head.split_at(head.iter().position(|&c| c == b' ').unwrap_or(0));
    (
        mode,
        name.get(1..).unwrap_or_default(),
        &tree[end - 20..end],
    )
}

/// A delta being written: the two sizes, then copy and insert instructions, a copy of
/// ranges that follow each other in the base merged into one.
struct Delta {
    out: Vec<u8>,
    pending: Option<(usize, usize)>,
}

/// The most bytes one insert instruction carries.
const INSERT_MAX: usize = 0x7f;
/// The most bytes one copy instruction names (three size bytes).
const COPY_MAX: usize = 0xff_ffff;

impl Delta {
    fn new(base: usize, target: usize) -> Self {
        let mut out = Vec::with_capacity(64);
        varint(&mut out, base);
        varint(&mut out, target);
        Self { out, pending: None }
    }

    fn copy(&mut self, offset: usize, len: usize) {
        if len == 0 {
            return;
        }
        match &mut self.pending {
            Some((start, n)) if *start + *n == offset => *n += len,
            _ => {
                self.flush();
                self.pending = Some((offset, len));
            }
        }
    }

    fn insert(&mut self, bytes: &[u8]) {
        self.flush();
        for chunk in bytes.chunks(INSERT_MAX) {
            self.out.push(chunk.len() as u8);
            self.out.extend_from_slice(chunk);
        }
    }

    fn flush(&mut self) {
        let Some((mut offset, mut len)) = self.pending.take() else {
            return;
        };
        while len > 0 {
            let n = len.min(COPY_MAX);
            let at = self.out.len();
            self.out.push(0x80);
            for i in 0..4 {
                let byte = (offset >> (8 * i)) as u8;
                if byte != 0 {
                    self.out[at] |= 1 << i;
                    self.out.push(byte);
                }
            }
            for i in 0..3 {
                let byte = (n >> (8 * i)) as u8;
                if byte != 0 {
                    self.out[at] |= 0x10 << i;
                    self.out.push(byte);
                }
            }
            offset += n;
            len -= n;
        }
    }

    /// The delta, when it is under half the target's size.
    fn done(mut self, target: usize) -> Option<Vec<u8>> {
        self.flush();
        (self.out.len() < target / 2).then_some(self.out)
    }
}

/// A size: 7 bits a byte, least significant first.
fn varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Git's own reading of a delta (as `patch-delta.c` does it).
    fn apply(base: &[u8], delta: &[u8]) -> Vec<u8> {
        let mut at = 0;
        let mut size = || {
            let (mut n, mut shift) = (0usize, 0);
            loop {
                let b = delta[at];
                at += 1;
                n |= ((b & 0x7f) as usize) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    return n;
                }
            }
        };
        assert_eq!(size(), base.len());
        let want = size();
        let mut out = Vec::new();
        while at < delta.len() {
            let cmd = delta[at];
            at += 1;
            if cmd & 0x80 != 0 {
                let (mut offset, mut len) = (0usize, 0usize);
                for i in 0..4 {
                    if cmd & (1 << i) != 0 {
                        offset |= (delta[at] as usize) << (8 * i);
                        at += 1;
                    }
                }
                for i in 0..3 {
                    if cmd & (0x10 << i) != 0 {
                        len |= (delta[at] as usize) << (8 * i);
                        at += 1;
                    }
                }
                if len == 0 {
                    len = 0x10000;
                }
                out.extend_from_slice(&base[offset..offset + len]);
            } else {
                let n = cmd as usize;
                assert!(n > 0);
                out.extend_from_slice(&delta[at..at + n]);
                at += n;
            }
        }
        assert_eq!(out.len(), want);
        out
    }

    fn tree_of(names: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for name in names {
            let id = name
                .bytes()
                .fold(7u8, |h, b| h.wrapping_mul(31).wrapping_add(b));
            let folder = name.ends_with('/');
            out.extend_from_slice(if folder { b"40000 " } else { b"100644 " });
            out.extend_from_slice(name.trim_end_matches('/').as_bytes());
            out.push(0);
            out.extend_from_slice(&[id; 20]);
        }
        out
    }

    #[test]
    fn a_tree_delta_makes_the_new_tree() {
        let names: Vec<String> = (0..2000).map(|i| format!("note-{i:05}.md")).collect();
        let mut refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let base = tree_of(&refs);
        // One entry added in the middle, one removed, one changed (its id), at the ends.
        refs.insert(1000, "note-00999a.md");
        refs.remove(0);
        let mut target = tree_of(&refs);
        let last = target.len() - 1;
        target[last] ^= 0xff;
        let delta = tree(&base, &target).expect("small");
        assert!(delta.len() < 200, "{} bytes", delta.len());
        assert_eq!(apply(&base, &delta), target);
        // A folder sorts as if its name ended in `/`: `a/` after `a.md`, before `a0`.
        let base = tree_of(&["a.md", "a0.md"]);
        let target = tree_of(&["a.md", "a/", "a0.md"]);
        if let Some(delta) = tree(&base, &target) {
            assert_eq!(apply(&base, &delta), target);
        }
        assert_eq!(tree(b"not a tree", b"also not"), None);
    }

    #[test]
    fn an_ends_delta_makes_the_edit_and_refuses_what_saves_little() {
        let base = "line\n".repeat(40_000).into_bytes();
        let mut target = base.clone();
        target.splice(100_000..100_005, b"an edit\n".iter().copied());
        let delta = ends(&base, &target).expect("small");
        assert!(delta.len() < 40, "{} bytes", delta.len());
        assert_eq!(apply(&base, &delta), target);
        // Copies past 16 MiB are split; offsets past 4 GiB do not occur (4 GiB objects
        // never reach a pack).
        let big = vec![7u8; (COPY_MAX + 10) * 2];
        let mut bigger = big.clone();
        bigger.push(1);
        assert_eq!(apply(&big, &ends(&big, &bigger).unwrap()), bigger);
        assert_eq!(ends(b"abc", b"xyz"), None);
    }
}
