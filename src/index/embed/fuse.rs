//! Reciprocal rank fusion: several ranked lists of notes become one, each note scored
//! `Σ 1 / (k + rank)` over the lists it is in (rank from 1). Scores of different scales
//! (BM25, cosine) never meet; only ranks do.

use std::collections::HashMap;

/// The usual constant: a note first in one list scores 1/61.
pub const RRF_K: f32 = 60.0;

/// Fuse `lists` (note keys, best first; a key at most once per list): each key with its
/// fused score, best first; ties go to the key ranked higher in any list, then the lower
/// key, so the order is the same at every call.
pub fn rrf(lists: &[&[u64]], k: f32) -> Vec<(u64, f32)> {
    let mut fused: HashMap<u64, (f32, usize)> = HashMap::new();
    for list in lists {
        for (i, key) in list.iter().enumerate() {
            let e = fused.entry(*key).or_insert((0.0, usize::MAX));
            e.0 += 1.0 / (k + (i + 1) as f32);
            e.1 = e.1.min(i);
        }
    }
    let mut out: Vec<(u64, f32, usize)> = fused.into_iter().map(|(k, (s, r))| (k, s, r)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(k, s, _)| (k, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_in_both_lists_beats_one_first_in_a_single_list() {
        let lexical = [1, 2, 3];
        let vector = [4, 2, 5];
        let fused = rrf(&[&lexical, &vector], RRF_K);
        let keys: Vec<u64> = fused.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys[0], 2, "{fused:?}");
        assert!((fused[0].1 - (2.0 / 62.0)).abs() < 1e-6);
        // 1 and 4 are both first in one list: the same score, the lower key first.
        assert_eq!(&keys[1..3], &[1, 4]);
        assert!((fused[1].1 - 1.0 / 61.0).abs() < 1e-6);
        assert_eq!(&keys[3..], &[3, 5]);
    }

    #[test]
    fn one_list_keeps_its_order_and_empty_lists_fuse_to_nothing() {
        let only = [9, 3, 7];
        let fused: Vec<u64> = rrf(&[&only, &[]], RRF_K).iter().map(|(k, _)| *k).collect();
        assert_eq!(fused, vec![9, 3, 7]);
        assert!(rrf(&[&[], &[]], RRF_K).is_empty());
    }
}
