//! A unified diff (the preview a queued write stores) as lines a page colours: each
//! line's class and its text. Pure; the template escapes the text.

/// One line of a diff as the review page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// `add`, `del`, `hunk`, `file` or `ctx`.
    pub class: &'static str,
    pub text: String,
}

/// The most lines one write's diff shows; the rest is summed up in one line.
pub const MAX_LINES: usize = 400;

/// The lines of `diff`, classified; at most [`MAX_LINES`], then a line that says how many
/// more there are.
pub fn lines(diff: &str) -> Vec<DiffLine> {
    let mut out: Vec<DiffLine> = diff
        .lines()
        .take(MAX_LINES)
        .map(|line| DiffLine {
            class: class_of(line),
            text: line.to_string(),
        })
        .collect();
    let total = diff.lines().count();
    if total > MAX_LINES {
        out.push(DiffLine {
            class: "hunk",
            text: format!("… {} more lines", total - MAX_LINES),
        });
    }
    if out.is_empty() {
        out.push(DiffLine {
            class: "ctx",
            text: "(no change to the note's text)".into(),
        });
    }
    out
}

fn class_of(line: &str) -> &'static str {
    if line.starts_with("+++") || line.starts_with("---") {
        "file"
    } else if line.starts_with("@@") {
        "hunk"
    } else if line.starts_with('+') {
        "add"
    } else if line.starts_with('-') {
        "del"
    } else {
        "ctx"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified_by_their_first_characters() {
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n";
        let classes: Vec<&str> = lines(diff).iter().map(|l| l.class).collect();
        assert_eq!(classes, ["file", "file", "hunk", "ctx", "del", "add"]);
    }

    #[test]
    fn a_long_diff_is_cut_and_says_so() {
        let diff = "+x\n".repeat(MAX_LINES + 5);
        let shown = lines(&diff);
        assert_eq!(shown.len(), MAX_LINES + 1);
        assert_eq!(shown.last().unwrap().text, "… 5 more lines");
        assert_eq!(lines("")[0].class, "ctx");
    }
}
