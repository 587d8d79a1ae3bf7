//! `notevault status`: what the daemon serving a vault says of itself, asked over HTTP
//! (or, with none, what the folder holds).

/// `notevault status [VAULT]`: what the daemon serving the vault says of itself
/// (`GET /v1/index-status`, `GET /v1/vault`, the review queue), as a summary or JSON;
/// with no daemon serving it, what the folder holds, read directly.
pub fn daemon_status(args: crate::cli::StatusArgs) -> anyhow::Result<()> {
    let session = super::reach::Session::open(args.vault, &args.reach, true)?;
    let json = args.reach.json;
    let base = match &session.reach {
        super::reach::Reach::Daemon { base, .. } => base.clone(),
        super::reach::Reach::Direct(_) => return folder_status(&session, json),
    };
    let index = session.get("/v1/index-status")?;
    let vault = session.get("/v1/vault")?;
    let writes = session.get("/v1/writes?status=pending&page_size=1")?;
    if json {
        let all = serde_json::json!({
            "url": base,
            "index_status": index,
            "vault": vault,
            "pending_writes": writes["total_size"],
        });
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    let n = |v: &serde_json::Value| v.as_i64().unwrap_or(0);
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "none".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let committed = n(&index["committed_seq"]);
    let indexed = n(&index["indexed_seq"]);
    println!(
        "daemon     {base}: vault {} ({} notes, id {})",
        text(&vault["root"]),
        n(&vault["notes"]),
        text(&vault["vault_id"])
    );
    let search = &index["search_index"];
    println!(
        "seq        committed {committed}, indexed {indexed} ({})",
        if indexed >= committed {
            "index fresh".to_string()
        } else {
            format!(
                "index {} behind, {} notes not yet indexed",
                committed - indexed,
                n(&search["not_yet_indexed"])
            )
        }
    );
    println!(
        "index      {} documents, schema {}, last error: {}",
        n(&search["documents"]),
        n(&search["schema_version"]),
        text(&search["last_error"])
    );
    let watcher = &index["watcher"];
    println!(
        "watcher    {} ({} batches, {} rescans, last error: {})",
        text(&watcher["state"]),
        n(&watcher["batches"]),
        n(&watcher["rescans"]),
        text(&watcher["last_error"])
    );
    let history = &index["history"];
    println!(
        "history    through seq {}, backlog {}, pending commits {}, left out {}, dropped commits {}, last error: {}",
        n(&history["head_seq"]),
        n(&history["backlog"]),
        n(&history["pending"]),
        n(&history["left_out_total"]),
        n(&history["dropped_commits"]),
        text(&history["last_error"])
    );
    println!(
        "writes     {} pending review (policy {})",
        n(&writes["total_size"]),
        text(&vault["write_policy"])
    );
    Ok(())
}

/// What a vault no daemon serves holds (`GET /v1/vault`'s counts, from the folder read
/// directly); what only a daemon knows (seq, index, queue, policy) is null.
fn folder_status(session: &super::reach::Session, json: bool) -> anyhow::Result<()> {
    let mut vault = session.ask("/v1/vault", crate::surface::vault::vault)?;
    if let Some(fields) = vault.as_object_mut() {
        // The throwaway state's, not the vault's.
        for key in [
            "vault_id",
            "write_policy",
            "write_budget",
            "e2ee",
            "committed_seq",
            "indexed_seq",
        ] {
            fields.remove(key);
        }
    }
    if json {
        let all = serde_json::json!({
            "url": null,
            "index_status": null,
            "vault": vault,
            "pending_writes": null,
        });
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    let n = |v: &serde_json::Value| v.as_i64().unwrap_or(0);
    let root = vault["root"].as_str().unwrap_or_default();
    println!("daemon     none serves {root} (the folder was read directly)");
    println!(
        "vault      {} notes in {} folders ({} bytes), {} tags, {} private, {} left out",
        n(&vault["notes"]),
        n(&vault["folders"]),
        n(&vault["bytes"]),
        n(&vault["tags"]),
        n(&vault["private_notes"]),
        n(&vault["excluded"])
    );
    Ok(())
}
