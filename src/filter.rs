//! AIP-160 filters: a parser and an evaluator, shared by every list route.
//!
//! Grammar (a subset of AIP-160; whitespace separates tokens, keywords are upper case):
//!
//! ```text
//! filter      = [ expression ]
//! expression  = sequence { "AND" sequence }
//! sequence    = factor { factor }                 (juxtaposition is AND)
//! factor      = term { "OR" term }
//! term        = [ "NOT" | "-" ] simple
//! simple      = restriction | "(" expression ")"
//! restriction = field comparator value
//! field       = name { "." name }                 (e.g. `frontmatter.rating`)
//! comparator  = "=" | "!=" | "<" | ">" | "<=" | ">=" | ":"
//! value       = quoted string ("..." or '...', backslash escapes) | bare word
//! ```
//!
//! Semantics: `=` and `!=` compare exactly (a trailing `*` in the value matches a prefix);
//! `<`, `>`, `<=`, `>=` compare as timestamps (RFC 3339, or a date `2026-11-22`) when both
//! sides are, as numbers when both are, else as text; `:` ("has") is membership for lists
//! (`tags:idea`) and a case-insensitive substring for text. A field a record does not have
//! matches nothing but `!=`. Every error carries the byte position where it was found.

use chrono::{DateTime, NaiveDate, Utc};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    Has,
}

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Restriction {
        field: String,
        cmp: Cmp,
        value: String,
        /// Byte offset of the field, for error messages.
        position: usize,
    },
}

/// Why a filter did not parse, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub position: usize,
    pub message: String,
}

/// A record's value for a field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(String),
    List(Vec<String>),
    Time(DateTime<Utc>),
    Number(f64),
    Missing,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Op(Cmp),
    LParen,
    RParen,
}

fn lex(input: &str) -> Result<Vec<(usize, Tok)>, FilterError> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = input.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push((pos, Tok::LParen));
                i += 1;
            }
            ')' => {
                out.push((pos, Tok::RParen));
                i += 1;
            }
            '"' | '\'' => {
                let quote = c;
                let mut s = String::new();
                i += 1;
                loop {
                    let Some(&(_, c)) = chars.get(i) else {
                        return Err(FilterError {
                            position: pos,
                            message: "unterminated quoted string".into(),
                        });
                    };
                    i += 1;
                    match c {
                        '\\' => {
                            let Some(&(_, next)) = chars.get(i) else {
                                return Err(FilterError {
                                    position: pos,
                                    message: "unterminated quoted string".into(),
                                });
                            };
                            s.push(next);
                            i += 1;
                        }
                        c if c == quote => break,
                        c => s.push(c),
                    }
                }
                out.push((pos, Tok::Quoted(s)));
            }
            '=' | ':' => {
                out.push((pos, Tok::Op(if c == '=' { Cmp::Eq } else { Cmp::Has })));
                i += 1;
            }
            '!' | '<' | '>' => {
                let eq = chars.get(i + 1).is_some_and(|&(_, n)| n == '=');
                let cmp = match (c, eq) {
                    ('!', true) => Cmp::Ne,
                    ('<', true) => Cmp::Le,
                    ('>', true) => Cmp::Ge,
                    ('<', false) => Cmp::Lt,
                    ('>', false) => Cmp::Gt,
                    _ => {
                        return Err(FilterError {
                            position: pos,
                            message: "`!` must be followed by `=`".into(),
                        })
                    }
                };
                out.push((pos, Tok::Op(cmp)));
                i += if eq { 2 } else { 1 };
            }
            _ => {
                let mut s = String::new();
                while let Some(&(_, c)) = chars.get(i) {
                    // A word may hold `:` inside a timestamp value, but not as its first char.
                    let stop = c.is_whitespace()
                        || "()=!<>\"'".contains(c)
                        || (c == ':' && !looks_like_time(&s));
                    if stop {
                        break;
                    }
                    s.push(c);
                    i += 1;
                }
                out.push((pos, Tok::Word(s)));
            }
        }
    }
    Ok(out)
}

/// `2026-11-22T10` so far: a `:` continues the timestamp instead of being "has".
fn looks_like_time(s: &str) -> bool {
    s.len() >= 11
        && s.as_bytes()[4] == b'-'
        && s.as_bytes()[7] == b'-'
        && s[..4].bytes().all(|b| b.is_ascii_digit())
        && s.contains('T')
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    len: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(_, t)| t)
    }
    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.len, |(p, _)| *p)
    }
    fn err<T>(&self, message: impl Into<String>) -> Result<T, FilterError> {
        Err(FilterError {
            position: self.pos(),
            message: message.into(),
        })
    }
    fn keyword(&self, k: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if w == k)
    }

    fn expression(&mut self) -> Result<Expr, FilterError> {
        let mut parts = vec![self.sequence()?];
        while self.keyword("AND") {
            self.at += 1;
            parts.push(self.sequence()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Expr::And(parts)
        })
    }

    fn sequence(&mut self) -> Result<Expr, FilterError> {
        let mut parts = vec![self.factor()?];
        while matches!(self.peek(), Some(Tok::Word(w)) if w != "AND" && w != "OR")
            || matches!(self.peek(), Some(Tok::LParen))
        {
            parts.push(self.factor()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Expr::And(parts)
        })
    }

    fn factor(&mut self) -> Result<Expr, FilterError> {
        let mut parts = vec![self.term()?];
        while self.keyword("OR") {
            self.at += 1;
            parts.push(self.term()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Expr::Or(parts)
        })
    }

    fn term(&mut self) -> Result<Expr, FilterError> {
        if self.keyword("NOT") {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.simple()?)));
        }
        if let Some(Tok::Word(w)) = self.peek() {
            if let Some(rest) = w.strip_prefix('-') {
                if !rest.is_empty() {
                    let rest = rest.to_string();
                    let pos = self.pos() + 1;
                    self.toks[self.at] = (pos, Tok::Word(rest));
                    return Ok(Expr::Not(Box::new(self.simple()?)));
                }
            }
        }
        self.simple()
    }

    fn simple(&mut self) -> Result<Expr, FilterError> {
        match self.peek().cloned() {
            Some(Tok::LParen) => {
                self.at += 1;
                let e = self.expression()?;
                if !matches!(self.peek(), Some(Tok::RParen)) {
                    return self.err("expected `)`");
                }
                self.at += 1;
                Ok(e)
            }
            Some(Tok::Word(field)) if field != "AND" && field != "OR" && field != "NOT" => {
                let position = self.pos();
                if !valid_field(&field) {
                    return self.err(format!("{field:?} is not a field name"));
                }
                self.at += 1;
                let Some(Tok::Op(cmp)) = self.peek().cloned() else {
                    return self.err(format!(
                        "expected a comparator (= != < > <= >= :) after {field:?}"
                    ));
                };
                self.at += 1;
                let value = match self.peek().cloned() {
                    Some(Tok::Word(v)) | Some(Tok::Quoted(v)) => v,
                    _ => return self.err("expected a value"),
                };
                self.at += 1;
                Ok(Expr::Restriction {
                    field,
                    cmp,
                    value,
                    position,
                })
            }
            Some(_) => self.err("expected a field, `NOT` or `(`"),
            None => self.err("the filter ends too early"),
        }
    }
}

fn valid_field(f: &str) -> bool {
    !f.is_empty()
        && f.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        })
}

/// Parse a filter. An empty (or blank) filter is `None`: everything matches.
pub fn parse(input: &str) -> Result<Option<Expr>, FilterError> {
    if input.len() > 4096 {
        return Err(FilterError {
            position: 4096,
            message: "the filter is longer than 4096 bytes".into(),
        });
    }
    let toks = lex(input)?;
    if toks.is_empty() {
        return Ok(None);
    }
    let mut p = Parser {
        toks,
        at: 0,
        len: input.len(),
    };
    let e = p.expression()?;
    if p.at < p.toks.len() {
        return p.err("unexpected input after the end of the filter");
    }
    Ok(Some(e))
}

impl Expr {
    /// Every restriction's field and position, to check them against a route's fields.
    pub fn fields(&self) -> Vec<(&str, usize)> {
        match self {
            Expr::And(v) | Expr::Or(v) => v.iter().flat_map(Expr::fields).collect(),
            Expr::Not(e) => e.fields(),
            Expr::Restriction {
                field, position, ..
            } => vec![(field.as_str(), *position)],
        }
    }

    /// Refuse fields outside `allowed` (a trailing `.` allows a prefix, e.g. `frontmatter.`).
    pub fn check_fields(&self, allowed: &[&str]) -> Result<(), FilterError> {
        for (field, position) in self.fields() {
            let ok = allowed.iter().any(|a| match a.strip_suffix('.') {
                Some(prefix) => field
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1),
                None => field == *a,
            });
            if !ok {
                return Err(FilterError {
                    position,
                    message: format!(
                        "unknown field {field:?}; fields: {}",
                        allowed
                            .iter()
                            .map(|a| if a.ends_with('.') {
                                format!("{a}<key>")
                            } else {
                                a.to_string()
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        Ok(())
    }

    /// Whether a record matches, given its value for each field.
    pub fn matches(&self, get: &dyn Fn(&str) -> Value) -> bool {
        match self {
            Expr::And(v) => v.iter().all(|e| e.matches(get)),
            Expr::Or(v) => v.iter().any(|e| e.matches(get)),
            Expr::Not(e) => !e.matches(get),
            Expr::Restriction {
                field, cmp, value, ..
            } => compare(&get(field), *cmp, value),
        }
    }
}

/// A timestamp or a date (midnight UTC).
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        })
}

fn text_eq(have: &str, want: &str) -> bool {
    match want.strip_suffix('*') {
        Some(prefix) => have.starts_with(prefix),
        None => have == want,
    }
}

fn order(have: &str, want: &str) -> std::cmp::Ordering {
    if let (Some(a), Some(b)) = (parse_time(have), parse_time(want)) {
        return a.cmp(&b);
    }
    if let (Ok(a), Ok(b)) = (have.parse::<f64>(), want.parse::<f64>()) {
        return a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal);
    }
    have.cmp(want)
}

fn compare(have: &Value, cmp: Cmp, want: &str) -> bool {
    use std::cmp::Ordering::*;
    let ord_ok = |o: std::cmp::Ordering| match cmp {
        Cmp::Lt => o == Less,
        Cmp::Gt => o == Greater,
        Cmp::Le => o != Greater,
        Cmp::Ge => o != Less,
        _ => false,
    };
    match have {
        Value::Missing => cmp == Cmp::Ne,
        Value::List(items) => match cmp {
            Cmp::Has | Cmp::Eq => items.iter().any(|i| {
                text_eq(i, want) || (cmp == Cmp::Has && i.starts_with(&format!("{want}/")))
            }),
            Cmp::Ne => !items.iter().any(|i| text_eq(i, want)),
            _ => items.iter().any(|i| ord_ok(order(i, want))),
        },
        Value::Text(s) => match cmp {
            Cmp::Eq => text_eq(s, want),
            Cmp::Ne => !text_eq(s, want),
            Cmp::Has => s.to_lowercase().contains(&want.to_lowercase()),
            _ => ord_ok(order(s, want)),
        },
        Value::Time(t) => match parse_time(want) {
            Some(w) => match cmp {
                Cmp::Eq | Cmp::Has => *t == w,
                Cmp::Ne => *t != w,
                _ => ord_ok(t.cmp(&w)),
            },
            None => false,
        },
        Value::Number(n) => match want.parse::<f64>() {
            Ok(w) => match cmp {
                Cmp::Eq | Cmp::Has => *n == w,
                Cmp::Ne => *n != w,
                _ => ord_ok(n.partial_cmp(&w).unwrap_or(Equal)),
            },
            Err(_) => cmp == Cmp::Ne,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(field: &str, cmp: Cmp, value: &str, position: usize) -> Expr {
        Expr::Restriction {
            field: field.into(),
            cmp,
            value: value.into(),
            position,
        }
    }

    #[test]
    fn parse_table() {
        let cases: Vec<(&str, Expr)> = vec![
            ("tags:idea", r("tags", Cmp::Has, "idea", 0)),
            (
                "status = \"in review\"",
                r("status", Cmp::Eq, "in review", 0),
            ),
            (
                "a=1 b=2",
                Expr::And(vec![r("a", Cmp::Eq, "1", 0), r("b", Cmp::Eq, "2", 4)]),
            ),
            (
                "a=1 AND (b=2 OR c!=3)",
                Expr::And(vec![
                    r("a", Cmp::Eq, "1", 0),
                    Expr::Or(vec![r("b", Cmp::Eq, "2", 9), r("c", Cmp::Ne, "3", 16)]),
                ]),
            ),
            (
                "NOT actor = filesystem",
                Expr::Not(Box::new(r("actor", Cmp::Eq, "filesystem", 4))),
            ),
            ("-tags:x", Expr::Not(Box::new(r("tags", Cmp::Has, "x", 1)))),
            (
                "created_at >= 2026-11-01T00:00:00Z",
                r("created_at", Cmp::Ge, "2026-11-01T00:00:00Z", 0),
            ),
            (
                "frontmatter.rating > 4",
                r("frontmatter.rating", Cmp::Gt, "4", 0),
            ),
            ("a<=b", r("a", Cmp::Le, "b", 0)),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input).unwrap(), Some(want), "{input}");
        }
        assert_eq!(parse("   ").unwrap(), None);
    }

    #[test]
    fn errors_have_positions() {
        let cases = [
            ("tags", 4),
            ("tags:", 5),
            ("(a=1", 4),
            ("a=1)", 3),
            ("a=\"x", 2),
            ("a ! b", 2),
            ("AND a=1", 0),
            ("a=1 OR", 6),
            ("x..y=1", 0),
        ];
        for (input, position) in cases {
            let e = parse(input).unwrap_err();
            assert_eq!(e.position, position, "{input}: {}", e.message);
        }
        let e = parse("a=1 bogus=2")
            .unwrap()
            .unwrap()
            .check_fields(&["a"])
            .unwrap_err();
        assert_eq!(e.position, 4);
        assert!(parse("frontmatter.x=1")
            .unwrap()
            .unwrap()
            .check_fields(&["frontmatter."])
            .is_ok());
        assert!(parse("frontmatter=1")
            .unwrap()
            .unwrap()
            .check_fields(&["frontmatter."])
            .is_err());
    }

    #[test]
    fn evaluation() {
        let get = |f: &str| match f {
            "tags" => Value::List(vec!["project/active".into(), "idea".into()]),
            "status" => Value::Text("draft".into()),
            "created_at" => Value::Time(parse_time("2026-11-20T10:00:00Z").unwrap()),
            "rating" => Value::Number(4.5),
            _ => Value::Missing,
        };
        let m = |f: &str| parse(f).unwrap().unwrap().matches(&get);
        assert!(m("tags:idea"));
        assert!(m("tags:project"), "a parent tag has its children");
        assert!(!m("tags:proj"));
        assert!(m("status=draft AND NOT status=done"));
        assert!(m("status:RAF"));
        assert!(m("status=dr*"));
        assert!(m(
            "created_at > 2026-11-19 created_at < 2026-11-21T00:00:00Z"
        ));
        assert!(m("rating >= 4.5 OR nope = 1"));
        assert!(!m("nope = 1"));
        assert!(m("nope != 1"));
    }
}
