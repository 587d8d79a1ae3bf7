//! Links in markdown: `[[name]]`, `[[name|alias]]`, `[[name#heading]]`, `![[embed]]` and
//! relative markdown links `[text](../dir/name.md)`, with their line numbers, outside
//! fenced code blocks and inline code. The link graph and link rewriting share these.

use std::sync::OnceLock;

use regex::Regex;

/// `[[target#heading|alias]]`: the target holds no `]`, `|` or `#`.
pub fn wikilink_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\[\[([^\]\|#\n]+)((?:#[^\]\|\n]*)?(?:\|[^\]\n]*)?)\]\]").expect("valid regex")
    })
}

/// `](target.md#anchor)`: a markdown link to a `.md` file.
pub fn mdlink_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\]\(([^)\s]+?\.md)(#[^)\s]*)?\)").expect("valid regex"))
}

/// One link as written.
/// A relative markdown link (or image) to a file with another extension than `.md`.
pub fn filelink_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(!?)\[[^\]\n]*\]\(([^)\s#?]+?\.[A-Za-z0-9]{1,5})(?:[#?][^)\s]*)?\)")
            .expect("valid regex")
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLink {
    /// The target as written (`projects/roadmap`, `../projects/roadmap.md`).
    pub target: String,
    /// 1-based line.
    pub line: usize,
    /// A relative markdown link (resolved against the note's folder), not a wikilink.
    pub markdown: bool,
    pub embed: bool,
}

/// The links of a note's text, in order, skipping fenced code blocks and inline code.
pub fn outgoing(text: &str) -> Vec<RawLink> {
    let mut out = Vec::new();
    if !text.contains("[[") && !text.contains("](") {
        return out;
    }
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(f) = fence {
            if trimmed.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
            continue;
        }
        if !line.contains("[[") && !line.contains("](") {
            continue;
        }
        // Blank out inline code so links inside it are not links.
        let mut visible = String::with_capacity(line.len());
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            }
            visible.push(if in_code { ' ' } else { c });
        }
        for caps in wikilink_re().captures_iter(&visible) {
            let whole = caps.get(0).expect("group 0");
            let embed = whole.start() > 0 && visible.as_bytes()[whole.start() - 1] == b'!';
            out.push(RawLink {
                target: caps[1].trim().to_string(),
                line: i + 1,
                markdown: false,
                embed,
            });
        }
        for caps in mdlink_re().captures_iter(&visible) {
            if caps[1].contains("://") {
                continue;
            }
            out.push(RawLink {
                target: caps[1].to_string(),
                line: i + 1,
                markdown: true,
                embed: false,
            });
        }
        // Relative links to attachments (`[x](../a.pdf)`, `![](img/b.png)`).
        for caps in filelink_re().captures_iter(&visible) {
            let target = &caps[2];
            if target.contains("://") || target.to_ascii_lowercase().ends_with(".md") {
                continue;
            }
            out.push(RawLink {
                target: target.to_string(),
                line: i + 1,
                markdown: true,
                embed: !caps[1].is_empty(),
            });
        }
    }
    out
}

/// Resolve a relative markdown link target from a note in `from_folder` to a slug.
pub fn resolve_relative(from_folder: &str, target: &str) -> Option<String> {
    let target = percent_encoding::percent_decode_str(target)
        .decode_utf8()
        .ok()?;
    let target = target.strip_suffix(".md")?;
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        from_folder.split('/').filter(|p| !p.is_empty()).collect()
    };
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_links_with_lines_and_skips_code() {
        let text = "a [[One]] and ![[two.png]]\n```\n[[not a link]]\n```\n`[[nor this]]` [x](../b/c.md#h) [w](https://x.test/a.md)\n[[Three#h|alias]]";
        let got: Vec<(String, usize, bool, bool)> = outgoing(text)
            .into_iter()
            .map(|l| (l.target, l.line, l.markdown, l.embed))
            .collect();
        assert_eq!(
            got,
            vec![
                ("One".into(), 1, false, false),
                ("two.png".into(), 1, false, true),
                ("../b/c.md".into(), 5, true, false),
                ("Three".into(), 6, false, false),
            ]
        );
        assert_eq!(
            resolve_relative("daily", "../projects/x%20y.md").as_deref(),
            Some("projects/x y")
        );
        assert_eq!(resolve_relative("", "../x.md"), None);
    }
}
