use super::*;
use std::collections::HashMap;

#[test]
fn precedence_is_defaults_file_env_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notevault.toml");
    std::fs::write(
        &file,
        "rate_limit_read_per_minute = 10\nrate_limit_write_per_minute = 11\ndocs_url = \"http://file\"\n",
    )
    .unwrap();
    let env: HashMap<&str, &str> = [
        ("RATE_LIMIT_WRITE_PER_MINUTE", "22"),
        ("NOTEVAULT_DOCS_URL", "http://env"),
        ("AUTH_REQUIRED", "true"),
        ("NOTEVAULT_HEADER_READ_TIMEOUT", "5"),
        ("NOTEVAULT_IDLE_TIMEOUT", "0"),
        ("NOTEVAULT_MAX_CONNECTIONS", "16"),
    ]
    .into();
    let flags = Layer {
        docs_url: Some("http://flag".into()),
        ..Layer::default()
    };
    let config = Config::load(Some(&file), |k| env.get(k).map(|v| v.to_string()), flags).unwrap();
    assert_eq!(config.rate_limit_read_per_minute, 10);
    assert_eq!(config.rate_limit_write_per_minute, 22);
    assert_eq!(config.docs_url, "http://flag");
    assert!(config.auth_required);
    assert_eq!(config.listen, Config::default().listen);
    assert_eq!(config.header_read_timeout, Duration::from_secs(5));
    // 0 would close every connection at once: the least is a second.
    assert_eq!(config.idle_timeout, Duration::from_secs(1));
    assert_eq!(
        config.body_read_timeout,
        Config::default().body_read_timeout
    );
    assert_eq!(config.max_connections, 16);
}

#[test]
fn the_embedding_model_comes_from_the_file_or_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notevault.toml");
    std::fs::write(&file, "embed_model = \"/models/potion\"\n").unwrap();
    let none = |_: &str| None;
    assert_eq!(
        Config::load(None, none, Layer::default())
            .unwrap()
            .embed_model,
        None
    );
    let from_file = Config::load(Some(&file), none, Layer::default()).unwrap();
    assert_eq!(from_file.embed_model, Some(PathBuf::from("/models/potion")));
    let env = |k: &str| (k == "NOTEVAULT_EMBED_MODEL").then(|| "/elsewhere".to_string());
    let from_env = Config::load(Some(&file), env, Layer::default()).unwrap();
    assert_eq!(from_env.embed_model, Some(PathBuf::from("/elsewhere")));
    // Set but empty: off.
    let empty = |k: &str| (k == "NOTEVAULT_EMBED_MODEL").then(String::new);
    assert_eq!(
        Config::load(None, empty, Layer::default())
            .unwrap()
            .embed_model,
        None
    );
}

#[test]
fn static_tokens_come_from_toml_or_the_environment_as_json() {
    use crate::auth::{Permission, TokenKind};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notevault.toml");
    std::fs::write(
        &file,
        r#"
[[static_tokens]]
token = "file-writer"
permissions = ["notes.write", "notes.review"]

[[static_tokens]]
token = "file-pat"
permissions = []
kind = "pat"
vault_id = "v1"
"#,
    )
    .unwrap();
    let config = Config::load(Some(&file), |_| None, Layer::default()).unwrap();
    assert!(config.auth_configured());
    assert_eq!(config.static_tokens.len(), 2);
    let writer = &config.static_tokens[0];
    assert_eq!(writer.token, "file-writer");
    assert_eq!(
        writer.permissions,
        [Permission::NotesWrite, Permission::NotesReview]
    );
    assert_eq!(writer.kind, TokenKind::Session);
    assert_eq!(writer.vault_id, None);
    let pat = &config.static_tokens[1];
    assert_eq!(
        (pat.kind, pat.vault_id.as_deref()),
        (TokenKind::Pat, Some("v1"))
    );
    // Debug never shows a token.
    assert!(!format!("{config:?}").contains("file-writer"));

    // The environment replaces the file's list.
    let json = r#"[{"token": "env-token", "permissions": ["notes.write"]}]"#;
    let env = |k: &str| (k == "NOTEVAULT_STATIC_TOKENS").then(|| json.to_string());
    let config = Config::load(Some(&file), env, Layer::default()).unwrap();
    assert_eq!(config.static_tokens.len(), 1);
    assert_eq!(config.static_tokens[0].token, "env-token");
    assert_eq!(
        config.static_tokens[0].permissions,
        [Permission::NotesWrite]
    );

    // Bad lists are one-line errors that never hold the token.
    for bad in [
        r#"{"token": "x"}"#,
        r#"[{"token": "secret-one", "permissions": ["notes.admin"]}]"#,
        r#"[{"token": "secret-one", "scopes": []}]"#,
        r#"[{"token": "secret one", "permissions": []}]"#,
        r#"[{"token": "", "permissions": []}]"#,
        r#"[{"token": "secret-one"}, {"token": "secret-one"}]"#,
    ] {
        let env = |k: &str| (k == "NOTEVAULT_STATIC_TOKENS").then(|| bad.to_string());
        let err = Config::load(None, env, Layer::default()).unwrap_err();
        assert!(!err.contains('\n'), "{bad}: {err}");
        assert!(!err.contains("secret"), "{bad}: {err}");
    }
    assert!(!Config::default().auth_configured());
}

#[test]
fn tls_is_both_files_or_neither() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "tls_cert = \"/etc/nv/cert.pem\"\n").unwrap();
    let err = Config::load(Some(&file), |_| None, Layer::default()).unwrap_err();
    assert!(
        err.contains("tls_cert (/etc/nv/cert.pem) is set without tls_key"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
    // The environment gives the key: both, TLS on.
    let env = |k: &str| (k == "NOTEVAULT_TLS_KEY").then(|| "/etc/nv/key.pem".to_string());
    let config = Config::load(Some(&file), env, Layer::default()).unwrap();
    assert!(config.tls_configured());
    assert_eq!(
        config.tls_key.as_deref(),
        Some(Path::new("/etc/nv/key.pem"))
    );
    // A flag wins over the file.
    let flags = Layer {
        tls_cert: Some("/flag/cert.pem".into()),
        tls_key: Some("/flag/key.pem".into()),
        ..Layer::default()
    };
    let config = Config::load(Some(&file), |_| None, flags).unwrap();
    assert_eq!(
        config.tls_cert.as_deref(),
        Some(Path::new("/flag/cert.pem"))
    );
    let key_only = Layer {
        tls_key: Some("/k.pem".into()),
        ..Layer::default()
    };
    let err = Config::load(None, |_| None, key_only).unwrap_err();
    assert!(
        err.contains("tls_key (/k.pem) is set without tls_cert"),
        "{err}"
    );
    assert!(!Config::default().tls_configured());
}

#[test]
fn bad_values_are_one_line_errors() {
    let err = Config::load(
        None,
        |k| (k == "AUTH_REQUIRED").then(|| "maybe".into()),
        Layer::default(),
    )
    .unwrap_err();
    assert!(err.contains("AUTH_REQUIRED"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "no_such_key = 1\n").unwrap();
    assert!(Config::load(Some(&file), |_| None, Layer::default()).is_err());
}

#[test]
fn a_blob_store_takes_the_standard_aws_environment() {
    let env = |k: &str| match k {
        "NOTEVAULT_BLOB_STORE" => Some("s3://notes/prod".to_string()),
        "AWS_ACCESS_KEY_ID" => Some("key".to_string()),
        "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:9000".to_string()),
        _ => None,
    };
    let config = Config::load(None, env, Layer::default()).unwrap();
    assert_eq!(config.blob_store.as_deref(), Some("s3://notes/prod"));
    let keys: Vec<&str> = config
        .blob_settings
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(keys, ["AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL"]);
    // The flag wins, and no secret is printed.
    let flags = Layer {
        blob_store: Some("s3://other".into()),
        ..Layer::default()
    };
    let config = Config::load(None, env, flags).unwrap();
    assert_eq!(config.blob_store.as_deref(), Some("s3://other"));
    assert!(!format!("{config:?}").contains("\"key\""));
}
