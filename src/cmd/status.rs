//! `notevault status`: what a running daemon says of itself, asked over HTTP.

/// `notevault status`: what a running daemon says of itself (`GET /v1/index-status`,
/// `GET /v1/vault`, the review queue), as a summary or JSON.
pub fn daemon_status(args: crate::cli::StatusArgs) -> anyhow::Result<()> {
    let base = args.url.trim_end_matches('/').to_string();
    let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(10));
    if let Some(file) = &args.cacert {
        let pem = std::fs::read(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| anyhow::anyhow!("{} is not a PEM certificate: {e}", file.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (index, vault, writes) = runtime.block_on(async {
        let client = builder.build()?;
        let get = |path: &'static str| {
            let client = client.clone();
            let url = format!("{base}{path}");
            let token = args.token.clone();
            async move { status_get(&client, &url, token.as_deref()).await }
        };
        let index = get("/v1/index-status").await?;
        let vault = get("/v1/vault").await?;
        let writes = get("/v1/writes?status=pending&page_size=1").await?;
        anyhow::Ok((index, vault, writes))
    })?;
    if args.json {
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

/// One GET of `notevault status`; a failure is one line that says what to do.
async fn status_get(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| {
        // The causes say whether a TLS handshake failed on the certificate.
        let mut causes = String::new();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            causes.push_str(&cause.to_string());
            source = cause.source();
        }
        if causes.to_ascii_lowercase().contains("certificate") {
            return anyhow::anyhow!(
                "{url}: the daemon's TLS certificate is not trusted: pass --cacert FILE with its certificate (PEM)"
            );
        }
        let why = if e.is_connect() {
            "nothing answers there"
        } else if e.is_timeout() {
            "it did not answer within 10 s"
        } else {
            "the request failed"
        };
        anyhow::anyhow!(
            "no notevault daemon at {url} ({why}): start one with `notevault serve`, or pass --url"
        )
    })?;
    let code = response.status();
    let body: serde_json::Value = response.json().await.map_err(|_| {
        anyhow::anyhow!("{url} answered {code} without JSON: is it a notevault daemon? pass --url")
    })?;
    if code.is_success() {
        return Ok(body);
    }
    if code == reqwest::StatusCode::UNAUTHORIZED {
        anyhow::bail!(
            "the daemon at {url} needs a token ({}): pass --token or set NOTEVAULT_TOKEN (`notevault token create`)",
            body["reason"].as_str().unwrap_or("401")
        );
    }
    anyhow::bail!(
        "{url} answered {code} {}: {} {}",
        body["reason"].as_str().unwrap_or(""),
        body["message"].as_str().unwrap_or(""),
        body["hint"].as_str().unwrap_or("")
    )
}
