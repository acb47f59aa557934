//! A server's tool list as the gateway serves it, read tool by tool: one tool that is not a
//! valid MCP tool (no name, an `inputSchema` that is not an object, nested too deep) is
//! dropped with its reason instead of failing the whole server; a name listed twice is served
//! once (the first); past [`MAX_TOOLS`] nothing more is kept, or read. What was left out is
//! [`ListingNotes`], which the server's status shows.
//!
//! Both ways a page arrives go through here: as JSON text, tool by tool (`lines`, the stdio
//! transport, which sees the raw answer), and as rmcp's typed or untyped result (`client`,
//! every transport).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rmcp::model::{ListToolsResult, RequestId, Tool};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// Most tools one server may list; the first this many are served. Hundreds of times what
/// real servers have, and what keeps a hostile server's list from filling memory.
pub const MAX_TOOLS: usize = 10_000;
/// Longest tool name served, in characters: the MCP spec's limit.
const MAX_NAME_CHARS: usize = 128;
/// Deepest tool served, in nesting levels (the tool object is one). Real schemas stay under
/// twenty; a deeper one could not be read back from a snapshot or by clients with serde's
/// limit of 128 once wrapped in the messages that carry it.
const MAX_TOOL_DEPTH: usize = 64;
/// Most dropped tools a status names; the rest are counted.
const MAX_NAMED_DROPS: usize = 20;
/// How much of a dropped tool's name a status quotes: the server chose it.
const MAX_SHOWN_NAME_CHARS: usize = 64;

/// A tool the server listed that is not served, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedTool {
    /// Its name as listed (cut short, control characters replaced, secrets masked), or its
    /// place in the list (`#3`) when it has no usable name.
    pub name: String,
    pub reason: String,
}

impl DroppedTool {
    fn new(name: &str, reason: impl Into<String>) -> Self {
        Self {
            name: shown_name(name),
            reason: reason.into(),
        }
    }

    fn at(index: usize, reason: impl Into<String>) -> Self {
        Self {
            name: format!("#{}", index + 1),
            reason: reason.into(),
        }
    }
}

/// What a listing left out: what a server's status says about its tools besides their count.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListingNotes {
    /// The first [`MAX_NAMED_DROPS`] tools dropped, in list order.
    pub dropped: Vec<DroppedTool>,
    /// How many tools were dropped in all (named or not).
    pub dropped_count: usize,
    /// The server listed more than this many tools: the first this many are served, the rest
    /// were neither kept nor read.
    pub cut_at: Option<usize>,
}

impl ListingNotes {
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.dropped_count == 0 && self.cut_at.is_none()
    }

    fn drop_tool(&mut self, dropped: DroppedTool) {
        self.dropped_count += 1;
        if self.dropped.len() < MAX_NAMED_DROPS {
            self.dropped.push(dropped);
        }
    }
}

/// A server's tools as served, with what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub tools: Vec<Tool>,
    pub notes: ListingNotes,
}

/// What the transport left out of one page it read, before the listing sees it: the tools
/// that did not read as tools (the first [`MAX_NAMED_DROPS`] named, all counted), and whether
/// some were left unread (past the cap).
#[derive(Debug, Default)]
pub(super) struct PageRead {
    pub dropped: Vec<DroppedTool>,
    pub dropped_count: usize,
    pub unread: bool,
}

impl PageRead {
    fn drop_tool(&mut self, dropped: DroppedTool) {
        self.dropped_count += 1;
        if self.dropped.len() < MAX_NAMED_DROPS {
            self.dropped.push(dropped);
        }
    }
}

/// What the stdio transport left out of the `tools/list` pages it read, by request, until
/// the listing takes it.
pub(super) type PagesRead = Arc<Mutex<HashMap<RequestId, PageRead>>>;

/// Most pages kept for a listing to take: one abandoned (timed out) leaves its page behind,
/// so past this many the oldest are forgotten, which costs a listing its drop report only.
const MAX_KEPT_PAGES: usize = 64;

/// Keep what was left out of the page answering `request`.
pub(super) fn keep_page(pages: &PagesRead, request: RequestId, read: PageRead) {
    let mut pages = super::lock(pages);
    if pages.len() >= MAX_KEPT_PAGES {
        pages.clear();
    }
    pages.insert(request, read);
}

/// A `tools/list` result as JSON text, read tool by tool: one invalid tool (even one too
/// deep for serde to read, which would make the whole answer unreadable) is dropped alone,
/// and past [`MAX_TOOLS`] the rest of the page is skipped unread. `None` when it is not a
/// page of tools at all (rmcp reads it then).
pub(super) fn read_json_page(result: &str) -> Option<(ListToolsResult, PageRead)> {
    /// The page with each tool left as text: the skipping pass has no depth limit.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct RawPage<'a> {
        #[serde(borrow)]
        tools: Vec<&'a RawValue>,
        next_cursor: Option<String>,
    }
    let page: RawPage = serde_json::from_str(result).ok()?;
    let mut read = PageRead::default();
    let mut tools = Vec::new();
    for (index, text) in page.tools.iter().enumerate() {
        if tools.len() >= MAX_TOOLS {
            read.unread = true;
            break;
        }
        match tool_from_json(index, text.get()) {
            Ok(tool) => tools.push(tool),
            Err(dropped) => read.drop_tool(dropped),
        }
    }
    let mut result = ListToolsResult::with_all_items(tools);
    result.next_cursor = page.next_cursor;
    Some((result, read))
}

/// Builds a listing from pages, in order.
#[derive(Debug, Default)]
pub(super) struct ListingBuilder {
    listing: Listing,
    names: HashSet<String>,
    /// Names already reported as listed twice: a third copy is not news.
    repeated: HashSet<String>,
}

impl ListingBuilder {
    /// Whether the cap is reached: the caller stops reading.
    pub fn is_full(&self) -> bool {
        self.listing.tools.len() >= MAX_TOOLS
    }

    /// Take one tool, or the reason it could not be read.
    pub fn offer(&mut self, tool: Result<Tool, DroppedTool>) {
        match tool.and_then(check) {
            Ok(_) if self.is_full() => self.cut(),
            Ok(tool) if !self.names.insert(tool.name.to_string()) => {
                if self.repeated.insert(tool.name.to_string()) {
                    let dropped = DroppedTool::new(&tool.name, "listed again under the same name; the first is served");
                    self.listing.notes.drop_tool(dropped);
                }
            }
            Ok(tool) => self.listing.tools.push(tool),
            Err(dropped) => self.listing.notes.drop_tool(dropped),
        }
    }

    /// What a transport left out of one page.
    pub fn note_page(&mut self, page: PageRead) {
        let unnamed = page.dropped_count - page.dropped.len();
        for dropped in page.dropped {
            self.listing.notes.drop_tool(dropped);
        }
        self.listing.notes.dropped_count += unnamed;
        if page.unread {
            self.cut();
        }
    }

    /// The server has more tools than the cap.
    pub fn cut(&mut self) {
        self.listing.notes.cut_at = Some(MAX_TOOLS);
    }

    pub fn finish(self) -> Listing {
        self.listing
    }
}

/// One element of a page's `tools` array, as JSON text.
pub(super) fn tool_from_json(index: usize, text: &str) -> Result<Tool, DroppedTool> {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => tool_from_value(index, value),
        Err(error) if error.to_string().starts_with("recursion limit exceeded") => Err(DroppedTool::at(
            index,
            format!("nested deeper than 128 levels; the gateway serves tools nested at most {MAX_TOOL_DEPTH} levels"),
        )),
        Err(_) => Err(DroppedTool::at(index, "not valid JSON")),
    }
}

/// One element of a page's `tools` array.
pub(super) fn tool_from_value(index: usize, value: Value) -> Result<Tool, DroppedTool> {
    let Value::Object(object) = &value else {
        return Err(DroppedTool::at(index, "not a JSON object"));
    };
    let Some(name) = object.get("name").and_then(Value::as_str).map(str::to_owned) else {
        return Err(DroppedTool::at(index, "no `name` string"));
    };
    let at = |reason: String| DroppedTool::new(&name, reason);
    match object.get("inputSchema") {
        None => {
            return Err(at(
                "no `inputSchema` (every tool needs a JSON Schema object for its arguments)".into(),
            ))
        }
        Some(Value::Object(_)) => {}
        Some(other) => {
            return Err(at(format!(
                "its `inputSchema` is {}, not a JSON Schema object",
                crate::config::json_kind(other)
            )))
        }
    }
    let depth = depth(&value);
    if depth > MAX_TOOL_DEPTH {
        return Err(at(format!(
            "nested {depth} levels deep; the gateway serves tools nested at most {MAX_TOOL_DEPTH} levels"
        )));
    }
    serde_json::from_value::<Tool>(keep_unread_fields(value)).map_err(|error| {
        // serde's position is within this tool's text, which nobody sees: leave it out.
        let text = error.to_string();
        let text = text.split(" at line ").next().unwrap_or(&text);
        at(format!("does not read as an MCP tool: {text}"))
    })
}

/// Where a tool keeps the fields of its definition that rmcp's `Tool` does not model (as
/// `execution`, MCP 2025-11-25): inside its `_meta`, the one open slot of that type, so they
/// travel with the tool through the catalog and snapshots. Only [`as_listed`] reads them.
const UNREAD_FIELDS_KEY: &str = "anygpt.dev/unread-fields";

/// Top-level fields of a tool definition rmcp's `Tool` reads.
const MODELLED_FIELDS: [&str; 8] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "_meta",
];

/// `tool` with the fields rmcp's `Tool` would drop moved under [`UNREAD_FIELDS_KEY`] in its
/// `_meta`. A `_meta` that is not an object is left for rmcp to refuse.
fn keep_unread_fields(mut tool: Value) -> Value {
    let Value::Object(object) = &mut tool else {
        return tool;
    };
    let unread: serde_json::Map<String, Value> = object
        .keys()
        .filter(|key| !MODELLED_FIELDS.contains(&key.as_str()))
        .cloned()
        .collect::<Vec<_>>()
        .into_iter()
        .filter_map(|key| object.remove(&key).map(|value| (key, value)))
        .collect();
    if unread.is_empty() {
        return tool;
    }
    match object
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()))
    {
        Value::Object(meta) => {
            meta.insert(UNREAD_FIELDS_KEY.to_owned(), Value::Object(unread));
        }
        _ => return tool,
    }
    tool
}

/// `tool` as its server listed it: the fields rmcp does not model back at the top level
/// (after the others), `_meta` as the server sent it. What a client connected to the server
/// directly would load.
#[must_use]
pub fn as_listed(tool: &Tool) -> Value {
    let mut value = serde_json::to_value(tool).unwrap_or(Value::Null);
    let Value::Object(object) = &mut value else {
        return value;
    };
    let unread = match object.get_mut("_meta") {
        Some(Value::Object(meta)) => meta.remove(UNREAD_FIELDS_KEY),
        _ => None,
    };
    if matches!(object.get("_meta"), Some(Value::Object(meta)) if meta.is_empty()) {
        object.remove("_meta");
    }
    if let Some(Value::Object(unread)) = unread {
        for (key, field) in unread {
            object.entry(key).or_insert(field);
        }
    }
    value
}

/// The checks a tool that reads as one must pass too (whatever read it).
fn check(tool: Tool) -> Result<Tool, DroppedTool> {
    let name = &tool.name;
    if name.is_empty() {
        return Err(DroppedTool::new(name, "an empty name"));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(DroppedTool::new(
            name,
            format!("a name longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    // A line break or escape in a name would forge lines in logs and take over terminals.
    if name.chars().any(char::is_control) {
        return Err(DroppedTool::new(name, "control characters in its name"));
    }
    Ok(tool)
}

/// How deeply `value` nests (a scalar is 1). serde's parser already stopped at 128 levels,
/// so the recursion is bounded.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 1,
    }
}

/// A name a server chose, fit for a status line: short, without control characters, without
/// registered secrets.
fn shown_name(name: &str) -> String {
    let printable: String = name
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    let scrubbed = crate::secrets::scrub(&printable);
    crate::text::cut_chars(&scrubbed, MAX_SHOWN_NAME_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn snapshots_hold_as_many_tools_as_a_list_keeps() {
        assert_eq!(MAX_TOOLS, crate::catalog::MAX_SERVER_TOOLS);
    }

    fn tool(name: &str) -> Value {
        json!({ "name": name, "inputSchema": { "type": "object" } })
    }

    fn read(values: Vec<Value>) -> Listing {
        let mut builder = ListingBuilder::default();
        for (index, value) in values.into_iter().enumerate() {
            builder.offer(tool_from_value(index, value));
        }
        builder.finish()
    }

    #[test]
    fn fields_rmcp_does_not_model_travel_with_the_tool_and_come_back_as_listed() {
        let listed = json!({
            "name": "a",
            "inputSchema": { "type": "object" },
            "execution": { "taskSupport": "optional" },
            "_meta": { "vendor/x": 1 }
        });
        let tool = tool_from_value(0, listed.clone()).unwrap();
        assert_eq!(as_listed(&tool), listed);
        // Through a snapshot's JSON and back.
        let again: Tool = serde_json::from_value(serde_json::to_value(&tool).unwrap()).unwrap();
        assert_eq!(as_listed(&again), listed);
        // A tool with nothing unmodelled is unchanged, with no `_meta` added.
        let plain = tool_from_value(0, self::tool("b")).unwrap();
        assert!(plain.meta.is_none());
        assert_eq!(as_listed(&plain), self::tool("b"));
    }

    #[test]
    fn invalid_tools_are_dropped_with_their_reason_and_the_rest_served() {
        let deep = (0..70).fold(json!({}), |inner, _| json!({ "items": inner }));
        let listing = read(vec![
            tool("a"),
            json!({ "name": "schema_string", "inputSchema": "object" }),
            json!({ "name": "no_schema" }),
            json!({ "inputSchema": {} }),
            json!("not a tool"),
            json!({ "name": "deep", "inputSchema": deep }),
            json!({ "name": "line\nbreak", "inputSchema": {} }),
            json!({ "name": "", "inputSchema": {} }),
            json!({ "name": "x".repeat(129), "inputSchema": {} }),
            json!({ "name": "bad_annotations", "inputSchema": {}, "annotations": 5 }),
            tool("b"),
        ]);
        let names: Vec<&str> = listing.tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["a", "b"]);
        let dropped: Vec<(&str, &str)> = listing
            .notes
            .dropped
            .iter()
            .map(|d| (d.name.as_str(), d.reason.as_str()))
            .collect();
        assert_eq!(
            dropped[0],
            (
                "schema_string",
                "its `inputSchema` is a string, not a JSON Schema object"
            )
        );
        assert!(dropped[1].1.starts_with("no `inputSchema`"), "{dropped:?}");
        assert_eq!(dropped[2], ("#4", "no `name` string"));
        assert_eq!(dropped[3], ("#5", "not a JSON object"));
        assert_eq!(dropped[4].0, "deep");
        assert!(dropped[4].1.starts_with("nested 72 levels deep"), "{dropped:?}");
        assert_eq!(dropped[5], ("line\u{fffd}break", "control characters in its name"));
        assert_eq!(dropped[6], ("", "an empty name"));
        assert_eq!(
            dropped[7].0.chars().count(),
            MAX_SHOWN_NAME_CHARS + 1,
            "cut with an ellipsis"
        );
        assert!(
            dropped[8].1.starts_with("does not read as an MCP tool: invalid type"),
            "{dropped:?}"
        );
        assert!(!dropped[8].1.contains("line"), "no position: {dropped:?}");
        assert_eq!(listing.notes.dropped_count, 9);
        assert_eq!(listing.notes.cut_at, None);
    }

    #[test]
    fn a_tool_too_deep_for_serde_is_dropped_by_its_place() {
        let deep = format!(r#"{{"name":"d","inputSchema":{}{}}}"#, "[".repeat(200), "]".repeat(200));
        let dropped = tool_from_json(2, &deep).unwrap_err();
        assert_eq!(dropped.name, "#3");
        assert!(dropped.reason.starts_with("nested deeper than 128 levels"));
        assert!(tool_from_json(0, r#"{"name":"ok","inputSchema":{"type":"object"}}"#).is_ok());
    }

    #[test]
    fn a_name_listed_twice_is_served_once_and_reported_once() {
        let listing = read(vec![
            json!({ "name": "same", "description": "first", "inputSchema": {} }),
            json!({ "name": "same", "description": "second", "inputSchema": {} }),
            json!({ "name": "same", "description": "third", "inputSchema": {} }),
            tool("other"),
        ]);
        assert_eq!(listing.tools.len(), 2);
        assert_eq!(listing.tools[0].description.as_deref(), Some("first"));
        assert_eq!(listing.notes.dropped_count, 1);
        assert_eq!(listing.notes.dropped[0].name, "same");
    }

    #[test]
    fn past_the_cap_the_first_are_served_and_the_cut_noted() {
        let mut builder = ListingBuilder::default();
        for i in 0..MAX_TOOLS + 5 {
            if builder.is_full() {
                builder.cut();
                break;
            }
            builder.offer(tool_from_value(i, tool(&format!("t{i}"))));
        }
        let listing = builder.finish();
        assert_eq!(listing.tools.len(), MAX_TOOLS);
        assert_eq!(listing.tools[0].name, "t0");
        assert_eq!(listing.notes.cut_at, Some(MAX_TOOLS));
        assert!(!listing.notes.is_empty());
    }

    #[test]
    fn a_page_of_text_keeps_twenty_drops_and_counts_the_rest() {
        let tools: Vec<String> = (0..30)
            .map(|i| format!(r#"{{"name":"t{i}","inputSchema":5}}"#))
            .collect();
        let page = format!(
            r#"{{"tools":[{},{{"name":"ok","inputSchema":{{}}}}]}}"#,
            tools.join(",")
        );
        let (result, read) = read_json_page(&page).unwrap();
        assert_eq!(result.tools.len(), 1);
        assert_eq!((read.dropped.len(), read.dropped_count), (MAX_NAMED_DROPS, 30));
        let mut builder = ListingBuilder::default();
        builder.note_page(read);
        let notes = builder.finish().notes;
        assert_eq!((notes.dropped.len(), notes.dropped_count), (MAX_NAMED_DROPS, 30));
    }

    #[test]
    fn at_most_twenty_drops_are_named_and_all_counted() {
        let listing = read((0..30).map(|_| json!(1)).collect());
        assert_eq!(listing.notes.dropped.len(), MAX_NAMED_DROPS);
        assert_eq!(listing.notes.dropped_count, 30);
    }
}
