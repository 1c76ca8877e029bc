//! The tools' command lines as data: the binaries parse them, and
//! `apir-completions` turns them into shell completions and man pages.

pub mod dis;
pub mod gen;
pub mod opt;

/// Every tool's command, by name.
pub fn commands() -> Vec<clap::Command> {
    use clap::CommandFactory;
    vec![
        opt::Args::command(),
        dis::Args::command(),
        gen::Args::command(),
    ]
}
