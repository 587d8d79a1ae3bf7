//! Commands on a vault offline: `export`, `reindex`, `check [--repair]`; and the shell
//! completions of the command line.

use std::process::ExitCode;

use crate::cli::{exit as status, CompletionsArgs, ExportArgs, ReindexArgs};
use crate::config::Config;

use super::{logs, offline_config};

/// `notevault export`: the archive of `crate::export`, written to a file that is
/// either whole or absent.
pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let options = crate::export::Options {
        history: args.history,
    };
    let manifest = match args.hosted_vault {
        Some(name) => {
            let blobs = super::hosted::blobs(args.config.clone())?;
            let db = super::hosted::database(crate::cli::DatabaseArgs {
                database: args.database,
                config: args.config,
            })?;
            let vault = crate::hosted::block_on(async {
                crate::hosted::schema::check(&db).await?;
                crate::hosted::registry::find(&db, &name).await
            })
            .map_err(super::hosted::message)?;
            crate::export::write_file(&args.output, args.force, |out| {
                crate::hosted::export::write(&db, vault.id, &options, blobs.as_deref(), out)
            })?
        }
        None => {
            let config = offline_config(args.vault, args.state_dir, args.config)?;
            let state_dir = config.state_dir_of_vault()?;
            crate::export::to_file(
                &config.vault,
                &state_dir,
                &options,
                &args.output,
                args.force,
            )?
        }
    };
    for skipped in &manifest.skipped {
        eprintln!("notevault: left out {}: {}", skipped.path, skipped.reason);
    }
    println!(
        "exported {} notes and {} attachments ({} bytes{}) to {}",
        manifest.notes,
        manifest.attachments,
        manifest.bytes,
        match manifest.history {
            "bundle" => ", history as a git bundle",
            "bare" => ", history as a bare repository",
            _ => "",
        },
        args.output.display()
    );
    Ok(())
}

/// `notevault completions SHELL`: the script clap_complete generates from the one clap
/// definition (`completions/` holds the checked-in copies).
pub fn completions(args: CompletionsArgs) -> ExitCode {
    use clap_complete::Shell;
    let shell = match args.shell.to_ascii_lowercase().as_str() {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        "powershell" | "pwsh" => Shell::PowerShell,
        other => {
            eprintln!(
                "notevault: unknown shell {other:?}: use bash, zsh, fish or powershell (notevault completions bash > ~/.local/share/bash-completion/completions/notevault)"
            );
            return ExitCode::from(status::USAGE);
        }
    };
    let mut cmd = crate::cli::command();
    clap_complete::generate(shell, &mut cmd, "notevault", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Drop the index, open the vault without watching (which rebuilds it from the folder),
/// wait for the index and the history writer, and say what was done.
pub fn reindex(args: ReindexArgs) -> anyhow::Result<()> {
    logs();
    let config = offline_config(args.vault, args.state_dir, args.config)?;
    println!("{}", rebuild(config, true)?);
    Ok(())
}

/// Open the vault once without watching (migrations, catalog, index, history caught up
/// with the folder; the index rebuilt first with `drop_index`), wait for the index and
/// the history writer, and say what was done.
fn rebuild(config: Config, drop_index: bool) -> anyhow::Result<String> {
    let started = std::time::Instant::now();
    if drop_index {
        crate::index::SearchIndex::drop_index(&config.state_dir_of_vault()?)?;
    }
    let daemon = crate::daemon::open(config)?;
    let state = daemon.state.clone();
    let opened = started.elapsed();
    if !state
        .index
        .wait_for_blocking(state.committed_seq(), std::time::Duration::from_secs(3600))
    {
        if let Some(e) = state.index.state().last_error {
            anyhow::bail!("indexing failed: {e}");
        }
        anyhow::bail!("the index did not finish within an hour");
    }
    // With a model, the note vectors too (they are embedded beside the index writer).
    while state.index.vectors.status().syncing || state.index.vectors.pending() > 0 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let indexed = started.elapsed();
    state.index.shutdown();
    let index = state.index.state();
    if let Some(e) = index.last_error {
        anyhow::bail!("indexing failed: {e}");
    }
    state.history.flush(std::time::Duration::from_secs(3600));
    let notes = index.synced_notes.unwrap_or(0);
    let secs = indexed.as_secs_f64();
    let summary = format!(
        "indexed {notes} notes of {} in {:.0} ms ({:.0} notes/s; scan {:.0} ms, index {} ms)",
        state.root().display(),
        indexed.as_secs_f64() * 1000.0,
        notes as f64 / secs.max(1e-9),
        opened.as_secs_f64() * 1000.0,
        index.sync_ms.unwrap_or(0)
    );
    // A verify after a start that used the scan cache has ended (the index waited for
    // it); holding the write lock to the exit keeps its cache write from being cut off.
    let recording = state.lock();
    // The index and the history are written and closed; freeing 44k notes one by one
    // would only delay the exit (~0.1 s on the corpus). The system takes the memory back.
    std::mem::forget(recording);
    std::mem::forget(state);
    std::mem::forget(daemon);
    Ok(summary)
}

/// `notevault check [--repair]`: the report of `crate::check`, one line per finding;
/// with `--repair`, leftovers removed and what is derived rebuilt, then checked again.
pub fn notevault_check(args: crate::cli::CheckArgs) -> anyhow::Result<u8> {
    let config = offline_config(args.vault, args.state_dir, args.config)?;
    let state_dir = config.state_dir_of_vault()?;
    let mut report = crate::check::check(&config.vault, &state_dir).map_err(anyhow::Error::msg)?;
    print_report(&report);
    if args.repair && (report.problems() > 0 || report.reopen) {
        logs();
        // Each leftover on its own: one that cannot be cleared is reported (the check
        // after the repair lists it again) and the others are still cleared.
        for leftover in &report.leftovers {
            use crate::vault::fsio::Leftover;
            match crate::vault::fsio::resolve_leftover(leftover) {
                Ok(Leftover::Removed) => {}
                Ok(Leftover::PutBack(note)) => println!(
                    "repair: {} is back as it was before a write that was interrupted while it replaced it",
                    note.display()
                ),
                Ok(Leftover::Recovered { note, copy }) => println!(
                    "repair: {} changed after a write that replaced it was interrupted; the save that write swapped out is kept as {}",
                    note.display(),
                    copy.display()
                ),
                Err(e) => println!("repair: cannot clear {}: {e}", leftover.display()),
            }
        }
        if report.reopen || report.reindex {
            let summary = rebuild(config.clone(), report.reindex)?;
            println!("repair: {summary}");
        }
        report = crate::check::check(&config.vault, &state_dir).map_err(anyhow::Error::msg)?;
        println!("after repair:");
        print_report(&report);
    }
    let problems = report.problems();
    if problems == 0 {
        println!("check: ok");
        return Ok(status::SUCCESS);
    }
    let fixable = problems - report.beyond_repair.min(problems);
    if args.repair || fixable == 0 {
        println!(
            "check: {problems} problems (--repair cannot fix them; each line says what to do)"
        );
    } else {
        println!("check: {problems} problems: `notevault check --repair` fixes {fixable} of them");
    }
    Ok(status::PROBLEMS)
}

fn print_report(report: &crate::check::Report) {
    for f in &report.findings {
        let mark = if f.problem { "PROBLEM" } else { "ok" };
        println!("{:<10} {:<7} {}", f.area, mark, f.text);
    }
}
