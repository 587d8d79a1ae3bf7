//! The contract fuzzed: schemathesis (PyPI, pinned in `.ci/requirements.txt`) generates
//! requests from the served `/openapi.json`; no answer may be a 5xx or break the contract.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_contract_violation() {
    let Some(bin) = common::tools::python_script(&["schemathesis"], "schemathesis") else {
        return;
    };
    let s = TestServer::start(Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
    })
    .await;
    let run = |base: String| {
        let bin = bin.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(bin)
                .args(["run", &format!("{base}/openapi.json"), "-u", &base])
                .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
                .args(["--max-examples", "15", "--seed", "20261122", "--no-color"])
                // Hypothesis health checks judge the generator, not the API.
                .args(["--suppress-health-check", "all"])
                .env("SCHEMATHESIS_HOOKS", "")
                .output()
                .expect("schemathesis runs")
        })
    };
    let mut out = run(s.base.clone()).await.unwrap();
    // Hypothesis itself sometimes crashes while optimising (a `Runtime Error` with its own
    // traceback and no failure of the API): such a run proves nothing either way, so it
    // runs once more. A failure of the API is never retried.
    let crashed = |o: &std::process::Output| {
        let text = String::from_utf8_lossy(&o.stdout);
        !o.status.success() && text.contains("Runtime Error") && !text.contains("FAILURES")
    };
    if crashed(&out) {
        eprintln!("schemathesis crashed inside Hypothesis; running it once more");
        out = run(s.base.clone()).await.unwrap();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("passed"), "{stdout}");
}
