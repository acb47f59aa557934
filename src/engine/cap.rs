//! Capping oversized tool results: a model cannot read 10 MB, and a client may choke on it.
//!
//! Text is cut to fit the budget, binary blocks that do not fit are dropped, an oversized
//! `structuredContent` is dropped, and a text block says what was removed. Results within the
//! budget pass through untouched (DESIGN §5: no wrapping).

use rmcp::model::{CallToolResult, ContentBlock};

/// Cut `result` to about `max_bytes` of content. Returns whether anything was cut.
pub fn cap_result(result: &mut CallToolResult, max_bytes: usize) -> bool {
    let sizes: Vec<usize> = result.content.iter().map(block_size).collect();
    let structured = result.structured_content.as_ref().map_or(0, |v| v.to_string().len());
    let total = sizes.iter().sum::<usize>() + structured;
    if total <= max_bytes {
        return false;
    }
    let mut budget = max_bytes;
    let mut kept = Vec::with_capacity(result.content.len() + 1);
    for (mut block, size) in std::mem::take(&mut result.content).into_iter().zip(sizes) {
        if size <= budget {
            budget -= size;
            kept.push(block);
        } else if let ContentBlock::Text(text) = &mut block {
            truncate_at_char(&mut text.text, budget);
            budget = 0;
            kept.push(block);
        }
    }
    if structured > budget {
        result.structured_content = None;
    }
    kept.push(ContentBlock::text(format!(
        "[anygpt-discovery: result truncated: {total} bytes exceed maxResultBytes {max_bytes}]"
    )));
    result.content = kept;
    true
}

fn block_size(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(text) => text.text.len(),
        other => serde_json::to_string(other).map_or(0, |s| s.len()),
    }
}

fn truncate_at_char(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_of(block: &ContentBlock) -> &str {
        match block {
            ContentBlock::Text(t) => &t.text,
            _ => panic!("not text"),
        }
    }

    #[test]
    fn small_results_are_untouched() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("hello")]);
        let before = result.clone();
        assert!(!cap_result(&mut result, 100));
        assert_eq!(result, before);
    }

    #[test]
    fn large_text_is_cut_with_a_marker() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("x".repeat(1000))]);
        assert!(cap_result(&mut result, 100));
        assert_eq!(text_of(&result.content[0]).len(), 100);
        assert!(text_of(&result.content[1]).contains("1000 bytes exceed maxResultBytes 100"));
    }

    #[test]
    fn cuts_on_char_boundaries_and_drops_big_structured_content() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("é".repeat(100))]);
        result.structured_content = Some(json!({ "big": "y".repeat(500) }));
        assert!(cap_result(&mut result, 51));
        assert_eq!(text_of(&result.content[0]).len(), 50);
        assert!(result.structured_content.is_none());
    }

    #[test]
    fn binary_blocks_that_do_not_fit_are_dropped() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("small"),
            ContentBlock::image("A".repeat(1000), "image/png"),
        ]);
        assert!(cap_result(&mut result, 100));
        assert_eq!(result.content.len(), 2);
        assert_eq!(text_of(&result.content[0]), "small");
        assert!(text_of(&result.content[1]).starts_with("[anygpt-discovery: result truncated"));
    }
}
