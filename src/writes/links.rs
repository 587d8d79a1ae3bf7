//! Rewriting the links that point at a moved or renamed note: `[[name]]`,
//! `[[name|alias]]`, `[[name#heading]]`, `![[embed]]`, and relative markdown links
//! `[text](../dir/name.md)`. Each rewritten note is its own revision through the pipeline.
//!
//! A wikilink names a note by its full slug or, Obsidian's shortest form, by its file name
//! alone when that name is unique in the vault; the match is case-insensitive. Which notes
//! to rewrite comes from the link graph (the moved note's backlinks).

use std::sync::Arc;

use crate::state::{State, WriteLock};
use crate::vault::note::Note;

use crate::vault::links::{mdlink_re as mdlink, resolve_relative, wikilink_re as wikilink};
use crate::vault::path::{file_name_of as file_name, folder_of};

/// The relative link from a note in `from_folder` to `to_slug`.
fn relative_link(from_folder: &str, to_slug: &str) -> String {
    let from: Vec<&str> = from_folder.split('/').filter(|p| !p.is_empty()).collect();
    let to: Vec<&str> = to_slug.split('/').collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out: Vec<&str> = vec![".."; from.len() - common];
    out.extend(&to[common..]);
    format!("{}.md", out.join("/"))
}

/// Rewrite `text` (a note in `from_folder`) so links to `old_slug` point at `new_slug`.
/// `short_ok_old`/`short_ok_new`: whether the bare file name uniquely names the note.
pub fn rewrite(
    text: &str,
    from_folder: &str,
    old_slug: &str,
    new_slug: &str,
    short_ok_old: bool,
    short_ok_new: bool,
) -> String {
    let old_lower = old_slug.to_lowercase();
    let old_name_lower = file_name(old_slug).to_lowercase();
    let replaced = wikilink().replace_all(text, |caps: &regex::Captures<'_>| {
        let target = caps[1].trim();
        let bare = target.strip_suffix(".md").unwrap_or(target).to_lowercase();
        let full_match = bare == old_lower;
        let short_match = short_ok_old && !bare.contains('/') && bare == old_name_lower;
        if !full_match && !short_match {
            return caps[0].to_string();
        }
        let new_target = if short_match && short_ok_new {
            file_name(new_slug)
        } else {
            new_slug
        };
        format!("[[{new_target}{}]]", &caps[2])
    });
    mdlink()
        .replace_all(&replaced, |caps: &regex::Captures<'_>| {
            let target = &caps[1];
            if target.contains("://") {
                return caps[0].to_string();
            }
            match resolve_relative(from_folder, target) {
                Some(slug) if slug.to_lowercase() == old_lower => {
                    let mut link = relative_link(from_folder, new_slug);
                    if target.contains("%20") {
                        link = link.replace(' ', "%20");
                    }
                    format!("]({link}{})", caps.get(2).map_or("", |m| m.as_str()))
                }
                _ => caps[0].to_string(),
            }
        })
        .into_owned()
}

/// Rewrite the links to `old` (now at `new_slug`) in the notes `linking` (its backlinks,
/// taken from the link graph before the move). Returns how many notes were rewritten
/// and, for each that could not be, its slug and why.
pub fn rewrite_links_to(
    state: &State,
    write: &WriteLock<'_>,
    old: &Note,
    new_slug: &str,
    actor: &str,
    linking: &[String],
) -> (usize, Vec<(String, String)>) {
    let notes: Vec<Arc<Note>> = state.catalog.read().iter().cloned().collect();
    let count_name = |name: &str| {
        let lower = name.to_lowercase();
        notes
            .iter()
            .filter(|n| file_name(n.slug()).to_lowercase() == lower)
            .count()
    };
    // The moved note is already at its new slug in the catalog.
    let short_ok_old = count_name(file_name(old.slug()))
        == usize::from(file_name(old.slug()).eq_ignore_ascii_case(file_name(new_slug)));
    let short_ok_new = count_name(file_name(new_slug)) == 1;
    let linking: Vec<&Arc<Note>> = notes
        .iter()
        .filter(|n| n.note_id != old.note_id && linking.iter().any(|s| s == n.slug()))
        .collect();
    rewrite_each(state, write, actor, &linking, |text, folder| {
        rewrite(
            text,
            folder,
            old.slug(),
            new_slug,
            short_ok_old,
            short_ok_new,
        )
    })
}

/// Rewrite each of `notes` with `rewrite` (its text and folder → the new text), each
/// rewrite its own revision through the pipeline; a note that did not change is left
/// alone, one changed on disk since it was indexed is not overwritten. How many notes
/// were rewritten and, for each that could not be, its slug and why.
fn rewrite_each(
    state: &State,
    write: &WriteLock<'_>,
    actor: &str,
    notes: &[&Arc<Note>],
    rewrite: impl Fn(&str, &str) -> String,
) -> (usize, Vec<(String, String)>) {
    let mut updated = 0;
    let mut failed = Vec::new();
    for note in notes {
        let Some(bytes) = crate::record::refresh::stored_bytes(state, note) else {
            failed.push((
                note.slug().to_string(),
                "the file could not be read".to_string(),
            ));
            continue;
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        let new_text = rewrite(text, folder_of(note.slug()));
        if new_text == text {
            continue;
        }
        if crate::vault::content_hash(&bytes) != note.content_hash {
            failed.push((
                note.slug().to_string(),
                "changed on disk since it was indexed; rewrite its links by hand".into(),
            ));
            continue;
        }
        let change = super::Change {
            from: Some((note, &bytes)),
            to_rel: &note.path,
            bytes: Some(new_text.into_bytes().into()),
            actor,
            kind: "update",
            new_id: None,
            renamed: false,
        };
        match super::commit_change(state, write, change, None) {
            Ok(_) => updated += 1,
            Err(e) => failed.push((note.slug().to_string(), e.message)),
        }
    }
    (updated, failed)
}

/// Rewrite `text` (a note in `from_folder`) so its links and embeds of the attachment
/// `old_path` name `new_path`: wikilinks (`![[diagram.png]]`, `[[media/diagram.png|x]]`)
/// by file name when the short name named it (`short_ok_old`) and still names it alone
/// (`short_ok_new`), else by path; relative markdown links and images by a relative
/// path. Other links are left as written.
pub fn rewrite_attachment(
    text: &str,
    from_folder: &str,
    old_path: &str,
    new_path: &str,
    short_ok_old: bool,
    short_ok_new: bool,
) -> String {
    use crate::vault::attachments::relative_path;
    use crate::vault::links::filelink_re;
    use crate::vault::path::file_name_of;
    let old_lower = old_path.to_lowercase();
    let old_name_lower = file_name_of(old_path).to_lowercase();
    let replaced = wikilink().replace_all(text, |caps: &regex::Captures<'_>| {
        let target = caps[1].trim().trim_start_matches('/');
        let lower = target.to_lowercase();
        let by_path = lower == old_lower || old_lower.ends_with(&format!("/{lower}"));
        let by_name = short_ok_old && !lower.contains('/') && lower == old_name_lower;
        if !by_path && !by_name {
            return caps[0].to_string();
        }
        let new_target = if !target.contains('/') && short_ok_new {
            file_name_of(new_path)
        } else {
            new_path
        };
        format!("[[{new_target}{}]]", &caps[2])
    });
    filelink_re()
        .replace_all(&replaced, |caps: &regex::Captures<'_>| {
            let whole = &caps[0];
            let target = &caps[2];
            if target.contains("://") {
                return whole.to_string();
            }
            match relative_path(from_folder, target) {
                Some(p) if p.to_lowercase() == old_lower => {
                    let mut link = relative_link(from_folder, new_path);
                    link.truncate(link.len() - ".md".len());
                    if target.contains("%20") || link.contains(' ') {
                        link = link.replace(' ', "%20");
                    }
                    whole.replacen(target, &link, 1)
                }
                _ => whole.to_string(),
            }
        })
        .into_owned()
}

/// Rewrite the links to the attachment `old_path` (now at `new_path`) in the notes
/// `linking`; how many notes were rewritten and, for each that could not be, why.
pub fn rewrite_attachment_links(
    state: &State,
    write: &WriteLock<'_>,
    old_path: &str,
    new_path: &str,
    actor: &str,
    linking: &[String],
) -> (usize, Vec<(String, String)>) {
    use crate::vault::path::file_name_of;
    let named = |name: &str| state.attachments.read().named(name).len();
    // The moved file is already at its new path in the catalog.
    let same_name = file_name_of(old_path).eq_ignore_ascii_case(file_name_of(new_path));
    let short_ok_old = named(file_name_of(old_path)) == usize::from(same_name);
    let short_ok_new = named(file_name_of(new_path)) == 1;
    let notes: Vec<Arc<Note>> = state
        .catalog
        .read()
        .iter()
        .filter(|n| linking.iter().any(|s| s == n.slug()))
        .cloned()
        .collect();
    let notes: Vec<&Arc<Note>> = notes.iter().collect();
    rewrite_each(state, write, actor, &notes, |text, folder| {
        rewrite_attachment(text, folder, old_path, new_path, short_ok_old, short_ok_new)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_links_and_embeds_follow_a_move() {
        let text = "![[diagram.png]], [[media/diagram.png|the diagram]], ![[diagram.png|200]], ![a](../media/diagram.png), [b](../media/diagram%20old.png) and ![[other.png]]";
        let out = rewrite_attachment(
            text,
            "notes",
            "media/diagram.png",
            "assets/chart.png",
            true,
            true,
        );
        assert_eq!(
            out,
            "![[chart.png]], [[assets/chart.png|the diagram]], ![[chart.png|200]], ![a](../assets/chart.png), [b](../media/diagram%20old.png) and ![[other.png]]"
        );
        let out = rewrite_attachment(
            "![[diagram.png]]",
            "",
            "media/diagram.png",
            "assets/diagram.png",
            true,
            false,
        );
        assert_eq!(
            out, "![[assets/diagram.png]]",
            "a name no longer unique gets a path"
        );
        let out = rewrite_attachment(
            "![x](media/my%20diagram.png)",
            "",
            "media/my diagram.png",
            "media/our diagram.png",
            true,
            true,
        );
        assert_eq!(out, "![x](media/our%20diagram.png)");
    }

    #[test]
    fn wikilinks_in_every_form() {
        let text = "see [[roadmap]], [[Roadmap|the plan]], [[projects/roadmap#Q1]], ![[roadmap]] and [[roadmapper]]";
        let out = rewrite(
            text,
            "daily",
            "projects/roadmap",
            "archive/plan",
            true,
            true,
        );
        assert_eq!(
            out,
            "see [[plan]], [[plan|the plan]], [[archive/plan#Q1]], ![[plan]] and [[roadmapper]]"
        );
        let out = rewrite(
            "[[roadmap]]",
            "",
            "projects/roadmap",
            "archive/plan",
            true,
            false,
        );
        assert_eq!(out, "[[archive/plan]]");
        let out = rewrite(
            "[[roadmap]]",
            "",
            "projects/roadmap",
            "archive/plan",
            false,
            true,
        );
        assert_eq!(out, "[[roadmap]]", "an ambiguous short name is left alone");
    }

    #[test]
    fn relative_markdown_links() {
        let text = "[plan](../projects/roadmap.md#goals) and [web](https://x.test/roadmap.md)";
        let out = rewrite(
            text,
            "daily",
            "projects/roadmap",
            "archive/plan",
            true,
            true,
        );
        assert_eq!(
            out,
            "[plan](../archive/plan.md#goals) and [web](https://x.test/roadmap.md)"
        );
        let out = rewrite(
            "[a](sub%20dir/a%20b.md)",
            "",
            "sub dir/a b",
            "c d",
            true,
            true,
        );
        assert_eq!(out, "[a](c%20d.md)");
        assert_eq!(relative_link("a/b", "a/c/d"), "../c/d.md");
        assert_eq!(relative_link("", "x"), "x.md");
    }
}
