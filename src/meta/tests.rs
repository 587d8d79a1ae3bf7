use super::*;

#[test]
fn migrations_run_once_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.sqlite");
    let meta = Meta::open(&path).unwrap();
    assert_eq!(
        meta.schema_version().unwrap(),
        super::migrations::MIGRATIONS.len() as i64
    );
    meta.set_setting("k", "v").unwrap();
    drop(meta);
    let meta = Meta::open(&path).unwrap();
    assert_eq!(meta.setting("k").unwrap().as_deref(), Some("v"));
    let mode: String = meta
        .conn
        .lock()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}
