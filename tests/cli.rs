//! The human CLI (`list`, `search`, `tools`, `inspect`, `execute`, `config …`, `completions`)
//! run as a user runs it: the built binary against the demo config (three reference servers
//! from npm), each command's human output and `--json` document snapshotted (insta; the
//! repository path normalised), and every exit status of the seed's table.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn demo() -> PathBuf {
    repo().join("examples/demo.config.json")
}

/// What one run printed and how it ended.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        assert_eq!(self.stdout.lines().count(), 1, "one JSON line: {}", self.stdout);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }
}

/// The binary with a scratch cache, state and home (nothing read from or written to the
/// user's), 80 columns, no colour forced, in the repository.
fn command(scratch: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_anygpt-discovery"));
    command
        .current_dir(repo())
        .env("ANYGPT_DISCOVERY_CACHE_DIR", scratch.join("cache"))
        .env("ANYGPT_DISCOVERY_STATE_DIR", scratch.join("state"))
        .env("HOME", scratch.join("home"))
        .env("XDG_CONFIG_HOME", scratch.join("home/.config"))
        .env("COLUMNS", "80")
        .env("ANYGPT_DEMO_MEMORY_FILE", scratch.join("memory.jsonl"))
        // Never the developer's OS keychain (and the same answers wherever one exists).
        .env("ANYGPT_DISCOVERY_TOKEN_STORE", "file")
        .env_remove("ANYGPT_DISCOVERY_CONFIG")
        .env_remove("ANYGPT_LOG")
        .env_remove("FORCE_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("NO_COLOR");
    command
}

fn run_with(args: &[&str], stdin: Option<&str>) -> Run {
    let scratch = tempfile::tempdir().unwrap();
    let mut command = command(scratch.path());
    command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = command.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        // A child may stop reading before the end (a capped input): not this test's failure.
        let _ = child.stdin.take().unwrap().write_all(text.as_bytes());
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: normalise(&String::from_utf8(out.stdout).unwrap()),
        stderr: normalise(&String::from_utf8(out.stderr).unwrap()),
    }
}

/// `args` on the demo config.
fn demo_run(args: &[&str]) -> Run {
    let config = demo();
    let mut all = vec!["--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    run_with(&all, None)
}

fn run(args: &[&str]) -> Run {
    run_with(args, None)
}

/// A JSON document as the snapshot shows it.
fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

fn normalise(text: &str) -> String {
    text.replace(repo().to_str().unwrap(), "[REPO]")
}

#[test]
fn list_shows_servers_tools_and_status() {
    let out = demo_run(&["list", "--status", "--tools"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("list_status_tools", out.stdout);
    // Logs below WARN stay silent; piped, there is no progress indicator.
    assert_eq!(out.stderr, "");
    let plain = demo_run(&["list"]);
    insta::assert_snapshot!("list", plain.stdout);
}

#[test]
fn list_json() {
    let out = demo_run(&["list", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("list_json", pretty(&out.json()));
}

#[test]
fn search_human_json_and_nothing_found() {
    let out = demo_run(&["search", "read a file", "--limit", "3"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("search", out.stdout);
    // Global options after the subcommand too.
    let json = run(&[
        "search",
        "echo",
        "--json",
        "--limit",
        "2",
        "--config",
        demo().to_str().unwrap(),
    ]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    insta::assert_snapshot!("search_json", pretty(&json.json()));
    let none = demo_run(&["search", "zzqqxx"]);
    assert_eq!(none.code, 2);
    insta::assert_snapshot!("search_none", none.stdout);
    let bad = demo_run(&["search", "x", "--limit", "0"]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(bad.stderr.contains("0 is not in 1..=100"), "{}", bad.stderr);
}

#[test]
fn tools_of_a_server() {
    let out = demo_run(&["tools", "filesystem", "--all", "--tags"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("tools_all_tags", out.stdout);
    let enabled = demo_run(&["tools", "memory", "--json"]);
    assert_eq!(enabled.code, 0);
    insta::assert_snapshot!("tools_json", pretty(&enabled.json()));
    let unknown = demo_run(&["tools", "filesytem"]);
    assert_eq!(unknown.code, 2);
    insta::assert_snapshot!("tools_unknown_server", unknown.stderr);
}

#[test]
fn inspect_a_tool_with_examples() {
    let out = demo_run(&["inspect", "filesystem", "read_text_file", "--examples"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("inspect_examples", out.stdout);
    let json = demo_run(&["inspect", "everything", "echo", "--examples", "--json"]);
    assert_eq!(json.code, 0);
    insta::assert_snapshot!("inspect_json", pretty(&json.json()));
    let disabled = demo_run(&["inspect", "memory", "delete_entities"]);
    assert_eq!(disabled.code, 0);
    assert!(disabled.stdout.contains("Disabled by toolRules"), "{}", disabled.stdout);
    let missing = demo_run(&["inspect", "everything", "ecko"]);
    assert_eq!(missing.code, 2);
    insta::assert_snapshot!("inspect_unknown_tool", missing.stderr);
    assert_eq!(demo_run(&["inspect", "nope", "echo"]).code, 2);
}

#[test]
fn execute_succeeds_with_exit_0() {
    let out = demo_run(&["execute", "everything", "echo", "--args", r#"{"message":"hi"}"#]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("execute_ok", out.stdout);
    let json = demo_run(&[
        "execute",
        "everything",
        "echo",
        "--args",
        r#"{"message":"hi"}"#,
        "--json",
    ]);
    assert_eq!(json.code, 0);
    insta::assert_snapshot!("execute_json", pretty(&json.json()));
}

/// Whether `text` holds an escape sequence other than SGR colour codes (`ESC [ … m`), or a
/// control character a terminal acts on (a lone `\r`, backspace, bell, C1 CSI), or a bidi
/// control.
fn acts_on_a_terminal(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    chars.iter().enumerate().any(|(i, &c)| match c {
        '\u{1b}' => {
            let rest: String = chars[i + 1..].iter().take(12).collect();
            let sgr = rest.strip_prefix('[').is_some_and(|body| {
                let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'));
                end.is_some_and(|at| body[at..].starts_with('m'))
            });
            !sgr
        }
        '\r' => chars.get(i + 1) != Some(&'\n'),
        '\u{7}' | '\u{8}' | '\u{9b}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    })
}

/// What a server sends back is shown, not obeyed: a tool result holding escape sequences
/// (clear screen, window title, clipboard write, hyperlink), a carriage return that would
/// overwrite the line and a bidi override reaches the terminal as plain text; `--json` keeps
/// every character, the ones a terminal acts on as `\uXXXX`.
#[test]
fn tool_results_cannot_take_over_the_terminal() {
    let hostile = "a\u{1b}[2Jb\u{1b}]0;pwned\u{7}c\u{1b}]52;c;ZXZpbA==\u{7}d\u{1b}]8;;http://x\u{7}e\u{1b}]8;;\u{7}\rEVIL\u{202e}fed\u{9b}2J";
    let args = serde_json::json!({ "message": hostile }).to_string();
    let out = demo_run(&["execute", "everything", "echo", "--args", &args]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!acts_on_a_terminal(&out.stdout), "{:?}", out.stdout);
    assert!(out.stdout.contains("Echo: abcde\nEVILfed"), "{:?}", out.stdout);
    // Coloured output keeps its own colours and still drops the server's escapes.
    let scratch = tempfile::tempdir().unwrap();
    let config = demo();
    let coloured = command(scratch.path())
        .args([
            "--config",
            config.to_str().unwrap(),
            "execute",
            "everything",
            "echo",
            "--args",
            &args,
        ])
        .env("FORCE_COLOR", "1")
        .output()
        .unwrap();
    let coloured = String::from_utf8(coloured.stdout).unwrap();
    assert!(coloured.contains("\u{1b}[32m"), "{coloured:?}");
    assert!(!acts_on_a_terminal(&coloured), "{coloured:?}");

    let json = demo_run(&["execute", "everything", "echo", "--args", &args, "--json"]);
    assert!(!acts_on_a_terminal(&json.stdout), "{:?}", json.stdout);
    assert!(json.stdout.contains(r"\u009b"), "{}", json.stdout);
    assert_eq!(json.json()["result"]["content"][0]["text"], format!("Echo: {hostile}"));
}

/// A server's own error text (its stderr when it fails to start) is shown plain too.
#[test]
fn a_failing_servers_stderr_cannot_take_over_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("crash.json");
    let script = r"process.stderr.write('boom\x1b]0;pwned\x07 \x1b[2Jcleared\roverwritten\n'); process.exit(3)";
    let body = serde_json::json!({ "discovery": { "servers": [
        { "name": "crashy", "connection": { "command": "node", "args": ["-e", script] } }
    ] } });
    std::fs::write(&config, body.to_string()).unwrap();
    let out = run(&["--config", config.to_str().unwrap(), "list", "--status"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("boom"), "{}", out.stdout);
    assert!(!acts_on_a_terminal(&out.stdout), "{:?}", out.stdout);
    assert!(!acts_on_a_terminal(&out.stderr), "{:?}", out.stderr);
}

/// A command line clap refuses still gives `--json` readers one document on stdout, and
/// `execute --json` says `success: false` whatever went wrong, bad `--args` included.
#[test]
fn json_errors_for_a_refused_command_line_and_bad_args() {
    for args in [
        &["list", "--bogus", "--json"][..],
        &["--json", "list", "--log-level", "verbose"],
        &["--json", "tools"],
    ] {
        let out = run(args);
        assert_eq!(out.code, 1, "{args:?}");
        let body = out.json();
        assert_eq!(body["error"]["code"], "VALIDATION_ERROR", "{args:?}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid arguments: "),
            "{body}"
        );
        assert!(
            out.stderr.contains("Usage") || out.stderr.contains("--help"),
            "{}",
            out.stderr
        );
    }
    // Checked before any server starts: an empty query, a limit outside 1–100, a zero timeout.
    for args in [
        &["search", ""][..],
        &["search", "x", "--limit", "0"],
        &["search", "x", "--limit", "101"],
        &["execute", "a", "b", "--timeout", "0"],
    ] {
        let out = run(args);
        assert_eq!(out.code, 1, "{args:?}");
        assert!(out.stderr.starts_with("error: "), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("For more information, try '--help'"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // Without --json stdout stays empty.
    assert_eq!(run(&["list", "--bogus"]).stdout, "");
    let bad = demo_run(&["execute", "everything", "echo", "--args", "{bad", "--json"]);
    assert_eq!(bad.code, 1);
    assert_eq!(bad.json()["success"], false);
    assert_eq!(bad.json()["error"]["code"], "VALIDATION_ERROR");
    let folder = demo_run(&["execute", "everything", "echo", "--args-file", "examples", "--json"]);
    assert_eq!(folder.code, 1);
    assert!(folder.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--args-file examples: cannot read"));
}

/// `COLUMNS=20`: descriptions wrap to the width (a single word longer than it stays whole).
#[test]
fn a_narrow_terminal_gets_narrow_lines() {
    let scratch = tempfile::tempdir().unwrap();
    let config = demo();
    let out = command(scratch.path())
        .args(["--config", config.to_str().unwrap(), "tools", "filesystem"])
        .env("COLUMNS", "20")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let description_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(description_lines.len() > 11, "{stdout}");
    for line in description_lines {
        assert!(
            line.chars().count() <= 20 || !line.trim().contains(' '),
            "{line:?} is wider than 20 columns:\n{stdout}"
        );
    }
}

#[test]
fn execute_reads_arguments_from_stdin_and_files() {
    let config = demo();
    let config = config.to_str().unwrap();
    let stdin = run_with(
        &["--config", config, "execute", "everything", "echo", "-", "--json"],
        Some(r#"{"message":"from stdin"}"#),
    );
    assert_eq!(stdin.code, 0, "{}", stdin.stderr);
    assert_eq!(stdin.json()["result"]["content"][0]["text"], "Echo: from stdin");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("args.json");
    std::fs::write(&file, r#"{"message":"from a file"}"#).unwrap();
    let from_file = demo_run(&[
        "execute",
        "everything",
        "echo",
        "--args-file",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(from_file.json()["result"]["content"][0]["text"], "Echo: from a file");
}

/// Arguments larger than a server may read in one message (16 MiB) fail at once, naming where
/// they came from and the cap: an endless source (`/dev/zero`) is read one byte past the cap,
/// not until memory runs out.
#[test]
fn execute_arguments_are_capped_at_16_mib() {
    fn capped(run: &Run, from: &str) {
        assert_eq!(run.code, 1, "{}", run.stderr);
        let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(from), "{message}");
        assert!(message.contains("larger than 16 MiB"), "{message}");
    }
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let filler = "a".repeat(17 * 1024 * 1024);
    std::fs::write(&big, format!(r#"{{"message":"{filler}"}}"#)).unwrap();
    let big = big.to_str().unwrap();
    capped(
        &demo_run(&["execute", "everything", "echo", "--args-file", big, "--json"]),
        &format!("--args-file {big}"),
    );
    let config = demo();
    let stdin = run_with(
        &[
            "--config",
            config.to_str().unwrap(),
            "execute",
            "everything",
            "echo",
            "-",
            "--json",
        ],
        Some(&format!(r#"{{"message":"{filler}"}}"#)),
    );
    capped(&stdin, "stdin");
    // Without the cap this reads until memory runs out: bound it, and kill it past the bound.
    let scratch = tempfile::tempdir().unwrap();
    let mut zero = command(scratch.path())
        .args(["--config", config.to_str().unwrap(), "execute", "everything", "echo"])
        .args(["--args-file", "/dev/zero", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while zero.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            zero.kill().unwrap();
            panic!("--args-file /dev/zero still reading after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = zero.wait_with_output().unwrap();
    let zero = Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    capped(&zero, "--args-file /dev/zero");
}

#[test]
fn execute_invalid_arguments_exit_1() {
    let bad_json = demo_run(&["execute", "everything", "echo", "--args", r#"{"message":"#]);
    assert_eq!(bad_json.code, 1);
    insta::assert_snapshot!("execute_bad_json", bad_json.stderr);
    let schema = demo_run(&["execute", "everything", "echo", "--args", r#"{"message":5}"#]);
    assert_eq!(schema.code, 1);
    insta::assert_snapshot!("execute_schema_rejects", schema.stderr);
    let json = demo_run(&["execute", "everything", "echo", "--args", "{}", "--json"]);
    assert_eq!(json.code, 1);
    assert_eq!(json.json()["error"]["code"], "VALIDATION_ERROR");
    assert_eq!(json.json()["success"], false);
}

#[test]
fn execute_not_found_exit_2_with_suggestions() {
    let out = demo_run(&["execute", "everything", "ecko"]);
    assert_eq!(out.code, 2);
    insta::assert_snapshot!("execute_not_found", out.stderr);
    assert_eq!(demo_run(&["execute", "evrything", "echo"]).code, 2);
}

#[test]
fn execute_failure_exit_3_includes_the_servers_is_error() {
    let out = demo_run(&[
        "execute",
        "filesystem",
        "read_text_file",
        "--args",
        r#"{"path":"/etc/hostname"}"#,
    ]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    insta::assert_snapshot!("execute_is_error", out.stdout);
    let json = demo_run(&[
        "execute",
        "filesystem",
        "read_text_file",
        "--args",
        r#"{"path":"/etc/hostname"}"#,
        "--json",
    ]);
    assert_eq!(json.code, 3);
    assert_eq!(json.json()["success"], false);
    assert_eq!(json.json()["result"]["isError"], true);
}

#[test]
fn execute_timeout_exit_3() {
    let out = demo_run(&[
        "execute",
        "everything",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration":5,"steps":5}"#,
        "--timeout",
        "300",
    ]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("Code: TOOL_EXECUTION_TIMEOUT"), "{}", out.stderr);
}

#[test]
fn execute_disabled_by_tool_rules_exit_4() {
    let out = demo_run(&[
        "execute",
        "filesystem",
        "write_file",
        "--args",
        r#"{"path":"x","content":"y"}"#,
    ]);
    assert_eq!(out.code, 4);
    insta::assert_snapshot!("execute_disabled", out.stderr);
    assert!(!repo().join("examples/files/x").exists());
}

#[test]
fn execute_stream_prints_progress_as_it_arrives() {
    let out = demo_run(&[
        "execute",
        "everything",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration":1,"steps":3}"#,
        "--stream",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("progress ")).collect();
    assert_eq!(
        lines,
        ["progress 1/3", "progress 2/3", "progress 3/3"],
        "{}",
        out.stderr
    );
}

/// A config serving our fault server (`__test__/fixtures/fault-server.mjs`) as `slow`, which
/// appends each cancellation it sees to `events`.
fn fault_config(dir: &Path, events: &Path) -> PathBuf {
    let path = dir.join("fault.json");
    let server = repo().join("__test__/fixtures/fault-server.mjs");
    let text = serde_json::json!({ "discovery": { "servers": [
        { "name": "slow", "connection": { "command": "node",
          "args": [server.to_str().unwrap(), "--event-log", events.to_str().unwrap()] } }
    ]}});
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

/// A FIFO nobody writes to blocks whoever opens it: SIGTERM still ends the command at once.
#[cfg(unix)]
#[test]
fn sigterm_ends_an_execute_waiting_on_its_args_file() {
    let scratch = tempfile::tempdir().unwrap();
    let fifo = scratch.path().join("args.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let config = demo();
    let mut child = command(scratch.path())
        .args(["--config", config.to_str().unwrap()])
        .args(["execute", "everything", "echo", "--args-file", fifo.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let sent = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            panic!("still waiting on the FIFO 10 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
}

#[cfg(unix)]
#[test]
fn ctrl_c_cancels_the_call_downstream_and_exits_130() {
    let scratch = tempfile::tempdir().unwrap();
    let events = scratch.path().join("events.log");
    let config = fault_config(scratch.path(), &events);
    let mut child = command(scratch.path())
        .args(["--config", config.to_str().unwrap()])
        .args(["execute", "slow", "progress", "--stream"])
        .args(["--args", r#"{"steps":500,"intervalMs":20}"#])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("progress ") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "ended before any progress");
    }
    assert!(line.starts_with("progress 1/500 step 1"), "{line}");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let sent = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(sent.elapsed() < Duration::from_secs(5), "took {:?}", sent.elapsed());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("interrupted"), "{rest}");
    // The server saw `notifications/cancelled` for the call before its session closed.
    assert_eq!(
        std::fs::read_to_string(&events).unwrap_or_default(),
        "progress:cancelled\n"
    );
}

/// A config with an env reference, a literal secret and a header, for the masking tests.
fn secret_config(dir: &Path) -> PathBuf {
    let path = dir.join("secrets.json");
    let text = serde_json::json!({ "discovery": {
        "servers": [
            { "name": "gh", "connection": { "command": "node", "args": ["server.js", "--token=ghp_literalsecret1234567890"],
              "env": { "GITHUB_TOKEN": "${GITHUB_TOKEN}", "API_KEY": "sk-literal-value-0123456789" } } },
            { "name": "remote", "connection": { "type": "http", "url": "https://api.example.com/mcp?api_key=querysecret987",
              "headers": { "Authorization": "Bearer headersecret555" } } }
        ],
        "toolRules": [ { "pattern": ["*delete*"], "enabled": false, "tags": ["dangerous"] } ]
    }});
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

#[test]
fn config_show_masks_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let config = secret_config(dir.path());
    let config = config.to_str().unwrap();
    let human = run(&["config", "show", "--config", config]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    let json = run(&["config", "show", "--config", config, "--json"]);
    assert_eq!(json.code, 0);
    for text in [&human.stdout, &json.stdout] {
        for secret in [
            "ghp_literalsecret",
            "sk-literal-value",
            "querysecret987",
            "headersecret555",
        ] {
            assert!(!text.contains(secret), "{secret} leaked in\n{text}");
        }
        assert!(text.contains("${GITHUB_TOKEN}"), "{text}");
        assert!(text.contains("***"), "{text}");
    }
    insta::assert_snapshot!(
        "config_show_masked",
        human.stdout.replace(dir.path().to_str().unwrap(), "[TMP]")
    );
    assert_eq!(
        json.json()["discovery"]["servers"][0]["connection"]["env"]["API_KEY"],
        "***"
    );
}

#[test]
fn config_show_validate_sources_path_on_the_demo() {
    let show = demo_run(&["config", "show"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    insta::assert_snapshot!("config_show", show.stdout);
    let validate = demo_run(&["config", "validate"]);
    assert_eq!(validate.code, 0);
    insta::assert_snapshot!("config_validate", validate.stdout);
    let validate = demo_run(&["config", "validate", "--json"]);
    insta::assert_snapshot!("config_validate_json", pretty(&validate.json()));
    let path = demo_run(&["config", "path", "--json"]);
    assert_eq!(path.code, 0);
    insta::assert_snapshot!("config_path_json", pretty(&path.json()));
    let sources = demo_run(&["config", "sources", "--json"]);
    assert_eq!(sources.code, 0);
    assert_eq!(sources.json()["files"], serde_json::json!([]));
}

#[test]
fn zero_config_path_and_sources_name_every_place() {
    // The scratch home holds one Claude Desktop config, saved with a byte-order mark as
    // Notepad does, and a Cursor config that does not parse.
    let scratch = tempfile::tempdir().unwrap();
    let project = scratch.path().join("project");
    let claude = scratch.path().join("home/.config/Claude");
    let cursor = scratch.path().join("home/.cursor");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::create_dir_all(&cursor).unwrap();
    std::fs::write(
        claude.join("claude_desktop_config.json"),
        "\u{feff}{\"mcpServers\":{\"echoer\":{\"command\":\"node\",\"args\":[\"x.js\"]}}}",
    )
    .unwrap();
    std::fs::write(cursor.join("mcp.json"), "{\"mcpServers\": ").unwrap();
    let run_here = |args: &[&str]| {
        let out = command(scratch.path())
            .current_dir(&project)
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout)
            .unwrap()
            .replace(scratch.path().to_str().unwrap(), "[TMP]");
        (out.status.code().unwrap(), text)
    };
    let (code, path) = run_here(&["config", "path"]);
    assert_eq!(code, 0);
    insta::assert_snapshot!("config_path_zero", path);
    let (code, sources) = run_here(&["config", "sources", "--json"]);
    assert_eq!(code, 0);
    let sources: Value = serde_json::from_str(&sources).unwrap();
    let files_where = |key: &str| -> Vec<String> {
        sources["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f[key] == true)
            .map(|f| f["path"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        files_where("found"),
        [
            "[TMP]/home/.config/Claude/claude_desktop_config.json",
            "[TMP]/home/.cursor/mcp.json"
        ]
    );
    assert_eq!(
        files_where("read"),
        ["[TMP]/home/.config/Claude/claude_desktop_config.json"]
    );
    let (_, human) = run_here(&["config", "sources"]);
    assert!(
        human.contains("✓ [TMP]/home/.config/Claude/claude_desktop_config.json"),
        "{human}"
    );
    assert!(
        human.contains("✗ [TMP]/home/.cursor/mcp.json - skipped (see the warning below)"),
        "{human}"
    );
    assert!(human.contains("1 server (echoer)"), "{human}");
}

#[test]
fn an_empty_config_file_is_an_error_and_an_empty_anygpt_log_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "\n").unwrap();
    let out = run(&["config", "validate", "--config", empty.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("the file is empty"), "{}", out.stderr);
    let scratch = tempfile::tempdir().unwrap();
    let out = command(scratch.path())
        .env("ANYGPT_LOG", "")
        .args(["config", "path"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn configuration_errors_exit_2_and_bad_arguments_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"discovery":{"toolRules":[{"pattern":["/(/"]}]}}"#).unwrap();
    let bad = bad.to_str().unwrap();
    for command in [
        &["list"][..],
        &["config", "show"],
        &["config", "validate"],
        &["search", "x"],
    ] {
        let mut args = command.to_vec();
        args.extend(["--config", bad]);
        let out = run(&args);
        assert_eq!(out.code, 2, "{command:?}: {}", out.stderr);
        assert!(
            out.stderr
                .contains("discovery.toolRules[0].pattern[0]: invalid pattern"),
            "{}",
            out.stderr
        );
    }
    let json = run(&["config", "validate", "--json", "--config", bad]);
    assert_eq!(json.code, 2);
    assert_eq!(json.json()["valid"], false);
    assert_eq!(json.json()["error"]["code"], "CONFIGURATION_ERROR");
    // Bad arguments: an unknown flag, a missing argument, an invalid log level.
    assert_eq!(run(&["list", "--bogus"]).code, 1);
    assert_eq!(run(&["tools"]).code, 1);
    let level = run(&["list", "--log-level", "verbose"]);
    assert_eq!(level.code, 1);
    assert!(
        level.stderr.contains("`verbose` is neither a level"),
        "{}",
        level.stderr
    );
}

#[test]
fn config_validate_and_show_understand_caller_rules() {
    let dir = tempfile::tempdir().unwrap();
    let rule = |groups: &str| {
        format!(
            r#"{{"discovery":{{"toolRules":[{{"server":"github","pattern":"*","enabled":true,"callers":{{"groups":{groups}}}}}]}}}}"#
        )
    };
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, rule(r#"["admins", "/(/"]"#)).unwrap();
    let out = run(&["config", "validate", "--config", bad.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("discovery.toolRules[0].callers.groups[1]: invalid pattern"),
        "{}",
        out.stderr
    );
    let good = dir.path().join("good.json");
    std::fs::write(&good, rule(r#"["admins"]"#)).unwrap();
    let good = good.to_str().unwrap();
    assert_eq!(run(&["config", "validate", "--config", good]).code, 0);
    let show = run(&["config", "show", "--config", good]);
    assert!(
        show.stdout.contains("1. github: * → enabled for groups [admins]"),
        "{}",
        show.stdout
    );
}

#[test]
fn help_has_examples_and_version_prints() {
    let help = run(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(
        help.stdout.contains("Examples:\n  anygpt-discovery "),
        "{}",
        help.stdout
    );
    assert!(help.stdout.contains("Exit codes: 0 ok"), "{}", help.stdout);
    // Every help text fits 80 columns (piped, no terminal to ask; COLUMNS unset).
    let scratch = tempfile::tempdir().unwrap();
    for command_line in [
        &[][..],
        &["list"],
        &["search"],
        &["tools"],
        &["inspect"],
        &["execute"],
        &["config"],
        &["config", "show"],
        &["trust"],
        &["completions"],
        &["setup"],
        &["restore"],
        &["secret"],
        &["secret", "set"],
        &["add"],
        &["remove"],
        &["registry", "search"],
    ] {
        let out = command(scratch.path())
            .args(command_line)
            .arg("--help")
            .env_remove("COLUMNS")
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Usage:"), "{command_line:?}: {text}");
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "{command_line:?} --help: {} columns: {line}",
                line.chars().count()
            );
        }
    }
    let version = run(&["--version"]);
    assert_eq!(
        version.stdout,
        format!("anygpt-discovery {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[cfg(unix)]
#[test]
fn bash_completions_load_in_bash() {
    let bin = env!("CARGO_BIN_EXE_anygpt-discovery");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source <('{bin}' completions bash) && complete -p anygpt-discovery"
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("anygpt-discovery"));
    for shell in ["zsh", "fish", "powershell"] {
        let out = run(&["completions", shell]);
        assert_eq!(out.code, 0);
        assert!(out.stdout.contains("anygpt-discovery"), "{shell}");
        // `setup`/`restore` are completed (zsh: with the clients they take).
        let words: &[&str] = if shell == "zsh" {
            &["setup", "restore", "claude-desktop", "windsurf"]
        } else {
            &["setup", "restore"]
        };
        for word in words {
            assert!(out.stdout.contains(word), "{shell}: {word}");
        }
    }
}

/// Runs `args` under a pseudo-terminal (`script`, util-linux) and returns everything the
/// terminal showed.
#[cfg(target_os = "linux")]
fn on_a_terminal(args: &[&str], env: &[(&str, &str)]) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_anygpt-discovery");
    let line = std::iter::once(bin)
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut script = Command::new("script");
    script
        .current_dir(repo())
        .env("ANYGPT_DISCOVERY_CACHE_DIR", scratch.path().join("cache"))
        .env("ANYGPT_DISCOVERY_STATE_DIR", scratch.path().join("state"))
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("FORCE_COLOR")
        .env_remove("COLUMNS");
    for (k, v) in env {
        script.env(k, v);
    }
    let out = script
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `text` holds the progress indicator's closing line for `server`: `<name> <N> tools`
/// (the count is the reference server's, which its releases change).
fn ends_server_line(text: &str, server: &str) -> bool {
    text.match_indices(&format!("{server} ")).any(|(at, found)| {
        let rest = &text[at + found.len()..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(" tools")
    })
}

#[cfg(target_os = "linux")]
#[test]
fn colours_and_progress_on_a_terminal_only() {
    let config = demo();
    let args = ["--config", config.to_str().unwrap(), "search", "echo", "--limit", "1"];
    let tty = on_a_terminal(&args, &[]);
    assert!(tty.contains("\u{1b}["), "no colour on a terminal:\n{tty:?}");
    // The indicator ends with one line per server.
    assert!(ends_server_line(&tty, "everything"), "{tty:?}");
    assert!(ends_server_line(&tty, "filesystem"), "{tty:?}");

    let no_color = on_a_terminal(&args, &[("NO_COLOR", "1")]);
    assert!(!no_color.contains('\u{1b}'), "{no_color:?}");
    assert!(!ends_server_line(&no_color, "everything"), "{no_color:?}");
    assert!(no_color.contains("1. everything:echo"), "{no_color:?}");

    // FORCE_COLOR=0 and CLICOLOR=0 mean plain on a terminal too (the spinner may still draw).
    for plain in [("FORCE_COLOR", "0"), ("CLICOLOR", "0")] {
        let tty = on_a_terminal(&args, &[plain]);
        assert!(tty.contains("1. everything:echo"), "{plain:?}: {tty:?}");
        assert!(!has_colour(&tty), "{plain:?} coloured:\n{tty:?}");
    }

    // What execute prints while servers connect goes above the spinner, not into its line;
    // `-` on a terminal says it waits for the arguments.
    let execute = [
        "--config",
        config.to_str().unwrap(),
        "execute",
        "everything",
        "echo",
        "-",
    ];
    let tty = on_a_terminal(&execute, &[]);
    let at = tty.find("Executing:").unwrap_or_else(|| panic!("{tty:?}"));
    let before = tty[..at].trim_end_matches("\u{1b}[1m");
    assert!(
        before.is_empty() || before.ends_with('\n') || before.ends_with('\r') || before.ends_with("\u{1b}[2K"),
        "the header is written into the spinner's line: {tty:?}"
    );
    assert!(tty.contains("reading the arguments from stdin"), "{tty:?}");

    let piped = demo_run(&["search", "echo", "--limit", "1"]);
    assert!(!piped.stdout.contains('\u{1b}') && !piped.stderr.contains('\u{1b}'));
    assert!(!ends_server_line(&piped.stderr, "everything"), "{}", piped.stderr);

    let scratch = tempfile::tempdir().unwrap();
    let forced = command(scratch.path())
        .args(args)
        .env("FORCE_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&forced.stdout).contains("\u{1b}["),
        "FORCE_COLOR colours a pipe"
    );
}

/// Whether `text` holds an SGR colour or weight code (`ESC [ 1 m`, `ESC [ 32 m`, …).
fn has_colour(text: &str) -> bool {
    text.match_indices("\u{1b}[").any(|(at, _)| {
        let body = &text[at + 2..];
        let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'));
        end.is_some_and(|end| end > 0 && body[end..].starts_with('m'))
    })
}

/// Two servers of our fault fixture: `good`, and `other`, which records each start in
/// `starts` and fails every one (`--fail-starts`), as a broken or hanging server would keep
/// a command waiting and talking about it.
fn two_servers(dir: &Path, starts: &Path) -> PathBuf {
    let path = dir.join("two.json");
    let server = repo().join("__test__/fixtures/fault-server.mjs");
    let server = server.to_str().unwrap();
    let text = serde_json::json!({ "discovery": { "servers": [
        { "name": "good", "connection": { "command": "node", "args": [server] } },
        { "name": "other", "connection": { "command": "node",
          "args": [server, "--spawn-log", starts.to_str().unwrap(), "--fail-starts", "99"] } }
    ]}});
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

fn run_in(scratch: &Path, args: &[&str]) -> Run {
    let out = command(scratch).args(args).stdin(Stdio::null()).output().unwrap();
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: normalise(&String::from_utf8(out.stdout).unwrap()),
        stderr: normalise(&String::from_utf8(out.stderr).unwrap()),
    }
}

/// A command about one server starts that server only: the other is never spawned, waited
/// for or mentioned. `list` and a search of every server still start them all.
#[test]
fn a_command_about_one_server_starts_only_that_one() {
    let scratch = tempfile::tempdir().unwrap();
    let starts = scratch.path().join("other-starts.log");
    let config = two_servers(scratch.path(), &starts);
    let config = config.to_str().unwrap();
    for command in [
        &["tools", "good"][..],
        &["inspect", "good", "echo"],
        &["execute", "good", "echo", "--args", r#"{"message":"hi"}"#],
        &["search", "echo", "--server", "good"],
        &["trust", "good"],
        // A server that is not configured starts nothing, and still gets suggestions.
        &["tools", "goood"],
    ] {
        let mut args = vec!["--config", config];
        args.extend_from_slice(command);
        let out = run_in(scratch.path(), &args);
        let expected = if command[1] == "goood" { 2 } else { 0 };
        assert_eq!(out.code, expected, "{command:?}: {}", out.stderr);
        assert!(!out.stderr.contains("other"), "{command:?}: {}", out.stderr);
        assert!(!starts.exists(), "{command:?} started `other`");
    }
    // On a terminal the indicator reports the one server too.
    #[cfg(target_os = "linux")]
    {
        let tty = on_a_terminal(&["--config", config, "tools", "good"], &[]);
        assert!(ends_server_line(&tty, "good"), "{tty:?}");
        assert!(!tty.contains("other"), "{tty:?}");
        assert!(!starts.exists(), "`tools good` on a terminal started `other`");
    }
    let list = run_in(scratch.path(), &["--config", config, "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(starts.exists(), "`list` starts every server");
}

/// A server that failed is said to have failed, and why, once, without the "next attempt"
/// of a gateway that keeps running; the exit status is the one of a server that could not be
/// reached (3) for every command that needs it.
#[test]
fn a_failed_server_is_reported_once_without_a_retry_promise() {
    let scratch = tempfile::tempdir().unwrap();
    let starts = scratch.path().join("other-starts.log");
    let config = two_servers(scratch.path(), &starts);
    let config = config.to_str().unwrap();
    for command in [
        &["tools", "other"][..],
        &["inspect", "other", "echo"],
        &["execute", "other", "echo"],
        &["trust", "other"],
    ] {
        let mut args = vec!["--config", config];
        args.extend_from_slice(command);
        let out = run_in(scratch.path(), &args);
        assert_eq!(out.code, 3, "{command:?}: {}", out.stderr);
        assert!(!out.stderr.contains("next attempt"), "{command:?}: {}", out.stderr);
        assert!(!out.stderr.contains("WARN"), "{command:?}: {}", out.stderr);
        assert_eq!(
            out.stderr.matches("failing start").count(),
            1,
            "{command:?}: the reason, once: {}",
            out.stderr
        );
        args.push("--json");
        let json = run_in(scratch.path(), &args);
        assert_eq!(json.code, 3, "{command:?}");
        let body = json.json();
        // `execute`'s document is `{"success":false,"error":{…}}`, the others' `{"error":{…}}`.
        let error = &body["error"];
        assert_eq!(error["code"], "SERVER_CONNECTION_ERROR", "{body}");
        assert!(!error["message"].as_str().unwrap().contains("next attempt"), "{body}");
    }
    // Commands over every server: one line on stderr for the server that failed, with why.
    for command in [&["list"][..], &["search", "echo"]] {
        let mut args = vec!["--config", config];
        args.extend_from_slice(command);
        let out = run_in(scratch.path(), &args);
        assert_eq!(out.code, 0, "{command:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{command:?}: {}", out.stderr);
        assert!(
            out.stderr.starts_with("✗ other handshake failed") && out.stderr.contains("failing start"),
            "{command:?}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("next attempt"), "{}", out.stderr);
    }
    let status = run_in(scratch.path(), &["--config", config, "list", "--status", "--json"]);
    let servers = status.json()["servers"].as_array().unwrap().clone();
    let other = servers.iter().find(|s| s["name"] == "other").unwrap();
    assert_eq!(other["status"], "error");
    assert!(!other["error"].as_str().unwrap().contains("next attempt"), "{other}");
    // `--quiet`: errors only.
    let quiet = run_in(scratch.path(), &["--config", config, "list", "--quiet"]);
    assert_eq!(quiet.stderr, "");
}

/// `--catalog` names a file on the command line: a bad one is invalid input (exit 1,
/// `VALIDATION_ERROR`), not a configuration error.
#[test]
fn a_bad_catalog_is_invalid_input() {
    let scratch = tempfile::tempdir().unwrap();
    let broken = scratch.path().join("broken.jsonl");
    std::fs::write(&broken, "{\"server\":\"a\"\n").unwrap();
    let missing = scratch.path().join("missing.jsonl");
    for path in [&broken, &missing] {
        let path = path.to_str().unwrap();
        let out = run(&["--catalog", path, "search", "x"]);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr
                .starts_with("error: VALIDATION_ERROR: invalid arguments: --catalog "),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("hint: --catalog takes a JSON Lines file"),
            "{}",
            out.stderr
        );
        let json = run(&["--catalog", path, "search", "x", "--json"]);
        assert_eq!(json.code, 1);
        assert_eq!(json.json()["error"]["code"], "VALIDATION_ERROR");
    }
    let out = run(&["--catalog", missing.to_str().unwrap(), "search", "x"]);
    insta::assert_snapshot!(
        "catalog_missing",
        out.stderr.replace(scratch.path().to_str().unwrap(), "[TMP]")
    );
}

/// `--help --json` describes the command line as one JSON document (the program, or the
/// command asked about); `--version --json` too.
#[test]
fn help_and_version_as_json() {
    let out = run(&["--help", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let help = out.json();
    assert_eq!(help["name"], "anygpt-discovery");
    assert_eq!(help["version"], env!("CARGO_PKG_VERSION"));
    let names: Vec<&str> = help["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in [
        "serve",
        "list",
        "search",
        "tools",
        "inspect",
        "execute",
        "config",
        "trust",
        "completions",
        "auth",
        "setup",
        "restore",
        "secret",
        "add",
        "remove",
        "registry",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let globals: Vec<&str> = help["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["global"] == true)
        .map(|o| o["long"].as_str().unwrap())
        .collect();
    assert!(
        globals.contains(&"--json") && globals.contains(&"--config"),
        "{globals:?}"
    );
    // One command, flags before or after it, as `help tools` too.
    for args in [
        &["tools", "--help", "--json"][..],
        &["--json", "tools", "--help"],
        &["--json", "help", "tools"],
    ] {
        let tools = run(args);
        assert_eq!(tools.code, 0, "{args:?}: {}", tools.stderr);
        let tools = tools.json();
        assert_eq!(tools["path"], serde_json::json!(["tools"]), "{args:?}");
        insta::assert_snapshot!("help_tools_json", pretty(&tools));
    }
    let show = run(&["--config", "x.json", "config", "show", "--help", "--json"]).json();
    assert_eq!(show["path"], serde_json::json!(["config", "show"]));
    let version = run(&["--version", "--json"]);
    assert_eq!(
        version.json(),
        serde_json::json!({"name": "anygpt-discovery", "version": env!("CARGO_PKG_VERSION")})
    );
    // Without --json, the text as before.
    assert!(run(&["tools", "--help"]).stdout.starts_with("List one server's tools"));
}

/// `auth` prints through the output layer: text as before, one JSON document with `--json`,
/// errors with their code.
#[test]
fn auth_speaks_json_and_reports_errors_with_a_code() {
    let dir = tempfile::tempdir().unwrap();
    let config = secret_config(dir.path());
    let config = config.to_str().unwrap();
    let status = run(&["--config", config, "auth", "status"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert_eq!(
        status.stdout,
        "remote: not signed in (run `anygpt-discovery auth login remote` if it needs it)\n"
    );
    let json = run(&["--config", config, "auth", "status", "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    assert_eq!(
        json.json(),
        serde_json::json!({"servers": [{"server": "remote", "status": "signed-out"}]})
    );
    let logout = run(&["--config", config, "auth", "logout", "remote", "--json"]);
    assert_eq!(logout.code, 0, "{}", logout.stderr);
    assert_eq!(
        logout.json(),
        serde_json::json!({"server": "remote", "signedOut": false})
    );
    let unknown = run(&["--config", config, "auth", "logout", "nope"]);
    assert_eq!(unknown.code, 2);
    // (After the config's warning about the unset variable.)
    assert!(
        unknown
            .stderr
            .ends_with("\nerror: SERVER_NOT_FOUND: no server named `nope` in the config; http servers: remote\n"),
        "{}",
        unknown.stderr
    );
    let unknown = run(&["--config", config, "auth", "logout", "nope", "--json"]);
    assert_eq!(unknown.code, 2);
    assert_eq!(unknown.json()["error"]["code"], "SERVER_NOT_FOUND");
    // A stdio server cannot sign in: its config says so (2), not a bad argument.
    let stdio = run(&["--config", config, "auth", "login", "gh", "--json"]);
    assert_eq!(stdio.code, 2, "{}", stdio.stderr);
    assert_eq!(stdio.json()["error"]["code"], "CONFIGURATION_ERROR");
}

/// `setup` on a terminal shows the plan and asks; `n` writes nothing, `y` applies. Typed into a
/// pseudo-terminal (`script`, util-linux), as a person would.
#[cfg(target_os = "linux")]
#[test]
fn setup_asks_on_a_terminal_and_only_yes_applies() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let file = home.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // A server that cannot start: the plan's savings line labels it an estimate.
    let text = "{\n  // mine\n  \"mcpServers\": { \"gone\": { \"command\": \"/nonexistent/server\" } }\n}\n";
    std::fs::write(&file, text).unwrap();
    let answer = |typed: &str| {
        let line = format!("'{}' setup cursor", env!("CARGO_BIN_EXE_anygpt-discovery"));
        let mut script = Command::new("script");
        script
            .current_dir(scratch.path())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("ANYGPT_DISCOVERY_CACHE_DIR", scratch.path().join("cache"))
            .env("ANYGPT_DISCOVERY_STATE_DIR", scratch.path().join("state"))
            .env("ANYGPT_DISCOVERY_TOKEN_STORE", "file")
            .env("TERM", "xterm-256color")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = script.spawn().unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            // After the plan is on screen (the measurement gives up on the missing command fast).
            std::thread::sleep(std::time::Duration::from_secs(3));
            stdin.write_all(typed.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, screen) = answer("n\n");
    assert!(screen.contains("move behind the gateway (1): gone"), "{screen}");
    assert!(screen.contains("estimate for gone"), "{screen}");
    assert!(screen.contains("Apply these changes? [y/N]"), "{screen}");
    assert_eq!(code, Some(1), "{screen}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert!(!home.join(".anygpt").exists());
    let (code, screen) = answer("y\n");
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("done: wrote"), "{screen}");
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(after.starts_with("{\n  // mine\n"), "{after}");
    assert!(after.contains("\"anygpt-discovery\""), "{after}");
    assert!(!after.contains("/nonexistent/server"), "{after}");
}
