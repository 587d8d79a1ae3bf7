//! Fusion of the lexical and the vector rankings. [`by_confidence`], what hybrid search
//! uses: each list's scores brought to 0..1 and mixed with a weight that follows the
//! lexical winner's lead, so a clear keyword winner stays first and a near tie is
//! decided by meaning. [`rrf`], reciprocal rank fusion (`Σ 1 / (k + rank)`), which
//! ignores how far ahead a note was, is kept for comparison.

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

/// The lexical weight with no lead ([`by_confidence`]): an even mix.
pub const LEXICAL_BASE: f32 = 0.5;
/// The lexical weight added at the largest lead: a lead above ~43 % (the runner-up
/// below 57 % of the winner's score) keeps the winner first whatever the vectors say.
pub const LEXICAL_LEAD: f32 = 0.4;

/// Fuse a lexical ranking and a vector ranking, each `(key, score)` best first, by
/// score: lexical scores as a share of the best one, vector scores min-max scaled to
/// 0..1 (all equal: 1), mixed as `w·lexical + (1 - w)·vector` with
/// `w = LEXICAL_BASE + LEXICAL_LEAD · lead`, `lead` being how far the first lexical hit
/// is ahead of the second (`1 - second / first`; 1 when it is alone); a note missing from
/// a list has 0 there. Best first; ties as [`rrf`]'s.
pub fn by_confidence(lexical: &[(u64, f32)], vector: &[(u64, f32)]) -> Vec<(u64, f32)> {
    let best = lexical.first().map_or(0.0, |(_, s)| *s);
    let lead = match lexical {
        [] => 0.0,
        [_] => 1.0,
        [(_, a), (_, b), ..] if *a > 0.0 => (1.0 - b / a).clamp(0.0, 1.0),
        _ => 0.0,
    };
    let w = if lexical.is_empty() {
        0.0
    } else {
        LEXICAL_BASE + LEXICAL_LEAD * lead
    };
    let (lo, hi) = vector
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), (_, s)| {
            (lo.min(*s), hi.max(*s))
        });
    let mut fused: HashMap<u64, (f32, usize)> = HashMap::new();
    for (i, (key, s)) in lexical.iter().enumerate() {
        let share = if best > 0.0 { s / best } else { 0.0 };
        let e = fused.entry(*key).or_insert((0.0, usize::MAX));
        e.0 += w * share;
        e.1 = e.1.min(i);
    }
    for (i, (key, s)) in vector.iter().enumerate() {
        let scaled = if hi - lo > f32::EPSILON {
            (s - lo) / (hi - lo)
        } else {
            1.0
        };
        let e = fused.entry(*key).or_insert((0.0, usize::MAX));
        e.0 += (1.0 - w) * scaled;
        e.1 = e.1.min(i);
    }
    let mut out: Vec<(u64, f32, usize)> = fused.into_iter().map(|(k, (s, r))| (k, s, r)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(k, s, _)| (k, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(fused: &[(u64, f32)]) -> Vec<u64> {
        fused.iter().map(|(k, _)| *k).collect()
    }

    #[test]
    fn a_clear_keyword_winner_stays_first_and_a_near_tie_goes_to_meaning() {
        // 1 is far ahead by words (the runner-up at half its score); the vectors put it
        // last and 2 first. Reciprocal rank fusion lets 2 win; the lead keeps 1 first.
        let lexical = [(1, 10.0), (2, 5.0), (3, 4.0)];
        let vector = [(2, 0.9), (3, 0.8), (4, 0.7), (1, 0.1)];
        let ranks = |l: &[(u64, f32)]| l.iter().map(|(k, _)| *k).collect::<Vec<u64>>();
        assert_eq!(
            keys(&rrf(&[&ranks(&lexical), &ranks(&vector)], RRF_K))[0],
            2
        );
        assert_eq!(keys(&by_confidence(&lexical, &vector))[0], 1);
        // A near tie by words: meaning decides.
        let lexical = [(1, 10.0), (2, 9.8), (3, 4.0)];
        assert_eq!(keys(&by_confidence(&lexical, &vector))[0], 2);
    }

    #[test]
    fn one_side_alone_keeps_its_order() {
        let vector = [(4, 0.9), (5, 0.5)];
        assert_eq!(keys(&by_confidence(&[], &vector)), [4, 5]);
        let lexical = [(7, 3.0), (8, 1.0)];
        assert_eq!(keys(&by_confidence(&lexical, &[])), [7, 8]);
        assert!(by_confidence(&[], &[]).is_empty());
        // Equal vector scores count the same.
        let fused = by_confidence(&[(1, 2.0)], &[(2, 0.5), (1, 0.5)]);
        assert_eq!(keys(&fused), [1, 2]);
    }

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
