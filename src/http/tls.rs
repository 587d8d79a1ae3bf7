//! HTTPS: the rustls server configuration from the configured PEM files
//! (`tls_cert`, `tls_key`), checked when serving starts. Each error is one line that
//! names the file and what to do; nothing here panics on a user's file.
//!
//! rustls with the `ring` provider, given explicitly (no process-wide default to
//! install, and no second provider can make it ambiguous); TLS 1.2 and 1.3; ALPN
//! `http/1.1`, the one protocol the server speaks. The handshake itself runs in the
//! accept loop (`server`), per connection.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::config::Config;

/// `Strict-Transport-Security` of every answer served over TLS (one year; no
/// `includeSubDomains`: the daemon speaks for its own host only).
pub const HSTS: &str = "max-age=31536000";

/// The acceptor of `config`, `None` when TLS is off.
pub fn acceptor(config: &Config) -> Result<Option<TlsAcceptor>, String> {
    match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(TlsAcceptor::from(Arc::new(server_config(cert, key)?)))),
        _ => Ok(None),
    }
}

/// The server configuration of a PEM certificate chain and its private key.
pub fn server_config(cert_path: &Path, key_path: &Path) -> Result<ServerConfig, String> {
    let certs = certificates(cert_path)?;
    let key = private_key(key_path)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_no_client_auth();
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        let (cert, key) = (cert_path.display(), key_path.display());
        match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => format!(
                "TLS key {key} does not belong to the certificate {cert}: give the key the certificate was made with"
            ),
            rustls::Error::InvalidCertificate(e) => format!(
                "TLS certificate {cert} is not a usable X.509 certificate ({e:?}): give the server's certificate in PEM"
            ),
            e => format!(
                "cannot serve TLS with the certificate {cert} and the key {key}: {e}: check that both are PEM and belong together"
            ),
        }
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!(
            "cannot read TLS {what} {}: {e}: give the path of a readable PEM file",
            path.display()
        )
    })
}

/// The certificates of a PEM file, the server's own first.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(path, "certificate")?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "TLS certificate {} is not valid PEM ({}): give the certificate chain as PEM (-----BEGIN CERTIFICATE-----)",
                path.display(),
                pem_problem(&e)
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "TLS certificate {} holds no PEM certificate: give the certificate chain as PEM (-----BEGIN CERTIFICATE-----), the server's certificate first",
            path.display()
        ));
    }
    Ok(certs)
}

/// The first private key of a PEM file: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = read(path, "key")?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => format!(
            "TLS key {} holds no unencrypted PEM private key: give the certificate's key as PEM (-----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY), without a passphrase",
            path.display()
        ),
        e => format!(
            "TLS key {} is not valid PEM ({}): give the certificate's key as PEM (-----BEGIN PRIVATE KEY-----)",
            path.display(),
            pem_problem(&e)
        ),
    })
}

/// A PEM error in words (rustls-pki-types' own message prints bytes as a list).
fn pem_problem(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { end_marker } => {
            let label = String::from_utf8_lossy(end_marker);
            format!("no -----END {}----- line", label.trim())
        }
        pem::Error::IllegalSectionStart { .. } => "a malformed BEGIN line".into(),
        pem::Error::Base64Decode(_) => "its base64 does not decode".into(),
        pem::Error::SectionTooLarge => "a section over 256 MB".into(),
        e => e.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write fixture files")]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/tls")
            .join(name)
    }

    /// The three key encodings a user may bring: PKCS#1 (RSA), SEC1 (EC), PKCS#8.
    #[test]
    fn rsa_ec_and_pkcs8_keys_load() {
        for (cert, key) in [
            ("rsa-cert.pem", "rsa-key.pem"),
            ("ec-cert.pem", "ec-key.pem"),
        ] {
            let config = server_config(&fixture(cert), &fixture(key)).unwrap();
            assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
        }
        let dir = tempfile::tempdir().unwrap();
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        assert!(std::fs::read_to_string(&key)
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----"));
        server_config(&cert, &key).unwrap();
    }

    /// Every unusable pair is a one-line error naming the file at fault and what to do.
    #[test]
    fn unusable_files_are_one_line_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").unwrap();
        let truncated = dir.path().join("truncated.pem");
        let rsa_cert = std::fs::read_to_string(fixture("rsa-cert.pem")).unwrap();
        std::fs::write(&truncated, &rsa_cert[..rsa_cert.len() / 2]).unwrap();
        let missing = dir.path().join("missing.pem");
        let (rsa_cert, rsa_key) = (fixture("rsa-cert.pem"), fixture("rsa-key.pem"));
        let ec_key = fixture("ec-key.pem");
        // (cert, key, the file the error names, words it holds)
        let cases = [
            (&missing, &rsa_key, &missing, "cannot read TLS certificate"),
            (&rsa_cert, &missing, &missing, "cannot read TLS key"),
            (&garbage, &rsa_key, &garbage, "holds no PEM certificate"),
            (&rsa_key, &rsa_key, &rsa_key, "holds no PEM certificate"),
            (
                &truncated,
                &rsa_key,
                &truncated,
                "is not valid PEM (no -----END",
            ),
            (
                &rsa_cert,
                &garbage,
                &garbage,
                "holds no unencrypted PEM private key",
            ),
            (
                &rsa_cert,
                &rsa_cert,
                &rsa_cert,
                "holds no unencrypted PEM private key",
            ),
            (
                &rsa_cert,
                &ec_key,
                &ec_key,
                "does not belong to the certificate",
            ),
        ];
        for (cert, key, named, words) in cases {
            let what = format!("{} + {}", cert.display(), key.display());
            let err = server_config(cert, key).unwrap_err();
            assert!(err.contains(&named.display().to_string()), "{what}: {err}");
            assert!(err.contains(words), "{what}: {err}");
            assert!(err.contains(": give "), "{what}: says what to do: {err}");
            assert!(!err.contains('\n'), "{what}: {err}");
        }
    }
}
