//! Size bounds on what the gateway sends the client.
//!
//! Downstream servers write much of what the model reads: tool descriptions, error messages,
//! stderr lines quoted into a status. The official stdio client drops the whole connection on a
//! message over 10 MiB (its read buffer), so one 20 MiB description would end the session. Each
//! text field the gateway builds is cut to `FIELD_BYTES` with a marker; `execute_tool` results
//! are bounded by `maxResultBytes` in the engine; and the transport replaces any message over
//! `MAX_MESSAGE_BYTES` with an error for its id as a last resort. A request a downstream server
//! has forwarded to the client is refused to that server over `FORWARDED_REQUEST_BYTES`.

use std::borrow::Cow;

use serde_json::Value;

/// Cap on one text field of an answer the gateway builds (descriptions, messages, statuses).
pub(crate) const FIELD_BYTES: usize = 8 * 1024;

/// Cap on one message toward the client: below the official client's 10 MiB read buffer,
/// with room for what else is buffered beside it.
pub(crate) const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Cap on one request a downstream server has the gateway forward to the client (elicitation,
/// sampling): half a message, so the envelope never takes it over [`MAX_MESSAGE_BYTES`], where
/// the transport would have to drop it and the server would wait out its call's timeout.
pub(crate) const FORWARDED_REQUEST_BYTES: usize = MAX_MESSAGE_BYTES / 2;

/// `text` cut to at most `max` bytes (on a character boundary) plus a marker saying so.
pub(crate) fn cut_text(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}… [anygpt-discovery: cut at {max} of {} bytes]",
        &text[..end],
        text.len()
    ))
}

/// Cut every string inside `value` to `max` bytes.
pub(crate) fn bound_strings(value: &mut Value, max: usize) {
    match value {
        Value::String(text) => {
            if let Cow::Owned(cut) = cut_text(text, max) {
                *text = cut;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| bound_strings(item, max)),
        Value::Object(fields) => fields.values_mut().for_each(|field| bound_strings(field, max)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_text_is_untouched() {
        assert!(matches!(cut_text("abc", 3), Cow::Borrowed("abc")));
    }

    #[test]
    fn long_text_is_cut_on_a_char_boundary_with_a_marker() {
        let cut = cut_text("ééé", 3);
        assert_eq!(cut, "é… [anygpt-discovery: cut at 3 of 6 bytes]");
    }

    #[test]
    fn nested_strings_are_bounded() {
        let mut value = json!({ "a": ["x".repeat(100), { "b": "y".repeat(100) }], "n": 1 });
        bound_strings(&mut value, 10);
        assert!(value["a"][0]
            .as_str()
            .unwrap()
            .starts_with("xxxxxxxxxx… [anygpt-discovery: cut at 10 of 100"));
        assert!(value["a"][1]["b"].as_str().unwrap().contains("cut at 10 of 100"));
        assert_eq!(value["n"], 1);
    }
}
