//! `apir-completions`: shell completions and man pages for the apir tools,
//! generated from their clap definitions (`apir_tools::cli`).

use apir_tools::{cli, write_output, EXIT_INPUT, EXIT_OK};
use clap::Parser;
use clap_complete::Shell;
use std::path::PathBuf;

/// Write shell completions or man pages for apir-opt, apir-dis and apir-gen.
#[derive(Parser, Debug)]
#[command(
    name = "apir-completions",
    version,
    after_help = "Examples:\n  mkdir -p ~/.local/share/bash-completion/completions && apir-completions --shell bash > ~/.local/share/bash-completion/completions/apir\n  mkdir -p ~/.zfunc && apir-completions --shell zsh --out-dir ~/.zfunc\n  mkdir -p ~/.local/share/man/man1 && apir-completions --man-dir ~/.local/share/man/man1\n\nExit codes: 0 success, 1 a file could not be written, 2 bad usage."
)]
struct Args {
    /// Completions for every tool for this shell: printed, or one file per
    /// tool in --out-dir (as zsh and fish want them).
    #[arg(long, value_enum, required_unless_present = "man_dir")]
    shell: Option<Shell>,
    /// With --shell: write one completion file per tool into this directory.
    #[arg(long, value_name = "DIR", requires = "shell")]
    out_dir: Option<PathBuf>,
    /// Write one man page per tool (`apir-opt.1`, ...) into this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "shell")]
    man_dir: Option<PathBuf>,
}

fn main() {
    apir_tools::cli_main("apir-completions", run)
}

fn run(args: Args) -> i32 {
    if let (Some(shell), Some(dir)) = (args.shell, &args.out_dir) {
        for mut cmd in cli::commands() {
            let name = cmd.get_name().to_string();
            if let Err(e) = clap_complete::generate_to(shell, &mut cmd, name, dir) {
                apir_tools::report!(
                    "error: cannot write completions into `{}`: {e}",
                    dir.display()
                );
                return EXIT_INPUT;
            }
        }
        return EXIT_OK;
    }
    if let Some(shell) = args.shell {
        let mut out = Vec::new();
        for mut cmd in cli::commands() {
            let name = cmd.get_name().to_string();
            clap_complete::generate(shell, &mut cmd, name, &mut out);
        }
        return match apir_tools::write_stdout(&out) {
            Ok(()) => EXIT_OK,
            Err(msg) => {
                apir_tools::report!("{msg}");
                EXIT_INPUT
            }
        };
    }
    let dir = args.man_dir.unwrap_or_else(|| PathBuf::from("."));
    for cmd in cli::commands() {
        let mut page = Vec::new();
        if let Err(e) = clap_mangen::Man::new(cmd.clone()).render(&mut page) {
            apir_tools::report!(
                "error: cannot render the man page of {}: {e}",
                cmd.get_name()
            );
            return EXIT_INPUT;
        }
        let path = dir.join(format!("{}.1", cmd.get_name()));
        if let Err(msg) = write_output(&path, &page) {
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
    }
    EXIT_OK
}
