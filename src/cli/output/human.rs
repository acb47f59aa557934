//! Human output of each command, as the seed's examples show it (`✓ github (15 tools)`,
//! `1. github:create_issue (95% match)`, parameters with type, required and description).
//! Pure functions from a result to text, so each is tested without a terminal; colour comes
//! from the `Paint` passed in, the width from the caller.

use std::fmt::Write as _;

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use super::style::{wrap, Paint};
use crate::cli::examples::Example;
use crate::engine::{SearchResponse, ServerInfo, ServerStatus, ServerTools, ToolDetails};
use crate::error::{Error, ErrorCode};

/// Longest text shown for one content block of a tool result before it is cut (the full
/// result is in `--json`).
const MAX_SHOWN_TEXT: usize = 64 * 1024;

/// What to do next, per error code.
#[must_use]
pub fn hint(code: ErrorCode) -> Option<&'static str> {
    Some(match code {
        ErrorCode::ConfigurationError => {
            "fix the config at the place named; `anygpt-discovery config validate` checks it"
        }
        ErrorCode::ServerNotFound => "`anygpt-discovery list` shows the configured servers",
        ErrorCode::ToolNotFound => "`anygpt-discovery tools <server>` lists its tools",
        ErrorCode::ToolDisabled => "a toolRules entry disables it; `anygpt-discovery config show` lists the rules",
        ErrorCode::ValidationError => "`anygpt-discovery inspect <server> <tool>` shows its parameters",
        ErrorCode::ServerConnectionError => "`anygpt-discovery list --status` shows each server's state",
        ErrorCode::ToolExecutionTimeout => "allow longer with --timeout MS or the server's timeoutMs",
        ErrorCode::RateLimited => {
            "the team's gateway allows this many calls (discovery.rateLimits); wait and run it again"
        }
        ErrorCode::ToolExecutionError | ErrorCode::ToolBlocked | ErrorCode::ToolNotConfirmed => return None,
    })
}

/// An error for stderr: `error: CODE: message`, then `did you mean: …` and `hint: …` lines
/// (`hint` is usually [`hint`] of the error's code).
#[must_use]
pub fn error(error: &Error, hint: Option<&str>, p: Paint) -> String {
    let message = error.to_string();
    let message = crate::engine::scrub_secrets(&message);
    failure(error.code(), &message, error.suggestions(), hint, p)
}

/// [`error`]'s lines for a failure given by its parts.
#[must_use]
pub fn failure(code: ErrorCode, message: &str, suggestions: &[String], hint: Option<&str>, p: Paint) -> String {
    let mut out = format!("{} {code}: {message}\n", p.bad("error:"));
    if !suggestions.is_empty() {
        let _ = writeln!(out, "did you mean: {}", suggestions.join(", "));
    }
    if let Some(hint) = hint {
        let _ = writeln!(out, "{} {hint}", p.dim("hint:"));
    }
    out
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

fn marker(ok: bool, p: Paint) -> String {
    if ok {
        p.ok("✓")
    } else {
        p.bad("✗")
    }
}

/// A server's marker: ✓ ready (connected, or served from its snapshot), ✗ failed or waiting
/// for a sign-in, … still starting (neither: it may yet fail).
fn server_marker(status: ServerStatus, p: Paint) -> String {
    match status {
        ServerStatus::Connecting => p.warn("…"),
        status => marker(!status.is_trouble(), p),
    }
}

/// Status word of `list --status`, capitalised as the seed shows it.
fn status_word(status: ServerStatus) -> &'static str {
    match status {
        ServerStatus::Connected => "Connected",
        ServerStatus::Idle => "Idle (tools from the cached snapshot; connects on first call)",
        ServerStatus::Connecting => "Connecting",
        ServerStatus::NeedsSignIn => "Needs sign-in",
        ServerStatus::Error => "Error",
    }
}

/// `list`.
#[must_use]
pub fn servers(servers: &[ServerInfo], show_status: bool, show_tools: bool, p: Paint, width: usize) -> String {
    let mut out = format!("{}\n", p.bold(&format!("MCP Servers ({} configured):", servers.len())));
    if servers.is_empty() {
        out.push_str("\nNo servers configured: `anygpt-discovery config path` shows where a config can go.\n");
    }
    for server in servers {
        let mut head = format!("{} {}", server_marker(server.status, p), p.name(&server.name));
        if show_tools {
            let disabled = server.tool_count - server.enabled_count;
            let _ = write!(head, " ({}", plural(server.tool_count, "tool"));
            if disabled > 0 {
                let _ = write!(head, ", {disabled} disabled");
            }
            head.push(')');
        }
        let _ = write!(out, "\n{head}\n");
        if let Some(description) = &server.description {
            out.push_str(&wrap(description, "  ", width));
        }
        if show_status {
            let _ = writeln!(out, "  Status: {}", status_word(server.status));
            if let Some(error) = &server.error {
                out.push_str(&wrap(&format!("Reason: {error}"), "  ", width));
            }
        }
        out.push_str(&left_out(server, width));
    }
    out
}

/// What a server's listing left out, whatever else is shown: it explains the tool count.
fn left_out(server: &ServerInfo, width: usize) -> String {
    let mut out = String::new();
    if let Some(cap) = server.tools_cut_at {
        let note = format!("Only the first {cap} tools are served: the server lists more.");
        out.push_str(&wrap(&note, "  ", width));
    }
    let count = server.dropped_count.unwrap_or(server.dropped_tools.len());
    if count > 0 {
        let _ = writeln!(out, "  Dropped {}:", plural(count, "tool"));
        for dropped in &server.dropped_tools {
            out.push_str(&wrap(&format!("{}: {}", dropped.name, dropped.reason), "    ", width));
        }
        if count > server.dropped_tools.len() {
            let _ = writeln!(out, "    … and {} more", count - server.dropped_tools.len());
        }
    }
    out
}

/// `search`.
#[must_use]
pub fn search(query: &str, response: &SearchResponse, p: Paint, width: usize) -> String {
    let mut out = String::new();
    let n = response.results.len();
    if n == 0 {
        let _ = writeln!(out, "No tools found for \"{query}\".");
    } else {
        let _ = writeln!(
            out,
            "{}",
            p.bold(&format!("Search results for \"{query}\" ({n} found):"))
        );
    }
    for (i, hit) in response.results.iter().enumerate() {
        let id = format!("{}:{}", hit.server, hit.tool);
        let _ = write!(
            out,
            "\n{}. {} ({:.0}% match)\n",
            i + 1,
            p.name(&id),
            hit.relevance * 100.0
        );
        if !hit.summary.is_empty() {
            out.push_str(&wrap(&hit.summary, "   ", width));
        }
        if !hit.tags.is_empty() {
            let _ = writeln!(out, "   Tags: {}", hit.tags.join(", "));
        }
    }
    if let Some(hint) = response.hint("no tool matches; try other words") {
        let _ = write!(out, "\n{} {hint}\n", p.dim("hint:"));
    }
    out
}

/// `tools`: `listed` are the tools to show; the header counts every tool of the server.
#[must_use]
pub fn tools(all: &ServerTools, include_disabled: bool, show_tags: bool, p: Paint, width: usize) -> String {
    let enabled = all.tools.iter().filter(|t| t.enabled).count();
    let disabled = all.tools.len() - enabled;
    let mut out = format!(
        "{}\n",
        p.bold(&format!(
            "Tools from {} ({enabled} enabled, {disabled} disabled):",
            all.server
        ))
    );
    for tool in all.tools.iter().filter(|t| include_disabled || t.enabled) {
        let mut head = format!("{} {}", marker(tool.enabled, p), p.name(&tool.name));
        if !tool.enabled {
            head.push_str(" (disabled)");
        }
        if !tool.flags.is_empty() {
            let _ = write!(head, " {}", p.warn(&format!("[flagged: {}]", tool.flags.join(", "))));
        }
        let _ = write!(out, "\n{head}\n");
        if !tool.summary.is_empty() {
            out.push_str(&wrap(&tool.summary, "  ", width));
        }
        if show_tags && !tool.tags.is_empty() {
            let _ = writeln!(out, "  Tags: {}", tool.tags.join(", "));
        }
    }
    if disabled > 0 && !include_disabled {
        let _ = write!(
            out,
            "\n{} --all shows the {} too\n",
            p.dim("hint:"),
            plural(disabled, "disabled tool")
        );
    }
    out
}

/// A parameter's type as the schema says it (`string`, `array of string`, `"a" | "b"`).
fn type_of(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.iter().map(Value::to_string).collect::<Vec<_>>().join(" | ");
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items") {
            Some(items) => format!("array of {}", type_of(items)),
            None => "array".to_owned(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | "),
        _ if schema.get("anyOf").or_else(|| schema.get("oneOf")).is_some() => "one of several".to_owned(),
        _ => "any".to_owned(),
    }
}

/// `inspect`.
#[must_use]
pub fn inspect(details: &ToolDetails, examples: Option<&[Example]>, p: Paint, width: usize) -> String {
    let mut out = format!(
        "{} {}\n",
        p.bold("Tool:"),
        p.name(&format!("{}:{}", details.server, details.tool))
    );
    if !details.enabled {
        let _ = writeln!(out, "{}", p.bad("Disabled by toolRules: execute refuses it (exit 4)"));
    }
    if !details.tags.is_empty() {
        let _ = writeln!(out, "Tags: {}", details.tags.join(", "));
    }
    let _ = write!(out, "\n{}\n", p.bold("Description:"));
    out.push_str(&wrap(
        if details.description.is_empty() {
            "(none)"
        } else {
            &details.description
        },
        "  ",
        width,
    ));
    parameters(&mut out, &details.input_schema, p, width);
    for (title, lines) in [
        ("Warnings:", &details.warnings),
        ("Changed since trusted:", &details.changed),
    ] {
        if !lines.is_empty() {
            let _ = write!(out, "\n{}\n", p.warn(title));
            for line in lines {
                out.push_str(&wrap(line, "  ", width));
            }
        }
    }
    if let Some(examples) = examples {
        let _ = write!(out, "\n{}\n", p.bold("Examples:"));
        for example in examples {
            example_lines(&mut out, details, example);
        }
    }
    out
}

fn parameters(out: &mut String, schema: &Value, p: Paint, width: usize) {
    let _ = write!(out, "\n{}\n", p.bold("Parameters:"));
    let properties = schema.get("properties").and_then(Value::as_object);
    let Some(properties) = properties.filter(|props| !props.is_empty()) else {
        out.push_str("  (none)\n");
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (i, (name, property)) in properties.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let need = if required.contains(&name.as_str()) {
            "required"
        } else {
            "optional"
        };
        let mut head = format!("  {} ({}, {need}", p.name(name), type_of(property));
        if let Some(default) = property.get("default") {
            let _ = write!(head, ", default {default}");
        }
        head.push(')');
        let _ = writeln!(out, "{head}");
        if let Some(description) = property.get("description").and_then(Value::as_str) {
            out.push_str(&wrap(description, "    ", width));
        }
    }
}

fn example_lines(out: &mut String, details: &ToolDetails, example: &Example) {
    let _ = writeln!(out, "  {}:", example.title);
    match example.arguments.as_object() {
        Some(map) if !map.is_empty() => {
            for (key, value) in map {
                let _ = writeln!(out, "    {key}: {value}");
            }
        }
        _ => out.push_str("    (no arguments)\n"),
    }
    let args = example.arguments.to_string().replace('\'', "'\\''");
    let _ = writeln!(
        out,
        "    $ anygpt-discovery execute {} {} --args '{args}'",
        details.server, details.tool
    );
}

/// `execute`: the header line, printed before the call.
#[must_use]
pub fn executing(server: &str, tool: &str, p: Paint) -> String {
    format!("{} {}\n\n", p.bold("Executing:"), p.name(&format!("{server}:{tool}")))
}

/// `execute`: the server's answer (its own `isError` shown as an error with its content).
#[must_use]
pub fn execute_result(result: &CallToolResult, p: Paint) -> String {
    let failed = result.is_error == Some(true);
    let mut out = if failed {
        format!("{} (the tool reported an error)\n\n", p.bad("✗ Error"))
    } else {
        format!("{}\n\n", p.ok("✓ Success"))
    };
    let _ = writeln!(out, "{}", p.bold("Result:"));
    let mut shown = 0;
    for block in &result.content {
        let text = content_text(block);
        shown += 1;
        out.push_str(&indent(&cut(&text), "  "));
    }
    if shown == 0 || (result.structured_content.is_some() && !has_text(result)) {
        match &result.structured_content {
            Some(value) => {
                let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
                out.push_str(&indent(&cut(&pretty), "  "));
            }
            None => out.push_str("  (no content)\n"),
        }
    }
    out
}

fn has_text(result: &CallToolResult) -> bool {
    result.content.iter().any(|b| matches!(b, ContentBlock::Text(_)))
}

fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image {}, {} base64 bytes]", image.mime_type, image.data.len()),
        ContentBlock::Audio(audio) => format!("[audio {}, {} base64 bytes]", audio.mime_type, audio.data.len()),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => format!("[resource {uri}]\n{text}"),
            ResourceContents::BlobResourceContents { uri, blob, .. } => {
                format!("[resource {uri}, {} base64 bytes]", blob.len())
            }
            // rmcp's enums are non-exhaustive: a later kind is shown as its JSON.
            other => serde_json::to_string(other).unwrap_or_default(),
        },
        ContentBlock::ResourceLink(link) => format!("[link {} {}]", link.name, link.uri),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn cut(text: &str) -> String {
    if text.len() <= MAX_SHOWN_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_SHOWN_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… ({} more bytes; --json shows all)",
        &text[..end],
        text.len() - end
    )
}

fn indent(text: &str, prefix: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if !line.is_empty() {
            out.push_str(prefix);
        }
        out.push_str(line);
        out.push('\n');
    }
    if text.is_empty() {
        out.push('\n');
    }
    out
}

/// `execute`: an engine error, in the seed's block form (stderr).
#[must_use]
pub fn execute_error(server: &str, tool: &str, error: &Error, p: Paint) -> String {
    let message = crate::engine::scrub_secrets(&error.to_string()).into_owned();
    let mut out = format!("{}\n\n", p.bad("✗ Error"));
    let _ = writeln!(out, "Code: {}", error.code());
    let _ = writeln!(out, "Message: {message}");
    let _ = writeln!(out, "Server: {server}");
    let _ = writeln!(out, "Tool: {tool}");
    if !error.suggestions().is_empty() {
        let _ = writeln!(out, "Did you mean: {}", error.suggestions().join(", "));
    }
    if let Some(hint) = hint(error.code()) {
        let _ = writeln!(out, "{} {hint}", p.dim("Hint:"));
    }
    out
}

/// One progress notification of `execute --stream`.
#[must_use]
pub fn progress(update: &crate::engine::ProgressUpdate, p: Paint) -> String {
    let at = match update.total {
        Some(total) => format!("{}/{}", update.progress, total),
        None => format!("{}", update.progress),
    };
    match &update.message {
        Some(message) => format!("{} {at} {message}\n", p.dim("progress")),
        None => format!("{} {at}\n", p.dim("progress")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SearchResult;

    const PLAIN: Paint = Paint { enabled: false };

    fn result(tool: &str, relevance: f64, tags: &[&str]) -> SearchResult {
        SearchResult {
            server: "github".into(),
            tool: tool.into(),
            summary: format!("{tool} summary"),
            relevance,
            tags: tags.iter().map(|&t| t.to_owned()).collect(),
            enabled: true,
        }
    }

    #[test]
    fn search_follows_the_seed_format() {
        let response = SearchResponse {
            results: vec![
                result("create_issue", 0.95, &["github", "issues"]),
                result("update_issue", 0.874, &[]),
            ],
            pending: None,
            query_cut: false,
            vectors_pending: None,
        };
        assert_eq!(
            search("github issue", &response, PLAIN, 80),
            "Search results for \"github issue\" (2 found):\n\n\
             1. github:create_issue (95% match)\n   create_issue summary\n   Tags: github, issues\n\n\
             2. github:update_issue (87% match)\n   update_issue summary\n"
        );
    }

    #[test]
    fn a_server_still_connecting_is_not_marked_ready() {
        let server = |name: &str, status: ServerStatus| ServerInfo::new(name, status, 0, None);
        let listed = servers(
            &[
                server("a", ServerStatus::Connected),
                server("b", ServerStatus::Connecting),
                server("c", ServerStatus::Error),
                ServerInfo::new(
                    "d",
                    ServerStatus::NeedsSignIn,
                    2,
                    Some("needs sign-in: run `auth login d`"),
                ),
            ],
            true,
            false,
            PLAIN,
            80,
        );
        assert_eq!(
            listed,
            "MCP Servers (4 configured):\n\n✓ a\n  Status: Connected\n\n… b\n  Status: Connecting\n\n✗ c\n  Status: Error\n\n\
             ✗ d\n  Status: Needs sign-in\n  Reason: needs sign-in: run `auth login d`\n"
        );
    }

    #[test]
    fn what_a_listing_left_out_is_listed_under_its_server() {
        let mut server = ServerInfo::new("big", ServerStatus::Connected, 10_000, None);
        server.note_left_out(crate::upstream::ListingNotes {
            dropped: vec![crate::upstream::DroppedTool {
                name: "t7".into(),
                reason: "its `inputSchema` is a string, not a JSON Schema object".into(),
            }],
            dropped_count: 3,
            cut_at: Some(10_000),
        });
        assert_eq!(
            servers(&[server], false, true, PLAIN, 80),
            "MCP Servers (1 configured):\n\n✓ big (10000 tools)\n  \
             Only the first 10000 tools are served: the server lists more.\n  \
             Dropped 3 tools:\n    \
             t7: its `inputSchema` is a string, not a JSON Schema object\n    \
             … and 2 more\n"
        );
    }

    #[test]
    fn no_results_say_so_with_the_hint() {
        let response = SearchResponse {
            results: vec![],
            pending: None,
            query_cut: false,
            vectors_pending: None,
        };
        assert_eq!(
            search("zzz", &response, PLAIN, 80),
            "No tools found for \"zzz\".\n\nhint: no tool matches; try other words\n"
        );
    }

    #[test]
    fn colour_wraps_names_in_escape_codes() {
        let response = SearchResponse {
            results: vec![result("x", 0.5, &[])],
            pending: None,
            query_cut: false,
            vectors_pending: None,
        };
        let coloured = search("x", &response, Paint { enabled: true }, 80);
        assert!(coloured.contains("\u{1b}["), "{coloured:?}");
        assert!(!search("x", &response, PLAIN, 80).contains('\u{1b}'));
    }

    #[test]
    fn results_show_text_media_and_structured_content() {
        use rmcp::model::ContentBlock;
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("line one\nline two"),
            ContentBlock::image("aGVsbG8=", "image/png"),
        ]);
        assert_eq!(
            execute_result(&result, PLAIN),
            "✓ Success\n\nResult:\n  line one\n  line two\n  [image image/png, 8 base64 bytes]\n"
        );
        result.content.clear();
        result.structured_content = Some(serde_json::json!({"sum": 5}));
        result.is_error = Some(true);
        assert_eq!(
            execute_result(&result, PLAIN),
            "✗ Error (the tool reported an error)\n\nResult:\n  {\n    \"sum\": 5\n  }\n"
        );
    }

    #[test]
    fn long_text_results_are_cut_with_a_pointer_to_json() {
        let long = "x".repeat(MAX_SHOWN_TEXT + 10);
        let shown = cut(&long);
        assert!(
            shown.ends_with("… (10 more bytes; --json shows all)"),
            "{}",
            &shown[shown.len() - 60..]
        );
    }

    #[test]
    fn types_read_from_schemas() {
        use serde_json::json;
        assert_eq!(type_of(&json!({"type": "string"})), "string");
        assert_eq!(
            type_of(&json!({"type": "array", "items": {"type": "number"}})),
            "array of number"
        );
        assert_eq!(type_of(&json!({"enum": ["a", "b"]})), "\"a\" | \"b\"");
        assert_eq!(type_of(&json!({"type": ["string", "null"]})), "string | null");
        assert_eq!(type_of(&json!({})), "any");
    }

    #[test]
    fn every_error_names_its_code_and_most_a_hint() {
        let error = Error::ToolNotFound {
            server: "github".into(),
            tool: "ceate".into(),
            suggestions: vec!["github:create".into()],
        };
        assert_eq!(
            super::error(&error, hint(error.code()), PLAIN),
            "error: TOOL_NOT_FOUND: server `github` has no tool named `ceate`\ndid you mean: github:create\nhint: `anygpt-discovery tools <server>` lists its tools\n"
        );
    }
}
