//! A store read for `notevault check`: opened read-only, no migration, no write.

use std::path::Path;

use rusqlite::Connection;

use super::NoteRow;

/// What `notevault check` reads of a store, opened read-only: no migration, no write.
#[derive(Debug, Default)]
pub struct Inspection {
    /// `PRAGMA user_version`: the migrations that ran.
    pub schema: i64,
    /// What `PRAGMA quick_check` found (empty when the file is sound).
    pub damage: Vec<String>,
    pub notes: Vec<NoteRow>,
    pub revisions: i64,
    /// The highest seq recorded (revisions and attachment changes).
    pub committed_seq: i64,
    /// Note rows whose `version_id` is not a revision of that note at that path.
    pub unversioned: Vec<String>,
}

/// Read a store without changing it. An error is a store that cannot be read at all
/// (not a database, unreadable), in words for one line.
pub fn inspect(path: &Path) -> std::result::Result<Inspection, String> {
    use rusqlite::OpenFlags;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| e.to_string())?;
    let fail = |e: rusqlite::Error| e.to_string();
    let schema: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(fail)?;
    let mut out = Inspection {
        schema,
        ..Inspection::default()
    };
    let mut stmt = conn.prepare("PRAGMA quick_check").map_err(fail)?;
    let verdict: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .map_err(fail)?
        .collect::<std::result::Result<_, _>>()
        .map_err(fail)?;
    if verdict != ["ok"] {
        out.damage = verdict;
        return Ok(out);
    }
    if schema < 1 {
        return Ok(out);
    }
    let mut stmt = conn
        .prepare(
            "SELECT note_id, path, version_id, content_hash, created_at, observed_at FROM notes",
        )
        .map_err(fail)?;
    out.notes = stmt
        .query_map([], |r| {
            Ok(NoteRow {
                note_id: r.get(0)?,
                path: r.get(1)?,
                version_id: r.get(2)?,
                content_hash: r.get(3)?,
                created_at: r.get(4)?,
                observed_at: r.get(5)?,
            })
        })
        .map_err(fail)?
        .collect::<std::result::Result<_, _>>()
        .map_err(fail)?;
    out.revisions = conn
        .query_row("SELECT COUNT(*) FROM revisions", [], |r| r.get(0))
        .map_err(fail)?;
    out.committed_seq = conn
        .query_row("SELECT COALESCE(MAX(seq), 0) FROM revisions", [], |r| {
            r.get(0)
        })
        .map_err(fail)?;
    // Attachment changes have their own table since migration 8.
    if let Ok(seq) = conn.query_row(
        "SELECT COALESCE(MAX(seq), 0) FROM attachment_changes",
        [],
        |r| r.get::<_, i64>(0),
    ) {
        out.committed_seq = out.committed_seq.max(seq);
    }
    let mut stmt = conn
        .prepare(
            "SELECT n.path FROM notes n WHERE NOT EXISTS (SELECT 1 FROM revisions r
               WHERE r.version_id = n.version_id AND r.note_id = n.note_id)",
        )
        .map_err(fail)?;
    out.unversioned = stmt
        .query_map([], |r| r.get(0))
        .map_err(fail)?
        .collect::<std::result::Result<_, _>>()
        .map_err(fail)?;
    Ok(out)
}
