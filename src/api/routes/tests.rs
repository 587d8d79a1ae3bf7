use super::*;

fn m(method: Method, path: &str) -> Result<Matched, Error> {
    recognize(&method, path, |k| k == "a" || k == "dir/raw")
}

#[test]
fn notes_with_raw_and_encoded_slashes() {
    let got = m(Method::GET, "/v1/notes/projects/roadmap").unwrap();
    assert_eq!(
        (got.op, got.param.as_deref()),
        (Op::GetNote, Some("projects/roadmap"))
    );
    let got = m(Method::GET, "/v1/notes/projects%2Froadmap").unwrap();
    assert_eq!(got.param.as_deref(), Some("projects/roadmap"));
    let got = m(Method::GET, "/v1/notes/a%20b%C3%A9").unwrap();
    assert_eq!(got.param.as_deref(), Some("a bé"));
}

#[test]
fn raw_action_versus_a_note_named_raw() {
    let got = m(Method::GET, "/v1/notes/a/raw").unwrap();
    assert_eq!((got.op, got.param.as_deref()), (Op::GetRaw, Some("a")));
    let got = m(Method::GET, "/v1/notes/dir/raw").unwrap();
    assert_eq!(
        (got.op, got.param.as_deref()),
        (Op::GetNote, Some("dir/raw"))
    );
}

/// The permission column, route by route, as the interface specification and the
/// design give it: `notes.write` for every note mutation; `notes.review` for reading a
/// pending write by id, approving, rejecting and changing write settings; any
/// credential for reads; nothing for the contract.
#[test]
fn each_route_needs_what_the_spec_says() {
    use crate::auth::Permission::{NotesReview, NotesWrite};
    let expected = |method: &Method, template: &str| -> Need {
        match (method.as_str(), template) {
            ("GET", "/openapi.json") => Need::Nothing,
            // Open by the interface's "Authentication" items 8 and 9.
            ("GET", t) if t.starts_with(METADATA_PATH) => Need::Nothing,
            ("POST", "/v1/auth/token") => Need::Nothing,
            // Session-only (interface, "Authentication" item 5).
            ("GET", "/v1/audit-events") | ("POST", "/v1/export") => Need::SignedIn(&[]),
            // The export's archive: its link, or the export's own caller.
            ("GET", "/v1/exports/{export}") => Need::Link,
            // Wipes the vault: an owner (a writer who is also a reviewer).
            ("POST", "/v1/vault/purge") => Need::SignedIn(crate::auth::OWNER),
            ("GET", "/v1/writes/{id}") => Need::Permission(NotesReview),
            ("PATCH", "/v1/vault/write-settings") => Need::Permission(NotesReview),
            ("POST", t) if t.starts_with("/v1/writes/") => Need::Permission(NotesReview),
            ("POST", "/v1/properties:aggregate") => Need::Read,
            // The key routes: a session with write permission (interface, PUT keys),
            // and review too: a key change can lock every device out.
            ("POST", "/v1/sync/e2ee:enable") | ("PUT", "/v1/sync/e2ee/keys") => {
                Need::Session(crate::auth::OWNER)
            }
            ("POST", "/v1/sync/checkpoint" | "/v1/sync/ops") => Need::Permission(NotesWrite),
            ("POST", "/v1/sync:compact") => Need::Permission(NotesReview),
            ("POST", "/v1/attachments:presign") => Need::Read,
            ("POST" | "PATCH" | "PUT" | "DELETE", t)
                if t.starts_with("/v1/notes")
                    || t.starts_with("/v1/folders")
                    || t.starts_with("/v1/attachments") =>
            {
                Need::Permission(NotesWrite)
            }
            ("GET", _) => Need::Read,
            other => panic!("no expectation for {other:?}: add one"),
        }
    };
    for route in table() {
        assert_eq!(
            route.access.need,
            expected(&route.method, route.template),
            "{} {}",
            route.method,
            route.template
        );
    }
}

/// The class column: the read limit for GET routes and the POST query, the write limit
/// for every other POST, PATCH and DELETE; the contract is not limited. A legacy form
/// has its successor's access.
#[test]
fn classes_and_legacy_forms() {
    let table = table();
    for route in table {
        let class = match (route.method.as_str(), route.template) {
            (_, "/openapi.json") => None,
            (_, t) if t.starts_with(METADATA_PATH) => None,
            ("GET", _) | ("POST", "/v1/properties:aggregate") => Some(Class::Read),
            _ => Some(Class::Write),
        };
        assert_eq!(
            route.access.class, class,
            "{} {}",
            route.method, route.template
        );
        if let Some(successor) = route.successor {
            let canonical = table
                .iter()
                .find(|r| r.template == successor && r.method == route.method)
                .unwrap();
            assert_eq!(route.access, canonical.access, "{}", route.template);
            assert_eq!(route.op, canonical.op, "{}", route.template);
        }
    }
}

/// `class` finds a request's class before it is routed, without knowing which notes
/// exist: so every row that could serve the same request has the same class.
#[test]
fn a_request_has_one_class_whichever_row_serves_it() {
    let table = table();
    for a in table {
        for b in table {
            let prefix = |t: &'static str| t.split_once('{').map(|(p, _)| p);
            if a.method == b.method
                && prefix(a.template).is_some()
                && prefix(a.template) == prefix(b.template)
            {
                assert_eq!(
                    a.access.class, b.access.class,
                    "{} / {}",
                    a.template, b.template
                );
            }
        }
    }
    let cases = [
        (Method::GET, "/v1/notes/a/raw", Some(Class::Read)),
        (Method::HEAD, "/v1/notes", Some(Class::Read)),
        (Method::POST, "/v1/properties:aggregate", Some(Class::Read)),
        (Method::POST, "/v1/notes/a%2Fb:edit", Some(Class::Write)),
        (
            Method::PATCH,
            "/v1/vault/write-settings",
            Some(Class::Write),
        ),
        (Method::GET, "/openapi.json", None),
        (Method::GET, "/mcp", Some(Class::Read)),
        (Method::POST, "/mcp", Some(Class::Read)),
        (Method::DELETE, "/mcp", Some(Class::Read)),
        // Served by no row: by area and method, as the spec's limits say.
        (Method::GET, "/mcp/x", Some(Class::Read)),
        (Method::GET, "/v1/nope", Some(Class::Read)),
        (Method::DELETE, "/v1/search", Some(Class::Write)),
        (Method::PUT, "/v1/sync/e2ee/keys", Some(Class::Write)),
        (Method::OPTIONS, "/v1/notes", None),
        // The console's pages and anything else: by method too.
        (Method::GET, "/elsewhere", Some(Class::Read)),
        (Method::GET, "/sign-in/idp", Some(Class::Read)),
        (Method::POST, "/writes/x/approve", Some(Class::Write)),
    ];
    for (method, path, expected) in cases {
        assert_eq!(class(&method, path), expected, "{method} {path}");
    }
}

/// Every route an error hint names is served, or is one the interface specification
/// names for a later issue (attachments, sync).
#[test]
fn every_route_a_hint_names_is_served_or_in_the_spec() {
    const LATER: &[&str] = &["GET /v1/attachments"];
    let served: Vec<String> = table()
        .iter()
        .map(|r| format!("{} {}", r.method, r.template))
        .collect();
    for reason in Reason::ALL {
        let hint = reason.hint();
        assert_eq!(
            hint.matches('`').count() % 2,
            0,
            "{reason}: unbalanced backticks"
        );
        for route in crate::error::hint_routes(hint) {
            let route = route.split_once('?').map_or(route, |(r, _)| r);
            assert!(
                served.iter().any(|s| s == route) || LATER.contains(&route),
                "{reason} names {route}, which is not served"
            );
        }
    }
}

#[test]
fn unknown_routes_and_methods() {
    assert_eq!(
        m(Method::GET, "/v2/x").unwrap_err().reason,
        Reason::ROUTE_NOT_FOUND
    );
    assert_eq!(
        m(Method::DELETE, "/openapi.json").unwrap_err().reason,
        Reason::ROUTE_NOT_FOUND
    );
    assert_eq!(
        m(Method::GET, "/v1/notes/").unwrap_err().reason,
        Reason::ROUTE_NOT_FOUND
    );
    assert_eq!(
        m(Method::GET, "/v1/notes/a:frobnicate").unwrap_err().reason,
        Reason::ROUTE_NOT_FOUND
    );
    assert_eq!(
        m(Method::GET, "/v1/notes/%FF").unwrap_err().reason,
        Reason::VALIDATION_FAILED
    );
}
