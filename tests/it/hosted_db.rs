//! Hosted mode's database from the command line, against a real PostgreSQL
//! (`common::postgres`): `db migrate` (idempotent, a newer schema refused), `vault
//! create|list|delete` (a delete removes every row of its vault and no other's), and a
//! database that is down, hung or misnamed failing fast with one clear line.

#![allow(
    clippy::disallowed_methods,
    reason = "the test writes its config file in a temp dir"
)]

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::postgres::{self, query, Cluster};
use crate::common::BIN;

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// `notevault ARGS` with `NOTEVAULT_DATABASE_URL` as given (never inherited).
fn notevault(args: &[&str], env_url: Option<&str>) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("NOTEVAULT_DATABASE_URL");
    if let Some(url) = env_url {
        cmd.env("NOTEVAULT_DATABASE_URL", url);
    }
    let begin = Instant::now();
    let out = cmd.output().unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: begin.elapsed(),
    }
}

/// `notevault ARGS --database URL`, which must succeed: its stdout.
fn ok(args: &[&str], url: &str) -> String {
    let run = notevault(&[args, &["--database", url]].concat(), None);
    assert!(run.ok, "{args:?}: {}", run.stderr);
    run.stdout
}

/// `notevault ARGS --database URL`, which must fail with one line holding `needle`.
fn fails(args: &[&str], url: &str, needle: &str) -> Run {
    let run = notevault(&[args, &["--database", url]].concat(), None);
    assert!(!run.ok, "{args:?} must fail: {}", run.stdout);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "one line for {args:?}: {}", run.stderr);
    assert!(lines[0].starts_with("notevault: "), "{}", run.stderr);
    assert!(lines[0].contains(needle), "{needle:?} in {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

fn count(url: &str, sql: &str) -> i64 {
    query(url, sql)[0].get(0)
}

#[test]
fn migrate_is_idempotent_and_a_newer_schema_is_refused() {
    let Some(db) = postgres::database() else {
        return;
    };
    let begin = Instant::now();
    fails(
        &["vault", "list"],
        &db.url,
        "run `notevault db migrate` first",
    );
    let first = ok(&["db", "migrate"], &db.url);
    assert!(first.contains("migrated from version 0 to"), "{first}");
    let again = ok(&["db", "migrate"], &db.url);
    assert!(again.contains("already"), "{again}");
    let tables: Vec<String> = query(
        &db.url,
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .iter()
    .map(|r| r.get(0))
    .collect();
    for table in [
        "notevault_schema",
        "vaults",
        "vault_counters",
        "notes",
        "contents",
        "revisions",
        "sync_ops",
        "idempotency",
        "pending_writes",
        "personal_tokens",
        "console_sessions",
        "audit_events",
        "settings",
        "e2ee_keys",
    ] {
        assert!(tables.iter().any(|t| t == table), "{table} in {tables:?}");
    }

    // A newer notevault migrated this database: this one touches nothing.
    query(
        &db.url,
        "UPDATE notevault_schema SET version = version + 1 WHERE id = 1",
    );
    fails(&["db", "migrate"], &db.url, "is newer than this notevault");
    fails(&["vault", "list"], &db.url, "upgrade notevault");
    fails(
        &["vault", "create", "x"],
        &db.url,
        "is newer than this notevault",
    );
    assert_eq!(count(&db.url, "SELECT count(*) FROM vaults"), 0);
    eprintln!("migrate test: {} ms", begin.elapsed().as_millis());
}

#[test]
fn two_migrations_at_once_migrate_once() {
    let Some(db) = postgres::database() else {
        return;
    };
    let spawn = || {
        Command::new(BIN)
            .args(["db", "migrate", "--database", &db.url])
            .env_remove("NOTEVAULT_CONFIG")
            .env_remove("NOTEVAULT_DATABASE_URL")
            .output()
            .unwrap()
    };
    let (one, two) = std::thread::scope(|s| {
        let one = s.spawn(spawn);
        let two = s.spawn(spawn);
        (one.join().unwrap(), two.join().unwrap())
    });
    let outs: Vec<String> = [one, two]
        .iter()
        .map(|o| {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).into_owned()
        })
        .collect();
    let migrated = outs.iter().filter(|o| o.contains("from version 0")).count();
    assert_eq!(migrated, 1, "{outs:?}");
}

#[test]
fn vaults_are_created_listed_and_deleted_from_the_command_line() {
    let Some(db) = postgres::database() else {
        return;
    };
    ok(&["db", "migrate"], &db.url);
    let a = ok(&["vault", "create", "alpha", "--org", "acme"], &db.url);
    let a = uuid::Uuid::parse_str(a.trim()).expect("create prints the id alone");
    // The environment names the database too.
    let b = notevault(&["vault", "create", "beta two"], Some(&db.url));
    assert!(b.ok, "{}", b.stderr);
    let b = uuid::Uuid::parse_str(b.stdout.trim()).unwrap();
    assert_ne!(a, b);

    fails(
        &["vault", "create", "alpha"],
        &db.url,
        "a vault named `alpha` exists already",
    );
    fails(
        &["vault", "create", &uuid::Uuid::new_v4().to_string()],
        &db.url,
        "not a UUID",
    );
    fails(&["vault", "create", " x"], &db.url, "space");
    fails(&["vault", "create", ""], &db.url, "1 to 100 characters");

    let table = ok(&["vault", "list"], &db.url);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], "ID\tNAME\tORG\tCREATED\tSTATE");
    assert!(
        lines[1].starts_with(&format!("{a}\talpha\tacme\t")),
        "{table}"
    );
    assert!(lines[1].ends_with("\tactive"), "{table}");
    assert!(
        lines[2].starts_with(&format!("{b}\tbeta two\t-\t")),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["vault", "list", "--json"], &db.url)).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
    assert_eq!(json[0]["id"], a.to_string());
    assert_eq!(json[0]["name"], "alpha");
    assert_eq!(json[0]["org_id"], "acme");
    assert_eq!(json[0]["state"], "active");
    assert!(json[1]["org_id"].is_null());
    assert!(json[0]["created_at"].as_str().unwrap().ends_with('Z'));

    // So does the config file (`database_url`).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("notevault.toml");
    std::fs::write(&config, format!("database_url = {:?}\n", db.url)).unwrap();
    let listed = notevault(
        &["vault", "list", "--config", config.to_str().unwrap()],
        None,
    );
    assert!(
        listed.ok && listed.stdout.contains("\talpha\t"),
        "{}",
        listed.stderr
    );

    let gone = ok(&["vault", "delete", "alpha"], &db.url);
    assert!(gone.contains(&a.to_string()), "{gone}");
    fails(
        &["vault", "delete", "alpha"],
        &db.url,
        "no vault named `alpha`",
    );
    ok(&["vault", "delete", &b.to_string()], &db.url);
    let empty = ok(&["vault", "list", "--json"], &db.url);
    assert_eq!(empty.trim(), "[]");
}

/// One row in every per-vault table for vault `$V` (a test of the purge: a table added
/// later without a row here fails `a_delete_removes_every_row_of_its_vault_only`).
const ROWS: &str = "
    INSERT INTO settings VALUES ($V, 'write_policy', 'open');
    INSERT INTO contents VALUES ($V, 'sha256:aa', 'hello');
    INSERT INTO notes VALUES ($V, 'n1', 'a.md', 'A', NULL, 'standard', 'v1', 'sha256:aa', 1, now(), now());
    INSERT INTO revisions VALUES ($V, 1, 'v1', 'n1', 'a.md', NULL, 'sha256:aa', 'cli', 'create', now());
    INSERT INTO sync_ops VALUES ($V, 1, 'upsert', 'n1', 'a.md', NULL, 'v1', NULL, 'sha256:aa', 'standard', 'cli', now());
    INSERT INTO sync_checkpoints VALUES ($V, 'phone', 1, now());
    INSERT INTO e2ee_keys VALUES ($V, '{}', now(), now());
    INSERT INTO idempotency VALUES ($V, 'k1', 'h', '{}', now());
    INSERT INTO pending_writes (vault_id, id, kind, status, agent_id, created_at, payload, preview, slug)
        VALUES ($V, 'w1', 'create', 'pending', 'agent', now(), '{}', '', 'a');
    INSERT INTO applied_writes VALUES ($V, now());
    INSERT INTO personal_tokens (prefix, vault_id, name, hash, scopes, created_at)
        VALUES ('nvp_' || $T, $V, 'ci', 'h', '', now());
    INSERT INTO sign_in_codes VALUES ('c' || $T, $V, now(), now());
    INSERT INTO console_sessions VALUES ('s' || $T, $V, 'csrf', now(), now(), now());
    INSERT INTO idp_sign_ins VALUES ('i' || $T, $V, 'n', 'v', 'http://x', now());
    INSERT INTO presign_nonces VALUES ($V, 'nonce', 0);
    INSERT INTO audit_events (vault_id, kind, actor, created_at) VALUES ($V, 'token_created', 'cli', now());
    INSERT INTO write_intents (vault_id, key, op_hash, intent) VALUES ($V, 'k2', 'h', '{}');
    INSERT INTO attachments VALUES ($V, 'p.png', 1, 0, 0, 'aa', 'image/png', '2026-01-01T00:00:00.000Z');
    INSERT INTO attachment_changes VALUES ($V, 2, 'p.png', 'aa', 'create', 'cli', '2026-01-01T00:00:00.000Z', NULL);
    INSERT INTO presigned_uploads VALUES ($V, 'u1', 'q.png', 'bb', 1, 'image/png', 'api', 0);
    UPDATE vault_counters SET committed_seq = 2 WHERE vault_id = $V;";

#[test]
fn a_delete_removes_every_row_of_its_vault_only() {
    let Some(db) = postgres::database() else {
        return;
    };
    ok(&["db", "migrate"], &db.url);
    let a = ok(&["vault", "create", "a"], &db.url).trim().to_string();
    let b = ok(&["vault", "create", "b"], &db.url).trim().to_string();
    for (vault, tag) in [(&a, "a"), (&b, "b")] {
        let sql = ROWS
            .replace("$V", &format!("'{vault}'::uuid"))
            .replace("$T", &format!("'{tag}'"));
        query(&db.url, &sql);
    }
    let tables: Vec<String> = query(
        &db.url,
        "SELECT table_name::text FROM information_schema.columns
         WHERE table_schema = 'public' AND column_name = 'vault_id' ORDER BY 1",
    )
    .iter()
    .map(|r| r.get(0))
    .collect();
    assert!(tables.len() >= 15, "{tables:?}");
    let rows_of = |vault: &str| -> Vec<(String, i64)> {
        tables
            .iter()
            .map(|t| {
                let n = count(
                    &db.url,
                    &format!("SELECT count(*) FROM {t} WHERE vault_id = '{vault}'"),
                );
                (t.clone(), n)
            })
            .collect()
    };
    for (table, n) in rows_of(&a) {
        assert!(n >= 1, "the fixture has no row in {table}: add one to ROWS");
    }

    ok(&["vault", "delete", "a"], &db.url);
    for (table, n) in rows_of(&a) {
        assert_eq!(n, 0, "{table} keeps rows of the deleted vault");
    }
    for (table, n) in rows_of(&b) {
        assert!(n >= 1, "{table} lost the other vault's rows");
    }
    assert_eq!(
        count(
            &db.url,
            &format!("SELECT count(*) FROM vaults WHERE id = '{b}'")
        ),
        1
    );
}

#[test]
fn a_stopped_or_hung_database_fails_within_seconds() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    eprintln!(
        "postgres harness: own cluster up in {} ms",
        cluster.started_in.as_millis()
    );
    let url = cluster.admin_url();
    ok(&["db", "migrate"], &url);
    ok(&["vault", "create", "v"], &url);
    assert!(ok(&["vault", "list"], &url).contains("\tv\t"));

    cluster.stop_immediate();
    let run = fails(&["vault", "list"], &url, "database storage is unreachable");
    assert!(run.took < Duration::from_secs(3), "took {:?}", run.took);
    fails(&["vault", "create", "w"], &url, "unreachable");

    // A server that takes the connection and never answers: the acquire timeout.
    let hung = TcpListener::bind("127.0.0.1:0").unwrap();
    let hung_url = format!(
        "postgres://postgres@127.0.0.1:{}/x",
        hung.local_addr().unwrap().port()
    );
    let run = fails(&["vault", "list"], &hung_url, "did not answer within");
    assert!(run.took < Duration::from_secs(4), "took {:?}", run.took);
    assert!(run.took >= Duration::from_secs(1), "took {:?}", run.took);
}

#[test]
fn a_bad_or_missing_database_url_is_one_clear_line() {
    fails(&["vault", "list"], "not a url", "database URL is invalid");
    fails(
        &["db", "migrate"],
        "postgres://u:hunter2@127.0.0.1:1/x",
        "unreachable",
    );
    let run = notevault(
        &["db", "migrate", "--database", "postgres://u:hunter2@[::1"],
        None,
    );
    assert!(!run.ok);
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    let run = notevault(&["vault", "list"], None);
    assert!(!run.ok);
    assert!(
        run.stderr.contains("NOTEVAULT_DATABASE_URL") && run.stderr.contains("--database"),
        "{}",
        run.stderr
    );
    // A database that does not exist on a server that does.
    let Some(db) = postgres::database() else {
        return;
    };
    let missing = db.url.replace("nv_test_", "nv_absent_");
    fails(&["vault", "list"], &missing, "does not exist");
}
