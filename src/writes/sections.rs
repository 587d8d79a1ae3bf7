//! Section-aware edits ([`super::Op::Section`]): append to a note, at its end or at the
//! end of a heading's section, or replace what a heading's section holds. A section runs
//! from its heading line to the next heading of the same or a higher level; headings in
//! the frontmatter or inside fenced code are no headings. Only the bytes of the section
//! touched change.

use crate::error::{Error, Reason, Result};
use crate::vault::frontmatter;

/// A heading line of the body: its level, its text, and where its line starts and ends
/// (after the newline) in the whole text.
struct Heading {
    level: usize,
    text: String,
    start: usize,
    end: usize,
    line: usize,
}

/// The ATX headings of `text`'s body (after the frontmatter), outside fenced code.
fn headings(text: &str) -> Vec<Heading> {
    let body = frontmatter::body_range(text).start;
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    let mut at = body;
    let first_line = text[..body].matches('\n').count() + 1;
    for (i, line) in text[body..].split_inclusive('\n').enumerate() {
        let start = at;
        at += line.len();
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() > 3 {
            continue;
        }
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (Some(open), Some(m)) if m == open => {
                fence = None;
                continue;
            }
            (None, Some(m)) => {
                fence = Some(m);
                continue;
            }
            _ => {}
        }
        if fence.is_some() {
            continue;
        }
        let level = trimmed.bytes().take_while(|b| *b == b'#').count();
        let rest = &trimmed[level..];
        if !(1..=6).contains(&level) || !(rest.starts_with([' ', '\t']) || rest.trim().is_empty()) {
            continue;
        }
        out.push(Heading {
            level,
            text: heading_text(rest),
            start,
            end: at,
            line: first_line + i,
        });
    }
    out
}

/// A heading's text without its markers: `## Tasks ##` and `Tasks` both read `Tasks`.
fn heading_text(text: &str) -> String {
    let text = text.trim();
    let text = text.trim_start_matches('#').trim();
    let text = text.trim_end_matches('#');
    text.trim().to_string()
}

/// The byte range of the section under `heading` (the line after the heading up to the
/// next heading of the same or a higher level), and the heading's line end.
fn section(text: &str, heading: &str) -> Result<(usize, usize)> {
    let wanted = heading_text(heading);
    let all = headings(text);
    let found: Vec<usize> = (0..all.len()).filter(|&i| all[i].text == wanted).collect();
    let i = match found.as_slice() {
        [i] => *i,
        [] => {
            let names: Vec<&str> = all.iter().map(|h| h.text.as_str()).take(20).collect();
            return Err(Error::new(
                Reason::EDIT_MATCH_NOT_FOUND,
                format!(
                    "no heading `{wanted}` in the note (its headings: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        several => {
            let lines: Vec<String> = several.iter().map(|&i| all[i].line.to_string()).collect();
            return Err(Error::new(
                Reason::EDIT_AMBIGUOUS,
                format!(
                    "the heading `{wanted}` occurs {} times in the note",
                    several.len()
                ),
            )
            .with_meta("candidate_lines", lines.join(",")));
        }
    };
    let level = all[i].level;
    let end = all[i + 1..]
        .iter()
        .find(|h| h.level <= level)
        .map_or(text.len(), |h| h.start);
    Ok((all[i].end, end))
}

/// `content` as whole lines: ending with one newline.
fn as_lines(content: &str) -> String {
    let mut out = content.trim_end_matches(['\n', '\r']).to_string();
    out.push('\n');
    out
}

/// The text after appending `content`: at the end of the note, or at the end of the
/// section under `heading` (after its last non-blank line, before the blank lines that
/// part it from the next heading).
pub fn append(text: &str, heading: Option<&str>, content: &str) -> Result<String> {
    let addition = as_lines(content);
    let Some(heading) = heading else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&addition);
        return Ok(out);
    };
    let (start, end) = section(text, heading)?;
    let kept = text[start..end].trim_end_matches(['\n', '\r', ' ', '\t']);
    let insert_at = start + kept.len();
    let mut out = String::with_capacity(text.len() + addition.len() + 2);
    out.push_str(&text[..insert_at]);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&addition);
    let rest = &text[insert_at..];
    let rest = rest.trim_start_matches(['\r', ' ', '\t']);
    let rest = rest.strip_prefix('\n').unwrap_or(rest);
    if !rest.is_empty() && end < text.len() && !rest.starts_with('\n') {
        // The next heading stays parted from the section by a blank line.
        out.push('\n');
    }
    out.push_str(rest);
    Ok(out)
}

/// The text with what the section under `heading` holds replaced by `content` (the
/// heading line kept; a following heading stays parted by a blank line).
pub fn replace(text: &str, heading: &str, content: &str) -> Result<String> {
    let (start, end) = section(text, heading)?;
    let mut out = String::with_capacity(text.len() + content.len());
    out.push_str(&text[..start]);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if !content.trim().is_empty() {
        out.push_str(&as_lines(content));
    }
    if end < text.len() {
        out.push('\n');
    }
    out.push_str(&text[end..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str = "---\ntitle: x\n# not a heading\n---\n# Plan\n\nintro\n\n## Tasks\n\n- a\n- b\n\n```\n## not one either\n```\n\n## Log\n\nold\n";

    #[test]
    fn append_at_the_end_or_under_a_heading() {
        assert_eq!(append("a", None, "b").unwrap(), "a\nb\n");
        assert_eq!(append("", None, "b\n\n").unwrap(), "b\n");
        let out = append(NOTE, Some("## Tasks"), "- c").unwrap();
        assert!(
            out.contains("- a\n- b\n\n```\n## not one either\n```\n- c\n\n## Log\n"),
            "{out}"
        );
        let out = append(NOTE, Some("Log"), "new").unwrap();
        assert!(out.ends_with("## Log\n\nold\nnew\n"), "{out}");
        let out = append(NOTE, Some("Plan"), "last").unwrap();
        assert!(out.ends_with("old\nlast\n"), "{out}");
    }

    #[test]
    fn replace_a_section_keeps_the_rest() {
        let out = replace(NOTE, "Tasks", "- only").unwrap();
        assert_eq!(out, "---\ntitle: x\n# not a heading\n---\n# Plan\n\nintro\n\n## Tasks\n- only\n\n## Log\n\nold\n");
        let out = replace(NOTE, "Log", "").unwrap();
        assert!(out.ends_with("## Log\n"), "{out}");
    }

    #[test]
    fn a_missing_or_repeated_heading_is_refused() {
        let err = append(NOTE, Some("not a heading"), "x").unwrap_err();
        assert_eq!(err.reason, Reason::EDIT_MATCH_NOT_FOUND);
        assert!(err.message.contains("Plan, Tasks, Log"), "{}", err.message);
        let err = replace("# A\n# A\n", "A", "x").unwrap_err();
        assert_eq!(err.reason, Reason::EDIT_AMBIGUOUS);
        assert_eq!(err.metadata["candidate_lines"], "1,2");
    }
}
