//! The vendored tantivy-fst (vendor/tantivy-fst/NOTEVAULT.md): a dictionary large enough
//! for its builder's registry to grow through every size (64, 512, 4,096, 10,000 rows)
//! reads back every key with its value, in order.

use tantivy_fst::{IntoStreamer, Map, MapBuilder, Streamer};

#[test]
fn a_dictionary_built_through_every_registry_size_reads_back_whole() {
    // Shared prefixes and suffixes, so that the registry finds nodes to share.
    let mut keys: Vec<String> = (0..60_000u32)
        .map(|i| format!("w{:03}-{}-end", i % 997, i))
        .collect();
    keys.sort();
    keys.dedup();
    let mut builder = MapBuilder::memory();
    for (i, k) in keys.iter().enumerate() {
        builder.insert(k, i as u64 * 7).unwrap();
    }
    let map = Map::from_bytes(builder.into_inner().unwrap()).unwrap();
    assert_eq!(map.len(), keys.len());
    for (i, k) in keys.iter().enumerate().step_by(97) {
        assert_eq!(map.get(k), Some(i as u64 * 7), "{k}");
    }
    assert_eq!(map.get("w000-absent"), None);
    let mut stream = map.into_stream();
    let mut n = 0;
    while let Some((k, v)) = stream.next() {
        assert_eq!((k, v), (keys[n].as_bytes(), n as u64 * 7));
        n += 1;
    }
    assert_eq!(n, keys.len());
}
