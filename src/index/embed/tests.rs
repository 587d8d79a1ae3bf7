use super::*;
use crate::index::writer::tests::{found, note, until};

#[test]
fn notes_are_cut_at_headings_outside_code() {
    let body = "intro line\n\n# One\nfirst\n```\n# not a heading\n```\n## Two\nsecond\n#tag is no heading\n# \n";
    let c = chunk_text("T", body, MAX_CHUNKS);
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!(c[0], "T\nintro line\n\n");
    assert!(c[1].starts_with("T\n# One\nfirst\n```\n# not a heading"));
    assert!(c[2].starts_with("T\n## Two\nsecond\n#tag is no heading\n"));
    // An empty heading makes no chunk of its own.
    assert!(!c.iter().any(|s| s == "T\n# \n"));
}

#[test]
fn dot_matches_the_plain_sum() {
    let a: Vec<i8> = (0..37).map(|i: i32| (i * 6 - 110) as i8).collect();
    let b: Vec<i16> = (0..37).map(|i| 16384 - i * 900).collect();
    let plain: i64 = a
        .iter()
        .zip(&b)
        .map(|(x, y)| i64::from(*x) * i64::from(*y))
        .sum();
    assert_eq!(i64::from(arena::dot(&a, &b)), plain);
    assert_eq!(arena::dot(&[], &[]), 0);
    // The extremes of a query do not overflow at any width (a damaged file's -128 too).
    for dim in (1..=8192).step_by(97).chain([384, 1024, 1536, 2048, 4096]) {
        let q = arena::Query::new(&vec![1.0; dim]);
        let bytes = vec![-128i8; dim];
        let sum: i64 = q.values.iter().map(|v| -128 * i64::from(*v)).sum();
        assert!(sum >= i64::from(i32::MIN), "{dim}");
        assert_eq!(i64::from(arena::dot(&bytes, &q.values)), sum, "{dim}");
    }
}

#[test]
fn quantized_cosines_stay_within_a_hundredth() {
    // Unit vectors of 256 dimensions from a fixed sequence; two chunks per entry.
    let mut seed = 7u64;
    let mut unit = || {
        let mut v: Vec<f32> = (0..256)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) as f32 / (1u64 << 31) as f32 - 0.5
            })
            .collect();
        model::normalize(&mut v);
        v
    };
    for _ in 0..50 {
        let (a, b, q) = (unit(), unit(), unit());
        let entry = Entry::quantize(String::new(), &[a.clone(), b.clone()].concat(), 256);
        let exact = [a, b].map(|v| v.iter().zip(&q).map(|(x, y)| x * y).sum::<f32>());
        let chunks = entry
            .vectors
            .chunks_exact(256)
            .zip(entry.scales.iter().copied());
        for ((bytes, scale), exact) in chunks.zip(exact) {
            let query = arena::Query::new(&q);
            let got = arena::dot(bytes, &query.values) as f32 * scale * query.scale;
            assert!((got - exact).abs() < 0.01, "{got} against {exact}");
        }
    }
    // A zero chunk stays zero.
    let zero = Entry::quantize(String::new(), &[0.0; 4], 4);
    assert_eq!((zero.vectors, zero.scales), (vec![0; 4], vec![1.0]));
}

/// A model of one known word, `car`, whose vector is the first axis.
fn car_model(dir: &Path) {
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "car": 1}, "unk_token": "[UNK]"}
    });
    #[allow(clippy::disallowed_methods, reason = "a test's model folder")]
    {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
        let rows: Vec<u8> = [0f32, 0., 0., 0., 1., 0., 0., 0.]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 4], &rows)
            .unwrap();
        let file = safetensors::tensor::serialize([("embeddings", view)], None).unwrap();
        std::fs::write(dir.join("model.safetensors"), file).unwrap();
        std::fs::write(dir.join("config.json"), r#"{"normalize": true}"#).unwrap();
    }
}

#[test]
fn nearest_looks_past_many_stale_vectors() {
    let dir = tempfile::tempdir().unwrap();
    car_model(&dir.path().join("model"));
    let v = Vectors::open(&dir.path().join("state"), Some(&dir.path().join("model")));
    assert!(v.ready(), "{:?}", v.status());
    {
        let mut store = v.store.write();
        for key in 0..200u64 {
            let entry = Entry::quantize(format!("blake3:{key} n{key}.md"), &[1., 0., 0., 0.], 4);
            store.notes.insert(key, entry);
        }
    }
    // The 150 best (equal, by key) are stale: the next ones are found all the same.
    let near = v.nearest("car", |_| true, |key, _| key >= 150, 10).unwrap();
    let keys: Vec<u64> = near.hits.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, (150..160).collect::<Vec<_>>());
    assert_eq!(near.covered, 50);
    // The filter narrows what is returned, not what is covered.
    let near = v
        .nearest("car", |key| key % 2 == 0, |_, _| true, 3)
        .unwrap();
    assert_eq!(
        near.hits.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        [0, 2, 4]
    );
    assert_eq!(near.covered, 200);
}

#[test]
fn a_long_note_keeps_at_most_max_chunks() {
    let headed: String = (0..200).map(|i| format!("# h{i}\ntext {i}\n")).collect();
    let body = format!("intro\n{headed}");
    let c = chunk_text("T", &body, MAX_CHUNKS);
    assert_eq!(c.len(), MAX_CHUNKS);
    assert!(c.last().unwrap().contains("text 199"));
}

#[test]
fn a_query_vector_is_kept_but_a_failed_embedding_is_not_and_the_oldest_goes_first() {
    let queries = model::Queries::default();
    let calls = std::cell::Cell::new(0);
    let embed = |v: Option<Option<Vec<f32>>>| {
        calls.set(calls.get() + 1);
        v
    };
    assert_eq!(
        queries.get_or("a", || embed(Some(Some(vec![1.0])))),
        Some(Some(vec![1.0]))
    );
    assert_eq!(
        queries.get_or("a", || embed(Some(Some(vec![9.0])))),
        Some(Some(vec![1.0]))
    );
    assert_eq!(calls.get(), 1);
    // A query of no known word is kept as such; a failure (a panic caught) is not kept.
    assert_eq!(queries.get_or("zz", || embed(Some(None))), Some(None));
    assert_eq!(
        queries.get_or("zz", || embed(Some(Some(vec![2.0])))),
        Some(None)
    );
    assert_eq!(queries.get_or("boom", || embed(None)), None);
    assert_eq!(
        queries.get_or("boom", || embed(Some(Some(vec![3.0])))),
        Some(Some(vec![3.0]))
    );
    assert_eq!(calls.get(), 4);
    // 256 newer queries push the first out.
    for i in 0..256 {
        queries.get_or(&format!("q{i}"), || Some(None));
    }
    assert_eq!(
        queries.get_or("a", || embed(Some(Some(vec![5.0])))),
        Some(Some(vec![5.0]))
    );
    assert_eq!(calls.get(), 5);
}

/// The index writer hands a change's embedding to the vault's `embed` thread and goes on:
/// while the vectors cannot be stored, the change is searchable by its words, pending,
/// and `wait_embedded` says not yet; once they can, the queue is embedded in order, a
/// note's newest version last, and `wait_embedded` says done.
#[test]
fn words_do_not_wait_for_vectors_and_the_vectors_follow_in_order() {
    let dir = tempfile::tempdir().unwrap();
    car_model(&dir.path().join("model"));
    let vault = dir.path().join("vault");
    #[allow(clippy::disallowed_methods, reason = "a test's own temp folder")]
    std::fs::create_dir_all(&vault).unwrap();
    #[allow(clippy::disallowed_methods, reason = "a test's own temp folder")]
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let index = crate::index::SearchIndex::open_with_model(
        &dir.path().join("state"),
        Some(&dir.path().join("model")),
    )
    .unwrap();
    let v = index.vectors.clone();
    index.start(Vec::new(), 0);
    until("the start-up sync", || {
        index.indexed_seq() >= 0 && !v.status().syncing
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let embedded =
        |seq: i64, ms: u64| rt.block_on(v.wait_embedded(seq, std::time::Duration::from_millis(ms)));
    let found = |word: &str| found(&index, word);

    // The vectors held: the embed thread waits to look at the store.
    let held = v.store.write();
    let first = note(&vault, "a.md", "a", "car\n");
    index.upsert(first, 1);
    assert!(index.wait_for_blocking(1, std::time::Duration::from_secs(20)));
    assert_eq!(found("car"), 1);
    until("the change is on the embed thread", || {
        v.in_flight() == Some(1)
    });
    assert!(!embedded(1, 50), "embedded while the vectors are held");
    // A newer version of `a` and a note `b` queue behind it.
    let newer = note(&vault, "a.md", "a", "car car\n");
    let newer_stamp = stamp_of(&newer);
    index.upsert(newer, 2);
    index.upsert(note(&vault, "b.md", "b", "car\n"), 3);
    assert!(index.wait_for_blocking(3, std::time::Duration::from_secs(20)));
    assert_eq!(found("car"), 2);
    until("both queued", || v.pending() == 3);
    assert_eq!(v.status().pending, 3);
    drop(held);

    assert!(embedded(3, 20_000), "{:?}", v.status());
    assert_eq!(v.pending(), 0);
    let store = v.store.read();
    let key = crate::vault::note::key_of;
    assert_eq!(
        store.notes.get(&key("a")).map(|e| e.stamp.clone()),
        Some(newer_stamp)
    );
    assert!(store.notes.get(&key("b")).is_some());
    drop(store);

    // A removal goes the same way (handed over once the index has it, as a search with
    // `min_seq` waits).
    index.remove("b", 4);
    assert!(index.wait_for_blocking(4, std::time::Duration::from_secs(20)));
    assert!(embedded(4, 20_000));
    assert!(v.store.read().notes.get(&key("b")).is_none());
}
