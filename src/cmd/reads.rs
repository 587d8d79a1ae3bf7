//! `notevault search`, `read` and `ls`: the `/v1` reads from the command line, asked of
//! the daemon serving the vault or answered from the folder directly (`reach`), printed
//! for a person or, with `--json`, as the `/v1` JSON.

use serde_json::Value;

use crate::cli::{LsArgs, ReadArgs, SearchArgs};
use crate::surface::notes::{ListNotesParams, ReadNoteParams};
use crate::surface::search::SearchParams;

use super::reach::Session;

/// Notes per page of a listing, and lines per page of a read: the `/v1` maxima.
const LIST_PAGE: usize = 500;
const READ_PAGE: usize = 2000;

/// `notevault search QUERY [VAULT]`: the best matches, each with its slug, title and the
/// line that matched.
pub fn search(args: SearchArgs) -> anyhow::Result<()> {
    if !(1..=100).contains(&args.limit) {
        anyhow::bail!("--limit must be 1..100, got {}", args.limit);
    }
    let session = Session::open(args.vault, &args.reach, false)?;
    session.wait_for_index()?;
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("q", &args.query)
        .append_pair("page_size", &args.limit.to_string())
        .finish();
    let params = SearchParams {
        q: args.query.clone(),
        page_size: Some(args.limit),
        ..SearchParams::default()
    };
    let answer = session.ask(&format!("/v1/search?{query}"), |state| {
        crate::surface::search::search(state, params)
    })?;
    if args.reach.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let results = answer["results"].as_array().cloned().unwrap_or_default();
    for hit in &results {
        println!("{}  {}", text(&hit["slug"]), text(&hit["title"]));
        let snippet = &hit["snippet"];
        if let Some(line) = snippet["text"].as_str() {
            let unmarked = line.replace("<mark>", "").replace("</mark>", "");
            match snippet["line"].as_u64() {
                Some(n) => println!("    {n}: {unmarked}"),
                None => println!("    {unmarked}"),
            }
        }
    }
    let matched = answer["coverage"]["notes_matched"].as_u64().unwrap_or(0);
    if results.is_empty() {
        println!("no note matches {:?}", args.query);
    } else if matched as usize > results.len() {
        println!(
            "({} of {matched} matching notes; --limit N for more)",
            results.len()
        );
    }
    Ok(())
}

/// `notevault read NOTE [VAULT] [--lines A:B]`: the note's text (or lines A to B), as
/// in the file; `--json` is the `/v1` read with every line asked for.
pub fn read(args: ReadArgs) -> anyhow::Result<()> {
    let (first, last) = match &args.lines {
        Some(range) => parse_lines(range)?,
        None => (1, None),
    };
    let session = Session::open(args.vault, &args.reach, false)?;
    let path = format!("/v1/notes/{}", path_of(&args.note));
    let mut offset = first;
    let mut read: Option<Value> = None;
    loop {
        let limit = last.map_or(READ_PAGE, |last| (last + 1 - offset).min(READ_PAGE));
        let params = ReadNoteParams {
            note: args.note.clone(),
            offset: Some(offset),
            limit: Some(limit),
        };
        let page = session.ask(&format!("{path}?offset={offset}&limit={limit}"), |state| {
            crate::surface::notes::read_note(state, params)
        })?;
        let next = page["lines"]["next_offset"].as_u64().map(|n| n as usize);
        match &mut read {
            None => read = Some(page),
            Some(all) => {
                let items = page["lines"]["items"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if let Some(held) = all["lines"]["items"].as_array_mut() {
                    held.extend(items);
                }
            }
        }
        match next {
            Some(n) if last.is_none_or(|last| n <= last) => offset = n,
            _ => {
                if let Some(all) = &mut read {
                    let held = all["lines"]["items"].as_array().map_or(0, Vec::len);
                    all["lines"]["limit"] = held.into();
                    all["lines"]["next_offset"] = next.into();
                }
                break;
            }
        }
    }
    let read = read.unwrap_or_default();
    if args.reach.json {
        println!("{}", serde_json::to_string_pretty(&read)?);
        return Ok(());
    }
    if read["visibility"] == "private" {
        anyhow::bail!(
            "{} is a private note: the daemon holds only its ciphertext; read it on a device (`notevault device`)",
            text(&read["slug"])
        );
    }
    let total = read["lines"]["total"].as_u64().unwrap_or(0) as usize;
    if first > total.max(1) {
        anyhow::bail!(
            "{} has {total} lines: --lines starts past its end",
            text(&read["slug"])
        );
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in read["lines"]["items"].as_array().into_iter().flatten() {
        writeln!(out, "{}", line["text"].as_str().unwrap_or_default())?;
    }
    Ok(())
}

/// `notevault ls [VAULT] [--prefix P]`: slug and title of every note, by slug.
pub fn ls(args: LsArgs) -> anyhow::Result<()> {
    let session = Session::open(args.vault, &args.reach, false)?;
    let mut notes: Vec<Value> = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(prefix) = &args.prefix {
            query.append_pair("prefix", prefix);
        }
        query.append_pair("page_size", &LIST_PAGE.to_string());
        if let Some(token) = &token {
            query.append_pair("page_token", token);
        }
        let params = ListNotesParams {
            prefix: args.prefix.clone(),
            page_size: Some(LIST_PAGE),
            page_token: token.clone(),
            ..ListNotesParams::default()
        };
        let page = session.ask(&format!("/v1/notes?{}", query.finish()), |state| {
            crate::surface::notes::list_notes(state, params)
        })?;
        notes.extend(page["notes"].as_array().cloned().unwrap_or_default());
        match page["next_page_token"].as_str() {
            Some(next) => token = Some(next.to_string()),
            None => break,
        }
    }
    if args.reach.json {
        let all = serde_json::json!({ "notes": notes });
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for note in &notes {
        writeln!(out, "{}\t{}", text(&note["slug"]), text(&note["title"]))?;
    }
    Ok(())
}

/// `A:B`, `A:`, `:B` or `A` (1-based, both ends included) as (first, last).
fn parse_lines(range: &str) -> anyhow::Result<(usize, Option<usize>)> {
    let bad =
        || anyhow::anyhow!("--lines takes A:B (1-based, e.g. 10:20, 10: or :20), got {range:?}");
    let number = |s: &str| -> anyhow::Result<Option<usize>> {
        if s.trim().is_empty() {
            return Ok(None);
        }
        match s.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(bad()),
        }
    };
    let (first, last) = match range.split_once(':') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => {
            let n = number(range)?.ok_or_else(bad)?;
            (Some(n), Some(n))
        }
    };
    let first = first.unwrap_or(1);
    if last.is_some_and(|last| last < first) {
        return Err(bad());
    }
    Ok((first, last))
}

/// A note's slug or id as a URL path: each segment percent-encoded, the slashes kept.
fn path_of(note: &str) -> String {
    note.split('/')
        .map(|segment| {
            percent_encoding::utf8_percent_encode(segment, percent_encoding::NON_ALPHANUMERIC)
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ranges() {
        assert_eq!(parse_lines("3:5").unwrap(), (3, Some(5)));
        assert_eq!(parse_lines("3:").unwrap(), (3, None));
        assert_eq!(parse_lines(":5").unwrap(), (1, Some(5)));
        assert_eq!(parse_lines("4").unwrap(), (4, Some(4)));
        for bad in ["0:2", "5:3", "a:b", ""] {
            assert!(parse_lines(bad).is_err(), "{bad}");
        }
        assert_eq!(path_of("a b/c#d"), "a%20b/c%23d");
    }
}
