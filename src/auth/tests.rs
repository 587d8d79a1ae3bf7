//! Unit tests of the parent module.

use super::*;

#[test]
fn mcp_write_tools_need_a_writing_token_and_a_writable_vault() {
    let offered =
        |c: &Credential, possible| matches!(mcp_write_tools(c, possible), WriteTools::Offered);
    let refused = |c: &Credential| match mcp_write_tools(c, true) {
        WriteTools::Refused(err) => Some(err.reason),
        _ => None,
    };
    assert!(!offered(&Credential::Open, true));
    assert!(matches!(
        mcp_write_tools(&Credential::Open, true),
        WriteTools::Unlisted
    ));
    let writer = Credential::Token {
        permissions: vec![Permission::NotesWrite],
    };
    assert!(offered(&writer, true));
    assert!(matches!(
        mcp_write_tools(&writer, false),
        WriteTools::Unlisted
    ));
    let reviewer = Credential::Pat {
        permissions: vec![Permission::NotesReview],
    };
    assert_eq!(refused(&reviewer), Some(Reason::PERMISSION_MISSING));
    let reader = Credential::Token {
        permissions: Vec::new(),
    };
    assert_eq!(refused(&reader), Some(Reason::PERMISSION_MISSING));
}

#[test]
fn tokens_need_the_permission_and_open_mode_has_all() {
    assert!(require(&Credential::Open, Permission::NotesReview).is_ok());
    let writer = Credential::Token {
        permissions: vec![Permission::NotesWrite],
    };
    assert!(require(&writer, Permission::NotesWrite).is_ok());
    let err = require(&writer, Permission::NotesReview).unwrap_err();
    assert_eq!(err.reason, Reason::PERMISSION_MISSING);
    assert_eq!(err.metadata["scope"], "notes.review");
}

/// Every credential against every need: the reason of the refusal, or `None` when it
/// passes.
#[test]
fn require_is_a_table_of_credentials_and_needs() {
    use Permission::{NotesReview as Review, NotesWrite as Write};
    let session = |p: &[Permission]| Credential::Token {
        permissions: p.to_vec(),
    };
    let pat = |p: &[Permission]| Credential::Pat {
        permissions: p.to_vec(),
    };
    let cases: Vec<(Credential, Need, Option<Reason>)> = vec![
        (Credential::Open, Need::Session(&[Write]), None),
        (Credential::Open, Need::Read, None),
        (Credential::Anonymous, Need::Nothing, None),
        (
            Credential::Anonymous,
            Need::Read,
            Some(Reason::AUTH_MISSING),
        ),
        (
            Credential::Anonymous,
            Need::Permission(Write),
            Some(Reason::AUTH_MISSING),
        ),
        (session(&[]), Need::Read, None),
        (session(&[]), Need::Nothing, None),
        (
            session(&[]),
            Need::Permission(Write),
            Some(Reason::PERMISSION_MISSING),
        ),
        (session(&[Write]), Need::Permission(Write), None),
        (
            session(&[Write]),
            Need::Permission(Review),
            Some(Reason::PERMISSION_MISSING),
        ),
        (session(&[Review]), Need::Permission(Review), None),
        (session(&[]), Need::Session(&[]), None),
        (session(&[Write]), Need::Session(&[Write]), None),
        (
            session(&[]),
            Need::Session(&[Write]),
            Some(Reason::PERMISSION_MISSING),
        ),
        (pat(&[]), Need::Read, None),
        (pat(&[Write]), Need::Permission(Write), None),
        (
            pat(&[Review]),
            Need::Permission(Write),
            Some(Reason::PERMISSION_MISSING),
        ),
        (
            pat(&[Write, Review]),
            Need::Session(&[]),
            Some(Reason::CREDENTIAL_FORBIDDEN),
        ),
        (
            pat(&[Write]),
            Need::Session(&[Write]),
            Some(Reason::CREDENTIAL_FORBIDDEN),
        ),
    ];
    // Keys and purge (`OWNER`): a writer alone, or a session with nothing, is refused.
    let owner_cases = [
        (session(&[Write, Review]), Need::SignedIn(OWNER), None),
        (
            session(&[]),
            Need::SignedIn(OWNER),
            Some(Reason::PERMISSION_MISSING),
        ),
        (
            session(&[Write]),
            Need::Session(OWNER),
            Some(Reason::PERMISSION_MISSING),
        ),
        (session(&[Write, Review]), Need::Session(OWNER), None),
        (Credential::Open, Need::Session(OWNER), None),
        (
            Credential::Open,
            Need::SignedIn(OWNER),
            Some(Reason::AUTH_MISSING),
        ),
    ];
    for (credential, need, refused) in cases.into_iter().chain(owner_cases) {
        let got = require(&credential, need).err().map(|e| e.reason);
        assert_eq!(got, refused, "{credential:?} on {need:?}");
    }
}

#[test]
fn a_refused_credential_answers_its_reason_wherever_anything_is_needed() {
    let refused = Credential::Refused {
        reason: Reason::VAULT_FORBIDDEN,
        message: "another vault".into(),
        retry_after: None,
        metadata: Default::default(),
    };
    assert!(require(&refused, Need::Nothing).is_ok());
    for need in [
        Need::Read,
        Need::Permission(Permission::NotesWrite),
        Need::Session(&[]),
    ] {
        let err = require(&refused, need).unwrap_err();
        assert_eq!(err.reason, Reason::VAULT_FORBIDDEN, "{need:?}");
        assert_eq!(
            challenge(&err).unwrap(),
            r#"Bearer realm="notevault", error="insufficient_scope""#
        );
    }
    assert!(matches!(
        mcp_write_tools(&refused, true),
        WriteTools::Unlisted
    ));
}

/// `Authorization` header values and what they present.
#[test]
fn authorization_headers_are_read_as_rfc_6750_says() {
    let long = format!("Bearer {}", "a".repeat(100_000));
    let just_over = format!("Bearer {}", "a".repeat(MAX_TOKEN_LEN + 1));
    let cases: Vec<(Vec<&[u8]>, Presented)> = vec![
        (vec![], Presented::Nothing),
        (
            vec![&b"Bearer abc.DEF-_~+/="[..]],
            Presented::Bearer("abc.DEF-_~+/="),
        ),
        (vec![&b"bearer   abc "[..]], Presented::Bearer("abc")),
        (vec![&b"BEARER abc"[..]], Presented::Bearer("abc")),
        (vec![&b"Basic dXNlcjpwYXNz"[..]], Presented::OtherScheme),
        (vec![&b"Token abc"[..]], Presented::OtherScheme),
        (
            vec![&b"Bearer"[..]],
            Presented::Malformed("the Authorization header has no token after `Bearer`"),
        ),
        (
            vec![&b"Bearer    "[..]],
            Presented::Malformed("the Authorization header has no token after `Bearer`"),
        ),
        (
            vec![&b""[..]],
            Presented::Malformed("the Authorization header is not `Bearer <token>`"),
        ),
        (
            vec![&b"Bearer a b"[..]],
            Presented::Malformed("the Authorization header holds more than one token"),
        ),
        (
            vec![&b"Bearer a\x01b"[..]],
            Presented::Malformed("the token holds a character other than visible ASCII"),
        ),
        (
            vec![&b"Bearer \xff\xfe"[..]],
            Presented::Malformed("the Authorization header is not ASCII"),
        ),
        (
            vec![&b"Bearer caf\xc3\xa9"[..]],
            Presented::Malformed("the token holds a character other than visible ASCII"),
        ),
        (
            vec![&b"Bearer a"[..], &b"Bearer b"[..]],
            Presented::Malformed("the request has more than one Authorization header"),
        ),
        (
            vec![long.as_bytes()],
            Presented::Malformed("the Authorization header is longer than 4 KiB"),
        ),
        (
            vec![just_over.as_bytes()],
            Presented::Malformed("the token is longer than 4096 bytes"),
        ),
    ];
    for (values, expected) in cases {
        assert_eq!(presented(&values), expected, "{values:?}");
    }
}

#[test]
fn static_tokens_are_found_by_the_whole_token_only() {
    let entry = |token: &str, permissions: &[Permission]| StaticToken {
        token: token.into(),
        permissions: permissions.to_vec(),
        kind: TokenKind::Session,
        vault_id: None,
    };
    let tokens = StaticTokens::new(&[
        entry("first-token", &[]),
        entry("second-token", &[Permission::NotesWrite]),
    ]);
    assert!(!tokens.is_empty());
    let (i, found) = tokens.find("second-token").unwrap();
    assert_eq!(i, 1);
    assert_eq!(
        found.credential(),
        Credential::Token {
            permissions: vec![Permission::NotesWrite]
        }
    );
    for other in ["second-toke", "second-tokenx", "SECOND-TOKEN", ""] {
        assert!(tokens.find(other).is_none(), "{other}");
    }
    let pat = StaticToken {
        kind: TokenKind::Pat,
        ..entry("p", &[])
    };
    assert_eq!(
        pat.credential(),
        Credential::Pat {
            permissions: vec![]
        }
    );
    assert!(!format!("{:?}", entry("first-token", &[])).contains("first"));
    assert_eq!(public_prefix("nvp_abcdefgh1234"), "nvp_abcdefgh");
    assert_eq!(public_prefix("a-static-secret"), "");
    assert_eq!(public_prefix("nvp_abc"), "");
}

#[test]
fn challenges_follow_rfc_6750_and_the_spec() {
    let pat = Credential::Pat {
        permissions: vec![Permission::NotesWrite],
    };
    let missing = require(&pat, Permission::NotesReview).unwrap_err();
    assert_eq!(
        challenge(&missing).unwrap(),
        r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.review""#
    );
    let forbidden = require(&pat, Need::Session(&[])).unwrap_err();
    assert_eq!(
        challenge(&forbidden).unwrap(),
        r#"Bearer realm="notevault", error="insufficient_scope""#
    );
    let anonymous = require(&Credential::Anonymous, Need::Read).unwrap_err();
    assert_eq!(
        challenge(&anonymous).unwrap(),
        r#"Bearer realm="notevault""#
    );
    let invalid = Error::new(Reason::AUTH_INVALID, "expired");
    assert_eq!(
        challenge(&invalid).unwrap(),
        r#"Bearer realm="notevault", error="invalid_token""#
    );
    for other in [Reason::ORIGIN_FORBIDDEN, Reason::NOTE_NOT_FOUND] {
        assert_eq!(challenge(&Error::new(other, "x")), None, "{other}");
    }
}

#[test]
fn a_signed_in_need_refuses_the_open_credential_and_a_pat() {
    let reason = |c: &Credential| require(c, Need::SignedIn(&[])).err().map(|e| e.reason);
    assert_eq!(reason(&Credential::Open), Some(Reason::AUTH_MISSING));
    assert_eq!(reason(&Credential::Anonymous), Some(Reason::AUTH_MISSING));
    assert_eq!(
        reason(&Credential::Pat {
            permissions: vec![Permission::NotesWrite, Permission::NotesReview]
        }),
        Some(Reason::CREDENTIAL_FORBIDDEN)
    );
    assert_eq!(
        reason(&Credential::Token {
            permissions: vec![]
        }),
        None
    );
    // The key route's need keeps open local mode open.
    assert_eq!(
        require(&Credential::Open, Need::Session(&[Permission::NotesWrite])).ok(),
        Some(())
    );
}
