//! `nvs`: the command-line tool for nvs pools (create, put, get, ls, info, check, demo).
//! The commands live in `src/cli/`; this file only runs them and sets the exit code.

#[path = "../cli/mod.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
