//! `completions bash|zsh|fish|powershell|elvish`: a shell completion script on stdout, from
//! the same clap definition that parses the arguments (so it never lists a stale option).

use clap::Args;
use clap_complete::Shell;

use super::output::{self, exit};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    shell: Shell,
}

pub fn run(args: &CompletionsArgs, command: &mut clap::Command) -> i32 {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, command, "anygpt-discovery", &mut script);
    output::print(&String::from_utf8_lossy(&script));
    exit::OK
}
