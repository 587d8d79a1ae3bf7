//! Note and attachment rows and the revision chain: what the recorder writes, each
//! batch in one transaction that also claims its seqs.

use tokio_postgres::Row;

use super::audit::insert_audits;
use super::flight::{params, Flight};
use super::oplog::insert_ops;
use super::review::keep_receipts;
use super::{limit, seq_span, PgMeta};
use crate::error::Result;
use crate::hosted::block_on;
use crate::storage::metadata::Records;
use crate::storage::rows::{
    AttachmentChangeRow, AttachmentRow, NoteRow, OpRow, RevisionRow, SettledAudit, Settlement,
};

const REVISION_COLUMNS: &str = "seq, version_id, note_id, path, prev_version_id, content_hash, \
                                actor, kind, created_at, commit_id";

fn revision_from(r: &Row) -> RevisionRow {
    RevisionRow {
        seq: r.get(0),
        version_id: r.get(1),
        note_id: r.get(2),
        path: r.get(3),
        prev_version_id: r.get(4),
        content_hash: r.get(5),
        actor: r.get(6),
        kind: r.get(7),
        created_at: r.get(8),
        commit_id: r.get(9),
    }
}

impl PgMeta {
    fn revisions_where(&self, clause: &str, params: super::Params<'_>) -> Result<Vec<RevisionRow>> {
        let sql =
            format!("SELECT {REVISION_COLUMNS} FROM revisions WHERE vault_id = $1 AND {clause}");
        Ok(self
            .query(&sql, params)?
            .iter()
            .map(revision_from)
            .collect())
    }
}

impl Records for PgMeta {
    fn all_notes(&self) -> Result<Vec<NoteRow>> {
        let rows = self.query(
            "SELECT note_id, path, version_id, content_hash, created_at, observed_at
             FROM notes WHERE vault_id = $1 ORDER BY note_id COLLATE \"C\"",
            &[&self.vault],
        )?;
        Ok(rows
            .iter()
            .map(|r| NoteRow {
                note_id: r.get(0),
                path: r.get(1),
                version_id: r.get(2),
                content_hash: r.get(3),
                created_at: r.get(4),
                observed_at: r.get(5),
            })
            .collect())
    }

    fn committed_seq(&self) -> Result<i64> {
        Ok(self
            .query_opt(
                "SELECT committed_seq FROM vault_counters WHERE vault_id = $1",
                &[&self.vault],
            )?
            .map(|r| r.get(0))
            .unwrap_or(0))
    }

    fn record_settled(
        &self,
        revisions: &[RevisionRow],
        ops: &[OpRow],
        notes: &[NoteRow],
        removed: &[String],
        settled: &[Settlement],
    ) -> Result<()> {
        let span = seq_span(
            revisions
                .iter()
                .map(|r| r.seq)
                .chain(ops.iter().map(|o| o.seq)),
        );
        let vault = &self.vault;
        // The bytes the revisions name, first: in this transaction, so a revision is
        // never without them, and in this round trip.
        let (hashes, packed) = self.contents.take();
        let bodies: Vec<std::borrow::Cow<'_, [u8]>> = packed.iter().map(|p| p.bytes()).collect();
        let mut flight = Flight::claiming(*vault, span);
        if !hashes.is_empty() {
            flight.push(
                "INSERT INTO contents (vault_id, content_hash, bytes)
                 SELECT $1, h, b FROM unnest($2::text[], $3::bytea[]) AS t(h, b)
                 ON CONFLICT (vault_id, content_hash) DO NOTHING",
                params![vault, hashes, bodies],
            );
        }
        insert_ops(&mut flight, vault, ops);
        flight.each(
            "INSERT INTO revisions (vault_id, seq, version_id, note_id, path,
               prev_version_id, content_hash, actor, kind, created_at, commit_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            revisions,
            |r| {
                params![
                    vault,
                    &r.seq,
                    &r.version_id,
                    &r.note_id,
                    &r.path,
                    &r.prev_version_id,
                    &r.content_hash,
                    &r.actor,
                    &r.kind,
                    &r.created_at,
                    &r.commit_id,
                ]
            },
        );
        // The deletes of notes before their upserts.
        flight.each(
            "DELETE FROM notes WHERE vault_id = $1 AND note_id = $2",
            removed,
            |id| params![vault, id],
        );
        flight.each(
            "INSERT INTO notes (vault_id, note_id, path, version_id, content_hash,
               created_at, observed_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (vault_id, note_id) DO UPDATE SET path = excluded.path,
               version_id = excluded.version_id, content_hash = excluded.content_hash,
               observed_at = excluded.observed_at",
            notes,
            |n| {
                params![
                    vault,
                    &n.note_id,
                    &n.path,
                    &n.version_id,
                    &n.content_hash,
                    &n.created_at,
                    &n.observed_at,
                ]
            },
        );
        settle(&mut flight, vault, settled);
        block_on(async { flight.commit(self.db.client().await?).await })
    }

    fn revision(&self, version_id: &str) -> Result<Option<RevisionRow>> {
        Ok(self
            .revisions_where("version_id = $2", &[&self.vault, &version_id])?
            .pop())
    }

    fn latest_revision_at(&self, path: &str) -> Result<Option<RevisionRow>> {
        Ok(self
            .revisions_where("path = $2 ORDER BY seq DESC LIMIT 1", &[&self.vault, &path])?
            .pop())
    }

    fn revisions_page(
        &self,
        note_id: &str,
        after: Option<i64>,
        descending: bool,
        limit_to: usize,
    ) -> Result<Vec<RevisionRow>> {
        let clause = if descending {
            "note_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4"
        } else {
            "note_id = $2 AND seq > $3 ORDER BY seq ASC LIMIT $4"
        };
        let bound = after.unwrap_or(if descending { i64::MAX } else { i64::MIN });
        self.revisions_where(clause, &[&self.vault, &note_id, &bound, &limit(limit_to)])
    }

    fn revisions_of(&self, note_id: &str) -> Result<Vec<RevisionRow>> {
        self.revisions_where("note_id = $2 ORDER BY seq", &[&self.vault, &note_id])
    }

    fn revisions_after(&self, after: i64) -> Result<Vec<RevisionRow>> {
        self.revisions_where("seq > $2 ORDER BY seq", &[&self.vault, &after])
    }

    fn all_attachments(&self) -> Result<Vec<AttachmentRow>> {
        let rows = self.query(
            "SELECT path, size, mtime_ns, inode, sha256, content_type, modified_at
             FROM attachments WHERE vault_id = $1 ORDER BY path",
            &[&self.vault],
        )?;
        Ok(rows
            .iter()
            .map(|r| AttachmentRow {
                path: r.get(0),
                size: r.get::<_, i64>(1) as u64,
                mtime_ns: r.get(2),
                inode: r.get::<_, i64>(3) as u64,
                sha256: r.get(4),
                content_type: r.get(5),
                modified_at: r.get(6),
            })
            .collect())
    }

    fn record_attachments_settled(
        &self,
        changes: &[AttachmentChangeRow],
        ops: &[OpRow],
        upserts: &[AttachmentRow],
        removed: &[String],
        settled: &[Settlement],
    ) -> Result<()> {
        let span = seq_span(
            changes
                .iter()
                .map(|c| c.seq)
                .chain(ops.iter().map(|o| o.seq)),
        );
        let vault = &self.vault;
        let mut flight = Flight::claiming(*vault, span);
        insert_ops(&mut flight, vault, ops);
        flight.each(
            "INSERT INTO attachment_changes (vault_id, seq, path, sha256, kind, actor,
               created_at, commit_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            changes,
            |c| {
                params![
                    vault,
                    &c.seq,
                    &c.path,
                    &c.sha256,
                    &c.kind,
                    &c.actor,
                    &c.created_at,
                    &c.commit_id,
                ]
            },
        );
        flight.each(
            "DELETE FROM attachments WHERE vault_id = $1 AND path = $2",
            removed,
            |p| params![vault, p],
        );
        flight.each(
            "INSERT INTO attachments (vault_id, path, size, mtime_ns, inode, sha256,
               content_type, modified_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (vault_id, path) DO UPDATE SET size = excluded.size,
               mtime_ns = excluded.mtime_ns, inode = excluded.inode,
               sha256 = excluded.sha256, content_type = excluded.content_type,
               modified_at = excluded.modified_at",
            upserts,
            |a| {
                // As SQLite stores them: the bits of a u64 in a signed column.
                params![
                    vault,
                    &a.path,
                    a.size as i64,
                    &a.mtime_ns,
                    a.inode as i64,
                    &a.sha256,
                    &a.content_type,
                    &a.modified_at,
                ]
            },
        );
        settle(&mut flight, vault, settled);
        block_on(async { flight.commit(self.db.client().await?).await })
    }

    fn set_commit_ids(&self, seqs: &[i64], commit_id: &str) -> Result<()> {
        self.execute(
            "UPDATE revisions SET commit_id = $2 WHERE vault_id = $1 AND seq = ANY($3)",
            &[&self.vault, &commit_id, &seqs],
        )?;
        Ok(())
    }
}

/// Keep what a batch's writes settle with them (`rows::Settlement`) in its transaction.
fn settle<'a>(flight: &mut Flight<'a>, vault: &'a uuid::Uuid, settled: &'a [Settlement]) {
    keep_receipts(
        flight,
        vault,
        settled.iter().filter_map(|s| s.receipt.as_ref()),
    );
    flight.each(
        "INSERT INTO applied_writes (vault_id, at) VALUES ($1, $2)",
        settled.iter().filter_map(|s| s.applied_at.as_ref()),
        |at| params![vault, at],
    );
    let audits: Vec<&SettledAudit> = settled.iter().filter_map(|s| s.audit.as_ref()).collect();
    insert_audits(flight, vault, &audits);
}
