//! How the reading commands (`search`, `read`, `ls`, `status`) reach a vault: the daemon
//! serving it, found through the URL its state directory records (the one
//! `login-link` uses), asked over HTTP; else the folder read directly through the same
//! domain calls the surfaces make, on a throwaway state directory outside the vault, so
//! that nothing is written into the vault folder. Either way the answer is the `/v1`
//! JSON, and one renderer prints it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::ReachArgs;
use crate::state::State;
use crate::storage::metadata::Settings;

use super::offline_config;

/// Where no vault is named and `.` has no daemon: the address `status` always asked.
const DEFAULT_URL: &str = "http://127.0.0.1:4000";

/// A vault reached: over HTTP, or opened in this process.
pub struct Session {
    runtime: tokio::runtime::Runtime,
    pub reach: Reach,
}

pub enum Reach {
    /// A daemon answers; `base` is its URL.
    Daemon {
        base: String,
        client: reqwest::Client,
        token: Option<String>,
    },
    /// No daemon serves the vault: it is opened here.
    Direct(Direct),
}

/// The vault opened in this process on a state directory of its own (removed on drop).
pub struct Direct {
    daemon: Option<crate::daemon::Daemon>,
    temp: PathBuf,
}

impl Direct {
    pub fn state(&self) -> Arc<State> {
        self.daemon
            .as_ref()
            .map(|d| d.state.clone())
            .expect("open until dropped")
    }
}

impl Drop for Direct {
    #[allow(
        clippy::disallowed_methods,
        reason = "the throwaway state directory this command made, outside the vault"
    )]
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.stop();
        }
        let _ = std::fs::remove_dir_all(&self.temp);
    }
}

impl Session {
    /// Reach `vault` (default `.`): `--url` when given; else the daemon whose index lock
    /// holds the vault's state directory, at the URL it recorded; else, with
    /// `fallback_url` and no vault named, [`DEFAULT_URL`]; else the folder itself.
    pub fn open(
        vault: Option<PathBuf>,
        args: &ReachArgs,
        fallback_url: bool,
    ) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let remote = |base: String| -> anyhow::Result<Reach> {
            Ok(Reach::Daemon {
                base: base.trim_end_matches('/').to_string(),
                client: client(args)?,
                token: args.token.clone(),
            })
        };
        if let Some(url) = &args.url {
            let reach = remote(url.clone())?;
            return Ok(Self { runtime, reach });
        }
        let named = vault.is_some();
        let config = offline_config(vault.clone(), args.state_dir.clone(), args.config.clone())?;
        let state_dir = config.state_dir_of_vault()?;
        if let Some((url, vault_id)) = serving(&state_dir)? {
            let session = Self {
                runtime,
                reach: remote(url)?,
            };
            session.check_vault(vault_id.as_deref(), &config.vault)?;
            return Ok(session);
        }
        // `status` in a folder no daemon ever served asks where it always asked.
        if fallback_url && !named && !state_dir.join("meta.sqlite").is_file() {
            let reach = remote(DEFAULT_URL.to_string())?;
            return Ok(Self { runtime, reach });
        }
        let direct = open_direct(vault, args)?;
        Ok(Self {
            runtime,
            reach: Reach::Direct(direct),
        })
    }

    /// A daemon serving several vaults answers a request without a token from its
    /// default one: when that is another vault, say so rather than answer for it.
    fn check_vault(&self, vault_id: Option<&str>, folder: &std::path::Path) -> anyhow::Result<()> {
        let (Some(want), Reach::Daemon { base, .. }) = (vault_id, &self.reach) else {
            return Ok(());
        };
        let summary = self.get("/v1/vault")?;
        if summary["vault_id"].as_str().is_some_and(|got| got != want) {
            anyhow::bail!(
                "the daemon at {base} serves {} among other vaults and answers for another one: pass --token with a token of this vault (`notevault token create`)",
                folder.display()
            );
        }
        Ok(())
    }

    /// `GET path` of the daemon, or the same answer from `direct` on the opened vault;
    /// a refusal is one line naming its reason.
    pub fn ask<T, F, Fut>(&self, path: &str, direct: F) -> anyhow::Result<serde_json::Value>
    where
        T: serde::Serialize,
        F: FnOnce(Arc<State>) -> Fut,
        Fut: Future<Output = Result<T, crate::error::Error>>,
    {
        match &self.reach {
            Reach::Daemon { .. } => self.get(path),
            Reach::Direct(open) => {
                let answer = self
                    .runtime
                    .block_on(direct(open.state()))
                    .map_err(|e| anyhow::anyhow!("{}: {}", e.reason.as_str(), e.message))?;
                Ok(serde_json::to_value(answer)?)
            }
        }
    }

    /// `GET path` of the daemon (only a daemon is asked this).
    pub fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        let Reach::Daemon {
            base,
            client,
            token,
        } = &self.reach
        else {
            anyhow::bail!("no daemon to ask {path}");
        };
        let url = format!("{base}{path}");
        self.runtime
            .block_on(get_json(client, &url, token.as_deref()))
    }

    /// Wait until the search index holds every note recorded (a vault opened here
    /// indexes it at the start).
    pub fn wait_for_index(&self) -> anyhow::Result<()> {
        if let Reach::Direct(open) = &self.reach {
            let state = open.state();
            let done = state
                .index
                .wait_for_blocking(state.committed_seq(), std::time::Duration::from_secs(3600));
            if !done {
                anyhow::bail!("the search index of the folder was not built within an hour");
            }
        }
        Ok(())
    }
}

/// The URL and vault id of the daemon holding the vault now (its index lock), as it
/// recorded them in the state directory. The metadata store is opened only while a
/// daemon holds it (as `login-link` opens it): a stopped vault's state is left alone.
pub(super) fn serving(
    state_dir: &std::path::Path,
) -> anyhow::Result<Option<(String, Option<String>)>> {
    let store = state_dir.join("meta.sqlite");
    if !store.is_file() || !crate::index::verify::in_use(state_dir) {
        return Ok(None);
    }
    let meta = crate::meta::Meta::open(&store)
        .map_err(|e| anyhow::anyhow!("state dir {}: {}", state_dir.display(), e.message))?;
    let Some(url) = meta.setting(crate::console::URL_SETTING)? else {
        anyhow::bail!(
            "another notevault process holds the vault (a reindex, or a daemon still starting) and serves no URL yet: try again in a moment"
        );
    };
    let vault_id = meta.setting("vault_id")?;
    Ok(Some((url, vault_id)))
}

/// The HTTP client of `--cacert` (10 s per request).
fn client(args: &ReachArgs) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(10));
    if let Some(file) = &args.cacert {
        let pem = std::fs::read(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| anyhow::anyhow!("{} is not a PEM certificate: {e}", file.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    Ok(builder.build()?)
}

/// Open the vault in this process, without watching, on a state directory of its own
/// in the system's temp folder. A temp file left in the vault by an interrupted write
/// would be put right by the open, which writes the vault: refused, with what to run.
fn open_direct(vault: Option<PathBuf>, args: &ReachArgs) -> anyhow::Result<Direct> {
    let temp = std::env::temp_dir().join(format!("notevault-read-{}", uuid::Uuid::new_v4()));
    crate::state::create_state_dir(&temp)
        .map_err(|e| anyhow::anyhow!("cannot make {}: {e}", temp.display()))?;
    // Dropped on every error below, which removes the folder.
    let mut direct = Direct {
        daemon: None,
        temp: temp.clone(),
    };
    let config = offline_config(vault, Some(temp.clone()), args.config.clone())?;
    let root = config.vault.canonicalize().map_err(|e| {
        anyhow::anyhow!("vault folder {} is not usable: {e}", config.vault.display())
    })?;
    if !root.is_dir() {
        anyhow::bail!("vault {} is not a folder", root.display());
    }
    let paths = crate::vault::path::VaultPaths::new(root, temp);
    let want = crate::vault::walk::Want {
        notes: true,
        note_stats: false,
        attachments: false,
    };
    if let Some(leftover) = crate::vault::walk::walk(&paths, want).leftovers.first() {
        anyhow::bail!(
            "{} is left by an interrupted write: `notevault check --repair` or `notevault serve` puts it right; this command only reads",
            leftover.display()
        );
    }
    direct.daemon = Some(crate::daemon::open(config)?);
    Ok(direct)
}

/// One GET of a daemon; a failure is one line that says what to do.
async fn get_json(
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
    // The reason first, as a vault read directly says it (`reach`).
    anyhow::bail!(
        "{}: {} ({url} answered {code})",
        body["reason"].as_str().unwrap_or(""),
        body["message"].as_str().unwrap_or("")
    )
}
