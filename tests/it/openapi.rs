//! The contract: generated from the code, served as is, valid OpenAPI 3.1, and listing
//! exactly the routes the router serves.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use std::collections::BTreeSet;

use common::TestServer;
use notevault::api::{openapi, routes};

fn documented() -> BTreeSet<(String, String)> {
    let doc: serde_json::Value = serde_json::from_str(&openapi::document_json()).unwrap();
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

#[test]
fn every_served_route_is_documented_and_every_documented_route_is_served() {
    let served: BTreeSet<(String, String)> = routes::routes()
        .into_iter()
        .map(|r| (r.method.to_string(), r.template.to_string()))
        .collect();
    let documented = documented();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "served but not in /openapi.json: {undocumented:?}"
    );
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        unserved.is_empty(),
        "documented but not served: {unserved:?}"
    );
}

#[test]
fn the_document_names_the_contract_version_and_both_servers() {
    let doc: serde_json::Value = serde_json::from_str(&openapi::document_json()).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(doc["info"]["version"], "0.1.0");
    let servers: Vec<&str> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["{base_url}", "http://127.0.0.1:4000"]);
    assert!(doc["components"]["schemas"]["ErrorEnvelope"].is_object());
}

#[tokio::test]
async fn the_served_document_is_the_generated_one() {
    let s = TestServer::start(None, |_| {}).await;
    let served = s.get_json("/openapi.json", 200).await;
    let generated: serde_json::Value = serde_json::from_str(&openapi::document_json()).unwrap();
    assert_eq!(served, generated);
}

/// Validated by `openapi-spec-validator` (PyPI, pinned in `.ci/requirements.txt`).
#[test]
fn the_document_passes_a_real_openapi_validator() {
    let Some(python) = common::tools::python(&["openapi_spec_validator"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, openapi::document_json()).unwrap();
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sys, json; from openapi_spec_validator import validate; \
             from openapi_spec_validator.validation.validators import OpenAPIV31SpecValidator; \
             validate(json.load(open(sys.argv[1])), cls=OpenAPIV31SpecValidator); print('valid')",
        ])
        .arg(&file)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "openapi-spec-validator: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
