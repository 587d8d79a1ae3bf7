use super::*;

#[test]
fn the_model_reads_the_words_without_the_syntax() {
    assert_eq!(
        meaning_text("how do I +embed \"a pdf\" -video NOT audio title:note prefix* a OR b"),
        "how do I embed a pdf note prefix a b"
    );
    assert_eq!(meaning_text("-only"), "");
    assert_eq!(meaning_text("http://x.org"), "http://x.org");
}

#[test]
fn a_mode_is_lexical_or_hybrid() {
    assert_eq!(Mode::parse(None).unwrap(), Mode::Lexical);
    assert_eq!(Mode::parse(Some("hybrid")).unwrap(), Mode::Hybrid);
    let e = Mode::parse(Some("dense")).unwrap_err();
    assert!(format!("{e:?}").contains("NOTEVAULT_EMBED_MODEL"), "{e:?}");
}
