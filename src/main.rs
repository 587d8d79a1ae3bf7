//! The `notevault` command line: parsed here, each subcommand handled in
//! `notevault::cmd`.

use std::process::ExitCode;

use clap::Parser;
use notevault::cli::{exit as status, Cli, Command};
use notevault::cmd;

fn main() -> ExitCode {
    notevault::memory::configure();
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            println!("{}", notevault::api::openapi::document_json());
            ExitCode::SUCCESS
        }
        Command::Serve(args) => exit(cmd::serve(args)),
        Command::Reindex(args) => exit(cmd::reindex(args)),
        Command::Token(command) => exit(cmd::token(command)),
        Command::LoginLink(store) => exit(cmd::login_link(store)),
        Command::Export(args) => exit(cmd::export(args)),
        Command::Completions(args) => cmd::completions(args),
        Command::Check(args) => match cmd::notevault_check(args) {
            Ok(code) => ExitCode::from(code),
            Err(e) => exit(Err(e)),
        },
        Command::Status(args) => exit(cmd::daemon_status(args)),
        Command::Search(args) => exit(cmd::search(args)),
        Command::Read(args) => exit(cmd::read(args)),
        Command::Ls(args) => exit(cmd::ls(args)),
        Command::Device(command) => exit(cmd::device(command)),
        Command::Db(command) => exit(cmd::db(command)),
        Command::Vault(command) => exit(cmd::vault(command)),
        Command::Import(args) => exit(cmd::import(args)),
        Command::Mcp(args) => exit(cmd::mcp(args)),
    }
}

fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("notevault: {e:#}");
            ExitCode::from(status::FAILURE)
        }
    }
}
