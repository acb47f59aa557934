//! The top level of a JSON-RPC line that serde cannot parse (invalid, nested too deep, or only
//! partly kept because it was too long): its `id`, and which members it has.
//!
//! Both directions need it: the gateway answers a malformed client request for its id, and
//! upstream fails our own request when a server's answer to it cannot be read. The walk skips
//! every value by brackets and string quotes alone (no recursion, no number or escape checks),
//! so depth and size cost nothing but one pass.

use serde_json::Value;

/// What the walk found at the top level of a line.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TopLevel {
    /// The first `"id"` member, when it is a valid JSON string or number.
    pub id: Option<Value>,
    /// A `"method"` member was seen (a request or notification, not an answer).
    pub method: bool,
    /// A `"result"` or `"error"` member was seen (an answer).
    pub answer: bool,
    /// An `"id"` member was seen (valid or not: only the first counts).
    id_seen: bool,
}

/// Walk the outer object of `line` from its start, as far as it reads.
pub(crate) fn scan(line: &[u8]) -> TopLevel {
    let mut found = TopLevel::default();
    let mut at = skip_ws(line, 0);
    if line.get(at) != Some(&b'{') {
        return found;
    }
    at += 1;
    while let Some((key, value, end)) = member(line, at) {
        // A value cut off by the end of what was kept still says what kind of message this is.
        let Some(end) = end else {
            note(&mut found, key, &[]);
            break;
        };
        note(&mut found, key, &line[value..end]);
        at = skip_ws(line, end);
        if line.get(at) != Some(&b',') {
            break;
        }
        at += 1;
    }
    found
}

/// The top-level `"id"` of a line known only by its last bytes (`tail`, ending where the
/// line ends): the last `"id":` member after which the rest reads as the end of the outer
/// object (further members, then `}`). A server that writes `{"result":…,"jsonrpc":"2.0",
/// "id":5}` — the official TypeScript SDK's order — puts its id there.
pub(crate) fn id_at_end(tail: &[u8]) -> Option<Value> {
    let tail = tail.trim_ascii_end();
    let mut search_end = tail.len();
    while let Some(start) = find_last(&tail[..search_end], b"\"id\"") {
        search_end = start;
        let Some((key, value, Some(end))) = member(tail, start) else {
            continue;
        };
        if key != b"id" || !closes_object(tail, end) {
            continue;
        }
        let mut found = TopLevel::default();
        note(&mut found, key, &tail[value..end]);
        if found.id.is_some() {
            return found.id;
        }
    }
    None
}

/// Whether `line` (the first bytes of one) is an answer whose `result` is an object with a
/// `tools` member at its top level, before the bytes end: a page of `tools/list`.
pub(crate) fn is_tools_page(line: &[u8]) -> bool {
    let at = skip_ws(line, 0);
    if line.get(at) != Some(&b'{') {
        return false;
    }
    let mut tools = false;
    let mut method = false;
    each_member(line, at + 1, |key, value| match key {
        b"method" => method = true,
        b"result" if line.get(value) == Some(&b'{') => {
            each_member(line, value + 1, |key, _| tools |= key == b"tools");
        }
        _ => {}
    });
    tools && !method
}

/// Call `f` with each `"key": value` member (the key, where its value starts) of the object
/// whose members start at `at`, as far as they read.
fn each_member(line: &[u8], mut at: usize, mut f: impl FnMut(&[u8], usize)) {
    while let Some((key, value, end)) = member(line, at) {
        f(key, value);
        let Some(end) = end else { return };
        at = skip_ws(line, end);
        if line.get(at) != Some(&b',') {
            return;
        }
        at += 1;
    }
}

/// Whether the rest of `line` from `at` is `(, "key": value)*` then `}` and nothing more.
fn closes_object(line: &[u8], mut at: usize) -> bool {
    loop {
        at = skip_ws(line, at);
        match line.get(at) {
            Some(b'}') => return skip_ws(line, at + 1) == line.len(),
            Some(b',') => match member(line, at + 1) {
                Some((_, _, Some(end))) => at = end,
                _ => return false,
            },
            _ => return false,
        }
    }
}

fn note(found: &mut TopLevel, key: &[u8], value: &[u8]) {
    match key {
        b"id" if !found.id_seen => {
            found.id_seen = true;
            found.id = serde_json::from_slice::<Value>(value)
                .ok()
                .filter(|id| id.is_string() || id.is_number());
        }
        b"method" => found.method = true,
        b"result" | b"error" => found.answer = true,
        _ => {}
    }
}

/// One `"key": value` member starting (after whitespace) at `at`: the key's bytes, and where
/// its value starts and ends (`None`: it runs past the end of `line`).
fn member(line: &[u8], at: usize) -> Option<(&[u8], usize, Option<usize>)> {
    let at = skip_ws(line, at);
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let key_end = string_end(line, at)?;
    let key = &line[at + 1..key_end - 1];
    let at = skip_ws(line, key_end);
    if line.get(at) != Some(&b':') {
        return None;
    }
    let value = skip_ws(line, at + 1);
    Some((key, value, value_end(line, value)))
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|window| window == needle)
}

fn skip_ws(line: &[u8], mut at: usize) -> usize {
    while line.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The index after the closing quote of the string opening at `start`.
fn string_end(line: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    loop {
        match line.get(at)? {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
}

/// The index after the value starting at `start`.
fn value_end(line: &[u8], start: usize) -> Option<usize> {
    match line.get(start)? {
        b'"' => string_end(line, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            loop {
                match line.get(at)? {
                    b'"' => {
                        at = string_end(line, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let mut at = start;
            while line
                .get(at)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                at += 1;
            }
            (at > start).then_some(at)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_walk_finds_the_id_and_the_kind_of_message() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let answer = format!(r#"{{"result":{{"a":{deep}}},"jsonrpc":"2.0","id":"x\"y"}}"#);
        assert_eq!(
            scan(answer.as_bytes()),
            TopLevel {
                id: Some(json!("x\"y")),
                method: false,
                answer: true,
                id_seen: true,
            }
        );
        let request = r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"n":1e999}}"#;
        assert_eq!(
            scan(request.as_bytes()),
            TopLevel {
                id: Some(json!(3)),
                method: true,
                answer: false,
                id_seen: true,
            }
        );
        assert_eq!(scan(b"[1]"), TopLevel::default());
        assert_eq!(scan(br#"{"id":{},"result":1}"#).id, None, "an object is no id");
    }

    #[test]
    fn a_cut_line_keeps_what_was_read_before_the_cut() {
        let head = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"aaaa"#;
        let found = scan(head);
        assert_eq!((found.id, found.answer), (Some(json!(7)), true));
    }

    #[test]
    fn a_page_of_tools_is_told_from_its_first_bytes() {
        assert!(is_tools_page(br#"{"result":{"tools":[{"name":"a","inputSchema":{"#));
        assert!(is_tools_page(
            br#"{"jsonrpc":"2.0","id":1,"result":{"nextCursor":"x","tools":[{"#
        ));
        assert!(!is_tools_page(br#"{"result":{"content":[{"type":"text","text":"tools"#));
        assert!(!is_tools_page(br#"{"id":1,"method":"x","result":{"tools":[]}}"#));
        assert!(
            !is_tools_page(br#"{"result":{"a":{"tools":[]},"#),
            "only the result's own members"
        );
    }

    #[test]
    fn the_id_at_the_end_is_found_only_at_the_top_level() {
        assert_eq!(id_at_end(br#"aaaa"}]},"jsonrpc":"2.0","id":12}"#), Some(json!(12)));
        assert_eq!(
            id_at_end(b"aaa\"}]},\"id\" : \"k\" ,\"jsonrpc\":\"2.0\"}\r\n"),
            Some(json!("k"))
        );
        // An inner object's id, followed by more closing brackets, is not the line's.
        assert_eq!(id_at_end(br#"aaaa","id":3}]}}"#), None);
        // Inside a string, the text after it does not close the object.
        assert_eq!(id_at_end(br#"aaaa \"id\":4} more"}}"#), None);
        assert_eq!(id_at_end(b"no id here}"), None);
    }
}
