//! Surgical frontmatter edits: setting, adding or removing one top-level key changes only
//! that key's lines. Comments, key order, quoting, indentation, line endings (LF or CRLF),
//! a BOM and the body stay byte for byte; the YAML is never re-serialised.
//!
//! A key's lines are its `key:` line at column 0 and the continuation lines after it
//! (indented lines, block-sequence items at column 0); blank and comment lines belong to
//! the key only when more of its value follows them. Every edit is checked by parsing the
//! edited block: it must parse, the key must read back as written, and nothing else moves.

use std::ops::Range;

use serde_norway::{Mapping, Value};

use crate::vault::markdown::frontmatter_span;

/// A value to write for a key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum FmValue {
    /// A string, quoted only when YAML would read it as something else.
    Scalar(String),
    /// A number or boolean, written as is.
    Plain(String),
    /// A list of strings (tags), in the style the key already uses, else flow `[a, b]`.
    List(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FmError {
    /// The frontmatter cannot be edited safely (broken YAML, no closing fence, ...).
    Unparseable(String),
    InvalidKey(String),
}

impl std::fmt::Display for FmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FmError::Unparseable(why) => {
                write!(f, "the frontmatter cannot be edited safely: {why}")
            }
            FmError::InvalidKey(why) => write!(f, "invalid frontmatter key: {why}"),
        }
    }
}

/// The byte range of the body (everything after the frontmatter block).
pub fn body_range(text: &str) -> Range<usize> {
    match frontmatter_span(text) {
        Some((_, body)) => body..text.len(),
        None => 0..text.len(),
    }
}

/// Replace the body, keeping the frontmatter block byte for byte.
pub fn replace_body(text: &str, new_body: &str) -> String {
    let start = body_range(text).start;
    let mut out = String::with_capacity(start + new_body.len());
    out.push_str(&text[..start]);
    out.push_str(new_body);
    out
}

fn eol_of(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if i > 0 && text.as_bytes()[i - 1] == b'\r' => "\r\n",
        _ => "\n",
    }
}

fn check_key(key: &str) -> Result<(), FmError> {
    if key.is_empty()
        || key.chars().count() > 200
        || key.contains(['\n', '\r'])
        || key.trim() != key
        || key.starts_with('#')
    {
        return Err(FmError::InvalidKey(format!(
            "{key:?}: use 1 to 200 characters, no newline, no surrounding spaces"
        )));
    }
    Ok(())
}

/// A top-level entry of the block: its key and the byte range of its lines.
struct Entry {
    key: String,
    /// Byte offset (in the text) of the `key:` line and the end of its last line.
    lines: Range<usize>,
    /// Length of the key token including the colon (`"title":`).
    key_len: usize,
}

/// Parse the key of a column-0 line: `(key, bytes up to and including the colon)`.
fn key_of(line: &str) -> Option<(String, usize)> {
    let first = line.chars().next()?;
    if first.is_whitespace()
        || first == '#'
        || first == '-' && (line.len() == 1 || line[1..].starts_with([' ', '\r', '\n']))
    {
        return None;
    }
    if first == '"' || first == '\'' {
        let close = line[1..].find(first)? + 1;
        let rest = &line[close + 1..];
        let colon = rest.find(':')?;
        if !rest[..colon].trim().is_empty() {
            return None;
        }
        return Some((line[1..close].to_string(), close + 1 + colon + 1));
    }
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b':'
            && (i + 1 == bytes.len() || matches!(bytes[i + 1], b' ' | b'\t' | b'\r' | b'\n'))
        {
            return Some((line[..i].trim_end().to_string(), i + 1));
        }
    }
    None
}

fn is_continuation(line: &str) -> bool {
    line.starts_with([' ', '\t'])
        || line == "-"
        || line.starts_with("- ")
        || line.starts_with("-\r")
        || line.starts_with("-\n")
}

fn is_filler(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

fn entries(text: &str, yaml: &Range<usize>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut pos = yaml.start;
    let mut pending_filler_end: Option<usize> = None;
    for line in text[yaml.clone()].split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        if let Some((key, key_len)) = key_of(line) {
            out.push(Entry {
                key,
                lines: start..pos,
                key_len,
            });
            pending_filler_end = None;
        } else if is_continuation(line) && !line.trim().is_empty() && !out.is_empty() {
            if let Some(last) = out.last_mut() {
                last.lines.end = pos;
            }
            pending_filler_end = None;
        } else if is_filler(line) {
            pending_filler_end.get_or_insert(start);
        }
    }
    out
}

fn parse_block(yaml: &str) -> Result<Mapping, FmError> {
    if yaml.trim().is_empty() {
        return Ok(Mapping::new());
    }
    match serde_norway::from_str::<Value>(yaml) {
        Ok(Value::Mapping(m)) => Ok(m),
        Ok(Value::Null) => Ok(Mapping::new()),
        Ok(_) => Err(FmError::Unparseable(
            "the frontmatter is not a mapping of keys to values".into(),
        )),
        Err(e) => Err(FmError::Unparseable(format!(
            "the frontmatter is not valid YAML ({e})"
        ))),
    }
}

/// Whether `s` can be written as a plain YAML scalar and read back as the same string.
fn plain_ok(s: &str, flow: bool) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if s.trim() != s
        || "-?:,[]{}#&*!|>'\"%@`".contains(first)
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.chars().any(char::is_control)
        || (flow && s.contains([',', '[', ']', '{', '}']))
        || matches!(
            s.to_ascii_lowercase().as_str(),
            "yes" | "no" | "on" | "off" | "true" | "false" | "null" | "~"
        )
    {
        return false;
    }
    matches!(serde_norway::from_str::<Value>(s), Ok(Value::String(ref read)) if read == s)
}

fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn scalar(s: &str, flow: bool, quote: Option<char>) -> String {
    match quote {
        Some('\'') if !s.chars().any(char::is_control) => format!("'{}'", s.replace('\'', "''")),
        Some('"') => double_quoted(s),
        _ if plain_ok(s, flow) => s.to_string(),
        _ => double_quoted(s),
    }
}

/// Split a key line's value from an inline comment (` # ...` outside quotes).
fn split_comment(value: &str) -> (&str, &str) {
    let mut quote = None;
    let bytes = value.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), c) if c == q => quote = None,
            (None, b'#') if i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t' => {
                return (value[..i].trim_end(), &value[i..]);
            }
            _ => {}
        }
    }
    (value.trim_end(), "")
}

fn render(key_token: &str, value: &FmValue, old: Option<(&str, &str)>, eol: &str) -> String {
    // old: (the value text on the key line, the continuation lines)
    let (old_inline, old_rest) = old.unwrap_or(("", ""));
    let (old_value, comment) = split_comment(old_inline.trim_start());
    let comment = if comment.is_empty() {
        String::new()
    } else {
        format!(" {comment}")
    };
    match value {
        FmValue::Plain(p) => format!("{key_token} {p}{comment}{eol}"),
        FmValue::Scalar(s) => {
            let quote = old_value.chars().next().filter(|c| *c == '"' || *c == '\'');
            format!("{key_token} {}{comment}{eol}", scalar(s, false, quote))
        }
        FmValue::List(items) => {
            let block_item = old_rest
                .lines()
                .find(|l| l.trim_start().starts_with('-'))
                .filter(|_| old_value.is_empty());
            match block_item {
                Some(item) => {
                    let indent = &item[..item.len() - item.trim_start().len()];
                    let mut out = format!("{key_token}{comment}{eol}");
                    for i in items {
                        out.push_str(&format!("{indent}- {}{eol}", scalar(i, false, None)));
                    }
                    out
                }
                None => {
                    let list: Vec<String> = items.iter().map(|i| scalar(i, true, None)).collect();
                    format!("{key_token} [{}]{comment}{eol}", list.join(", "))
                }
            }
        }
    }
}

fn read_back_matches(map: &Mapping, key: &str, value: &FmValue) -> bool {
    match (map.get(key), value) {
        (Some(Value::String(s)), FmValue::Scalar(want)) => s == want,
        (Some(Value::Sequence(seq)), FmValue::List(want)) => {
            seq.len() == want.len()
                && seq.iter().zip(want).all(|(v, w)| {
                    crate::vault::markdown::scalar_string(v).as_deref() == Some(w.trim())
                        || matches!(v, Value::String(s) if s == w)
                })
        }
        (Some(Value::Null), FmValue::List(want)) => want.is_empty(),
        (Some(_), FmValue::Plain(_)) => true,
        _ => false,
    }
}

/// Edit `text`'s frontmatter: `Some(value)` sets `key`, `None` removes it.
fn edit(text: &str, key: &str, value: Option<&FmValue>) -> Result<String, FmError> {
    check_key(key)?;
    let eol = eol_of(text);
    let bom = if text.starts_with('\u{feff}') {
        "\u{feff}"
    } else {
        ""
    };
    let Some((yaml, _body)) = frontmatter_span(text) else {
        let rest = &text[bom.len()..];
        if rest.starts_with("---\n") || rest.starts_with("---\r\n") {
            return Err(FmError::Unparseable(
                "the frontmatter has no closing `---` line".into(),
            ));
        }
        let Some(value) = value else {
            return Ok(text.to_string());
        };
        let key_token = format!("{}:", scalar(key, false, None));
        let line = render(&key_token, value, None, eol);
        return Ok(format!("{bom}---{eol}{line}---{eol}{rest}"));
    };
    let before = parse_block(&text[yaml.clone()])?;
    let found = entries(text, &yaml);
    let matching: Vec<&Entry> = found.iter().filter(|e| e.key == key).collect();
    if matching.len() > 1 {
        return Err(FmError::Unparseable(format!(
            "the key {key:?} appears more than once"
        )));
    }
    let (range, replacement) = match (matching.first(), value) {
        (Some(entry), Some(value)) => {
            let line_end = text[entry.lines.clone()]
                .find('\n')
                .map_or(entry.lines.end, |i| entry.lines.start + i + 1);
            let key_line = &text[entry.lines.start..line_end];
            if text[line_end..entry.lines.end].contains('\t') && key_line.trim_end().ends_with(':')
            {
                return Err(FmError::Unparseable(format!(
                    "the value of {key:?} is indented with tabs"
                )));
            }
            let inline = key_line[entry.key_len..].trim_end_matches(['\n', '\r']);
            let token = &key_line[..entry.key_len];
            let rendered = render(
                token,
                value,
                Some((inline, &text[line_end..entry.lines.end])),
                eol,
            );
            (entry.lines.clone(), rendered)
        }
        (Some(entry), None) => (entry.lines.clone(), String::new()),
        (None, Some(value)) => {
            let key_token = format!("{}:", scalar(key, false, None));
            (yaml.end..yaml.end, render(&key_token, value, None, eol))
        }
        (None, None) => return Ok(text.to_string()),
    };
    let mut out = String::with_capacity(text.len() + replacement.len());
    out.push_str(&text[..range.start]);
    out.push_str(&replacement);
    out.push_str(&text[range.end..]);

    // The safety net: the edited block parses, the key reads back, nothing else moved.
    let (new_yaml, _) = frontmatter_span(&out)
        .ok_or_else(|| FmError::Unparseable("the edit broke the block".into()))?;
    let after = parse_block(&out[new_yaml])?;
    for (k, v) in &before {
        if k.as_str() != Some(key) && after.get(k) != Some(v) {
            return Err(FmError::Unparseable(format!(
                "editing {key:?} would change another key"
            )));
        }
    }
    match value {
        Some(v) if !read_back_matches(&after, key, v) => Err(FmError::Unparseable(format!(
            "{key:?} would not read back as written"
        ))),
        None if after.contains_key(key) => Err(FmError::Unparseable(format!(
            "{key:?} could not be removed"
        ))),
        _ => Ok(out),
    }
}

/// Set top-level `key` to `value`, touching only that key's lines.
pub fn set_key(text: &str, key: &str, value: &FmValue) -> Result<String, FmError> {
    edit(text, key, Some(value))
}

/// Remove top-level `key` and its lines (the fences stay, even around an empty block).
pub fn remove_key(text: &str, key: &str) -> Result<String, FmError> {
    edit(text, key, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> FmValue {
        FmValue::Scalar(v.into())
    }
    fn l(v: &[&str]) -> FmValue {
        FmValue::List(v.iter().map(|x| x.to_string()).collect())
    }

    #[test]
    fn table_of_edits() {
        let cases: &[(&str, &str, Option<FmValue>, &str)] = &[
            // set on an existing scalar, keeping an inline comment
            (
                "---\nstatus: draft # why\nb: 1\n---\nbody\n",
                "status",
                Some(s("done")),
                "---\nstatus: done # why\nb: 1\n---\nbody\n",
            ),
            // quote style kept
            (
                "---\ntitle: 'Old'\n---\n",
                "title",
                Some(s("It's new")),
                "---\ntitle: 'It''s new'\n---\n",
            ),
            (
                "---\ntitle: \"Old\"\n---\n",
                "title",
                Some(s("New")),
                "---\ntitle: \"New\"\n---\n",
            ),
            // block list keeps its indentation style
            (
                "---\ntags:\n  - a\n  - b\n# after\nx: 1\n---\n",
                "tags",
                Some(l(&["c"])),
                "---\ntags:\n  - c\n# after\nx: 1\n---\n",
            ),
            (
                "---\ntags:\n- a\nx: 1\n---\n",
                "tags",
                Some(l(&["c", "d"])),
                "---\ntags:\n- c\n- d\nx: 1\n---\n",
            ),
            // flow list, also a multi-line one
            (
                "---\ntags: [a, b]\n---\n",
                "tags",
                Some(l(&["x", "y z", "a,b"])),
                "---\ntags: [x, y z, \"a,b\"]\n---\n",
            ),
            (
                "---\ntags: [a,\n  b]\nz: 2\n---\n",
                "tags",
                Some(l(&["c"])),
                "---\ntags: [c]\nz: 2\n---\n",
            ),
            // new key appended; values YAML would misread are quoted
            (
                "---\na: 1\n---\n",
                "status",
                Some(s("true")),
                "---\na: 1\nstatus: \"true\"\n---\n",
            ),
            (
                "---\na: 1\n---\n",
                "n",
                Some(FmValue::Plain("5".into())),
                "---\na: 1\nn: 5\n---\n",
            ),
            // CRLF kept, comments kept
            (
                "---\r\n# c\r\na: 1\r\n---\r\nb\r\n",
                "a",
                Some(s("x")),
                "---\r\n# c\r\na: x\r\n---\r\nb\r\n",
            ),
            (
                "---\r\na: 1\r\n---\r\n",
                "b",
                Some(s("y")),
                "---\r\na: 1\r\nb: y\r\n---\r\n",
            ),
            // quoted key
            (
                "---\n\"title\": x\n---\n",
                "title",
                Some(s("y")),
                "---\n\"title\": y\n---\n",
            ),
            // nested and block-scalar look-alikes are not the key
            (
                "---\nmeta:\n  title: inner\n---\n",
                "title",
                Some(s("top")),
                "---\nmeta:\n  title: inner\ntitle: top\n---\n",
            ),
            (
                "---\nd: |\n  title: fake\n---\n",
                "title",
                Some(s("real")),
                "---\nd: |\n  title: fake\ntitle: real\n---\n",
            ),
            // removal
            ("---\na: 1\n---\nbody", "a", None, "---\n---\nbody"),
            (
                "---\ntags:\n  - a\n# keep\nb: 2\n---\n",
                "tags",
                None,
                "---\n# keep\nb: 2\n---\n",
            ),
            ("---\nb: 2\n---\n", "zzz", None, "---\nb: 2\n---\n"),
            // no frontmatter: a minimal block, after a BOM, in the file's line ending
            (
                "# H\n",
                "tags",
                Some(l(&["a"])),
                "---\ntags: [a]\n---\n# H\n",
            ),
            (
                "# H\r\nx\r\n",
                "status",
                Some(s("done")),
                "---\r\nstatus: done\r\n---\r\n# H\r\nx\r\n",
            ),
            ("", "a", Some(s("b")), "---\na: b\n---\n"),
            (
                "\u{feff}# H\n",
                "a",
                Some(s("b")),
                "\u{feff}---\na: b\n---\n# H\n",
            ),
            // more shapes: flow lists over lines with comments, the `...` fence, a folded
            // scalar, nested mappings, an aligned block list
            (
                "---\ntags: [\n  \"a]\", # c\n  b]  # t\nnext: 1\n---\n",
                "tags",
                None,
                "---\nnext: 1\n---\n",
            ),
            (
                "---\na: 1\n...\nbody",
                "a",
                Some(s("x")),
                "---\na: x\n...\nbody",
            ),
            (
                "---\nd: >\n  text\n\n  more\nz: 1\n---\n",
                "d",
                None,
                "---\nz: 1\n---\n",
            ),
            (
                "---\nmeta:\n  a: 1\nz: 1\n---\n",
                "meta",
                None,
                "---\nz: 1\n---\n",
            ),
            (
                "---\ntags:\n    -   a\n---\n",
                "tags",
                Some(l(&["c"])),
                "---\ntags:\n    - c\n---\n",
            ),
            (
                "---\ntitle: \"a\n  b\"\nz: 1\n---\n",
                "title",
                Some(s("c")),
                "---\ntitle: \"c\"\nz: 1\n---\n",
            ),
            // a body with --- lines is untouched
            (
                "---\na: 1\n---\ntext\n---\nmore\n",
                "a",
                Some(s("2")),
                "---\na: \"2\"\n---\ntext\n---\nmore\n",
            ),
        ];
        for (input, key, value, want) in cases {
            let got = match value {
                Some(v) => set_key(input, key, v),
                None => remove_key(input, key),
            }
            .unwrap_or_else(|e| panic!("{input:?} {key}: {e}"));
            assert_eq!(&got, want, "{input:?} {key} {value:?}");
            let body = |t: &str| t[body_range(t)].trim_start_matches('\u{feff}').to_string();
            assert_eq!(body(&got), body(input), "the body is kept: {input:?}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely() {
        for input in [
            "---\ntags: [unclosed\n  bad: x\n---\n",
            "---\na: 1\nno closing fence\n",
            "---\na: 1\na: 2\n---\n",
            "---\ntags:\n\t- a\n---\n",
            "---\na: \"abc\n---\n",
        ] {
            assert!(
                matches!(set_key(input, "a", &s("x")), Err(FmError::Unparseable(_))),
                "{input:?}"
            );
        }
        assert!(matches!(
            set_key("", "", &s("x")),
            Err(FmError::InvalidKey(_))
        ));
        assert!(matches!(
            set_key("", "a\nb", &s("x")),
            Err(FmError::InvalidKey(_))
        ));
    }

    #[test]
    fn replace_body_keeps_the_block() {
        assert_eq!(
            replace_body("---\r\na: 1\r\n---\r\nold\r\n", "new\n"),
            "---\r\na: 1\r\n---\r\nnew\n"
        );
        assert_eq!(replace_body("old", "new"), "new");
    }
}
