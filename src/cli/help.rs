//! `--help --json` and `--version --json`: the command line described as one JSON document,
//! for scripts that drive the CLI (the same data clap renders as text).
//!
//! `--help --json` describes the command the help was asked for (the whole program, or a
//! subcommand such as `tools`): `{name, version?, path, about, usage, arguments, options,
//! commands}`, each subcommand a node of the same shape (without the global options, which
//! the root and the asked-for command list, marked `global`).

use clap::{Arg, Command};
use serde::Serialize;

/// One command: its own arguments and options, and its subcommands.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    /// The words that lead to it, e.g. `["config", "show"]` (empty for the program).
    path: Vec<String>,
    about: String,
    usage: String,
    arguments: Vec<Argument>,
    options: Vec<Opt>,
    commands: Vec<Node>,
}

/// A positional argument.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Argument {
    name: String,
    required: bool,
    /// Whether it takes several values.
    many: bool,
    help: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    possible_values: Vec<String>,
}

/// An option or flag.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Opt {
    long: Option<String>,
    short: Option<String>,
    /// `FILE`, `JSON`…; absent for a flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    value_name: Option<String>,
    help: String,
    global: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    possible_values: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<String>,
    /// The environment variable it is also read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    env: Option<String>,
}

/// The document for `args` (the command line that asked for help): the node of the command
/// it names.
pub fn document(mut root: Command, args: &[String]) -> Node {
    root.build();
    let path = command_path(&root, args);
    let mut target = &mut root;
    for word in &path {
        target = target
            .find_subcommand_mut(word)
            .expect("command_path only follows existing subcommands");
    }
    let mut node = node(target, &path, true);
    if path.is_empty() {
        node.version = root.get_version().map(str::to_owned);
    }
    node
}

/// `--version --json`: `{name, version}`.
#[derive(Debug, Serialize)]
pub struct Version {
    name: String,
    version: String,
}

impl Version {
    #[must_use]
    pub fn of(root: &Command) -> Self {
        Self {
            name: root.get_name().to_owned(),
            version: root.get_version().unwrap_or_default().to_owned(),
        }
    }
}

/// The subcommand names `args` walks down (`tools`, `config show`), skipping option values
/// and a `help` word, up to a `--`.
fn command_path(root: &Command, args: &[String]) -> Vec<String> {
    let mut path = Vec::new();
    let mut current = root;
    let mut words = args.iter().skip(1).take_while(|a| *a != "--");
    while let Some(word) = words.next() {
        if let Some(long) = word.strip_prefix("--") {
            let takes_value = !long.contains('=')
                && current
                    .get_arguments()
                    .find(|a| a.get_long() == Some(long))
                    .is_some_and(|a| a.get_action().takes_values());
            if takes_value {
                words.next();
            }
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let last = shorts.chars().last();
            let takes_value = shorts.chars().count() == 1
                && current
                    .get_arguments()
                    .find(|a| a.get_short() == last)
                    .is_some_and(|a| a.get_action().takes_values());
            if takes_value {
                words.next();
            }
        } else if let Some(sub) = current.find_subcommand(word) {
            path.push(sub.get_name().to_owned());
            current = sub;
        }
        // Anything else is a positional value, or `help` (which clap describes as its own
        // subcommand when it is the first word: `help tools` shows `tools`).
    }
    if path.first().is_some_and(|w| w == "help") {
        // `help tools`: the help of the commands named after `help`.
        path.clear();
        let mut current = root;
        for word in args.iter().skip_while(|a| *a != "help").skip(1) {
            match current.find_subcommand(word) {
                Some(sub) => {
                    path.push(sub.get_name().to_owned());
                    current = sub;
                }
                None => break,
            }
        }
    }
    path
}

fn node(command: &mut Command, path: &[String], with_globals: bool) -> Node {
    let usage = command.render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage).to_owned();
    let shown = |a: &&Arg| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version");
    let arguments = command
        .get_positionals()
        .filter(shown)
        .map(|a| Argument {
            name: a.get_id().as_str().to_owned(),
            required: a.is_required_set(),
            many: a.get_num_args().is_some_and(|n| n.max_values() > 1),
            help: text(a.get_help()),
            possible_values: possible_values(a),
        })
        .collect();
    let options = command
        .get_opts()
        .chain(
            command
                .get_arguments()
                .filter(|a| !a.is_positional() && !a.get_action().takes_values()),
        )
        .filter(shown)
        .filter(|a| with_globals || !a.is_global_set())
        .map(option)
        .collect();
    let mut commands = Vec::new();
    let names: Vec<String> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| c.get_name().to_owned())
        .collect();
    for name in names {
        let sub = command.find_subcommand_mut(&name).expect("listed just above");
        let mut sub_path = path.to_vec();
        sub_path.push(name);
        commands.push(node(sub, &sub_path, false));
    }
    Node {
        name: command.get_name().to_owned(),
        version: None,
        path: path.to_vec(),
        about: text(command.get_about()),
        usage,
        arguments,
        options,
        commands,
    }
}

fn option(arg: &Arg) -> Opt {
    let takes_value = arg.get_action().takes_values();
    Opt {
        long: arg.get_long().map(|l| format!("--{l}")),
        short: arg.get_short().map(|s| format!("-{s}")),
        value_name: takes_value.then(|| {
            arg.get_value_names()
                .and_then(<[_]>::first)
                .map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string)
        }),
        help: text(arg.get_help()),
        global: arg.is_global_set(),
        possible_values: if takes_value { possible_values(arg) } else { Vec::new() },
        default: takes_value
            .then(|| {
                arg.get_default_values()
                    .first()
                    .map(|v| v.to_string_lossy().into_owned())
            })
            .flatten(),
        env: arg.get_env().map(|e| e.to_string_lossy().into_owned()),
    }
}

fn possible_values(arg: &Arg) -> Vec<String> {
    arg.get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect()
}

fn text(styled: Option<&clap::builder::StyledStr>) -> String {
    styled.map(ToString::to_string).unwrap_or_default()
}
