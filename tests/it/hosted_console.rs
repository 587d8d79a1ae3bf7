//! The web console of a hosted vault: `notevault login-link --database URL VAULT` prints
//! a link on the instances' public URL; the link alone names the vault (no token, no
//! path), its session works on every instance, and a write queued by an agent is approved
//! from the console of another instance than the one that queued it.

use std::process::Command;

use reqwest::Method;
use serde_json::json;

use crate::common::hosted::{Hosted, Instance};
use crate::common::BIN;

/// `notevault login-link --database URL team`, with `public` as NOTEVAULT_PUBLIC_URL:
/// whether it succeeded and its output.
fn login_link(hosted: &Hosted, public: Option<&str>) -> (bool, String) {
    let mut command = Command::new(BIN);
    command
        .args(["login-link", "team", "--database", &hosted.db.url])
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("NOTEVAULT_PUBLIC_URL");
    if let Some(public) = public {
        command.env("NOTEVAULT_PUBLIC_URL", public);
    }
    let out = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text.trim().to_string())
}

fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn page(on: &Instance, path: &str, cookie: &str) -> reqwest::Response {
    plain_client()
        .get(on.url(path))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_link_names_its_vault_and_its_session_reviews_on_any_instance() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let (a, b) = (hosted.instance(), hosted.instance());
    a.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy",
        None,
        Some(json!({"write_policy": "review"})),
        200,
    )
    .await;
    let queued = a
        .call(
            Method::POST,
            "/v1/notes",
            Some("k-console"),
            Some(json!({"slug": "from-console", "content": "# From console\n", "agent_id": "bot"})),
            202,
        )
        .await;
    let id = queued["pending_id"].as_str().unwrap().to_string();

    // No public URL, no link: the instances' address is the operator's to give.
    let (ok, said) = login_link(&hosted, None);
    assert!(!ok && said.contains("NOTEVAULT_PUBLIC_URL"), "{said}");

    // The link, opened on B: a session of the vault, without any token.
    let (ok, link) = login_link(&hosted, Some(&b.daemon.base));
    assert!(ok, "{link}");
    assert!(
        link.starts_with(&format!("{}/sign-in?code=", b.daemon.base)),
        "{link}"
    );
    let res = plain_client().get(&link).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let cookie = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    // A link signs in once, also on another instance.
    let again = link.replace(&b.daemon.base, &a.daemon.base);
    let res = plain_client().get(&again).send().await.unwrap();
    assert!(res.headers().get("set-cookie").is_none());

    // The session is the vault's on A too: its review page lists the queued write.
    let res = plain_client().get(a.url("/")).send().await.unwrap();
    assert_eq!(res.status(), 401, "no session, the sign-in page");
    let res = page(&a, "/", &cookie).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains(&id), "the queued write on the page");
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a form with the CSRF token")
        .to_string();
    let res = plain_client()
        .post(a.url(&format!("/writes/{id}/approve")))
        .header("cookie", &cookie)
        .header("hx-request", "true")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Approved"));
    assert_eq!(
        b.get(&format!("/v1/writes/{id}"), 200).await["status"],
        "applied"
    );
    b.get("/v1/notes/from-console", 200).await;
}
