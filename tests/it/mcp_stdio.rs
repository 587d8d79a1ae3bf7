//! `notevault mcp` over stdio, through the official MCP Python SDK's stdio client
//! (`tests/mcp/e2e_stdio.py`): from the vault itself when no daemon serves it, and through
//! the daemon when one does; in both protocol eras, with a personal token that writes.

use crate::common;

use common::daemon::BIN;

/// Run the SDK script in `mode` against `notevault mcp --state-dir STATE VAULT`: its
/// stdout and stderr, after checking it passed.
fn stdio_session(
    python: &std::path::Path,
    mode: &str,
    token: &str,
    vault: &std::path::Path,
    state: &std::path::Path,
) -> String {
    let out = std::process::Command::new(python)
        .arg(common::repo_path("tests/mcp/e2e_stdio.py"))
        .args([mode, token, BIN, "mcp", "--state-dir"])
        .arg(state)
        .arg(vault)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{mode}:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("mcp e2e stdio {mode}:")),
        "{stdout}"
    );
    format!("{stdout}{stderr}")
}

#[test]
fn stdio_serves_the_vault_itself_without_a_daemon() {
    let Some(python) = common::tools::python(&["mcp.client.stdio", "jsonschema"]) else {
        return;
    };
    let (_dir, vault, state) = common::temp_vault(Some("vault-example"));
    let token = common::create_pat(&vault, &state, "agent", &["notes.write"]);
    for mode in ["legacy", "auto"] {
        let said = stdio_session(&python, mode, &token, &vault, &state);
        assert!(said.contains("from this process"), "{said}");
        assert_eq!(
            std::fs::read_to_string(vault.join(format!("stdio/{mode}.md"))).unwrap(),
            "# Over stdio\n"
        );
    }
}

#[test]
fn stdio_goes_through_the_daemon_serving_the_vault() {
    let Some(python) = common::tools::python(&["mcp.client.stdio", "jsonschema"]) else {
        return;
    };
    let (_dir, vault, state) = common::temp_vault(Some("vault-example"));
    let token = common::create_pat(&vault, &state, "agent", &["notes.write"]);
    let daemon = common::spawn(&vault, &state, &[]);
    for mode in ["legacy", "auto"] {
        let said = stdio_session(&python, mode, &token, &vault, &state);
        assert!(
            said.contains(&format!("through the daemon at {}", daemon.base)),
            "{said}"
        );
        assert_eq!(
            std::fs::read_to_string(vault.join(format!("stdio/{mode}.md"))).unwrap(),
            "# Over stdio\n"
        );
    }
}

/// Resources and prompts over stdio (`tests/mcp/e2e_resources.py`): every page of
/// `note://` resources, a read as markdown, the template, a subscription that hears
/// `notifications/resources/updated` after `append_note`, and each prompt.
#[test]
fn stdio_lists_reads_and_subscribes_to_notes_and_gets_prompts() {
    let Some(python) = common::tools::python(&["mcp.client.stdio", "anyio"]) else {
        return;
    };
    let (_dir, vault, state) = common::temp_vault(Some("vault-example"));
    let token = common::create_pat(&vault, &state, "agent", &["notes.write"]);
    let out = std::process::Command::new(python)
        .arg(common::repo_path("tests/mcp/e2e_resources.py"))
        .args([token.as_str(), BIN, "mcp", "--state-dir"])
        .arg(&state)
        .arg(&vault)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("mcp e2e resources:"), "{stdout}");
    assert!(std::fs::read_to_string(vault.join("Inbox.md"))
        .unwrap()
        .ends_with("- heard\n"));
}
