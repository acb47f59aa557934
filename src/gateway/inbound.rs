//! Reading one line from the client: a message for rmcp, or the JSON-RPC error that line earns.
//!
//! rmcp's own stdio transport drops a line that is not valid JSON (a lone surrogate, `1e999`,
//! nesting past serde's 128 levels) without a word, and answers a well-formed line of the
//! wrong shape (a `tools/call` whose `params` is a string) with an error that carries no id:
//! either way the client waits out its timeout. Here such a line gets one error for its id,
//! recovered leniently when the JSON does not parse: -32700 when it is not JSON, -32600 when it
//! is not a request, -32602 when a known method has malformed `params`. A line whose id cannot
//! be recovered is answered without one (MCP's schema makes `id` optional on errors; JSON-RPC's
//! `null` would fail the official client's schema check). Notifications and responses are never
//! answered, as JSON-RPC says.
//!
//! The common case costs one typed parse, as in rmcp; everything else runs only on failure.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, CustomRequest, ErrorCode, JsonRpcRequest, RequestId};
use serde_json::{json, Value};

use super::bound::cut_text;

/// How much of a parser's message the client sees.
const DETAIL_BYTES: usize = 512;

/// What one line from the client is.
#[derive(Debug)]
pub(crate) enum Inbound {
    Message(Box<ClientJsonRpcMessage>),
    /// Nothing to deliver and nothing to answer (a malformed notification or response).
    Ignore,
    Reject(Rejection),
}

/// The error answer for a line that is not a usable message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejection {
    /// The line's id (a JSON string or number), when it could be recovered.
    pub id: Option<Value>,
    pub code: ErrorCode,
    pub message: String,
}

impl Rejection {
    /// The JSON-RPC error response, newline-terminated.
    pub fn to_line(&self) -> Vec<u8> {
        let mut body = json!({
            "jsonrpc": "2.0",
            "error": { "code": self.code.0, "message": self.message },
        });
        if let Some(id) = &self.id {
            body["id"] = id.clone();
        }
        let mut line = serde_json::to_vec(&body).expect("a JSON value serializes");
        line.push(b'\n');
        line
    }
}

/// Classify one line (without its newline).
pub(crate) fn parse(line: &[u8]) -> Inbound {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(ClientJsonRpcMessage::Request(JsonRpcRequest {
            id,
            request: ClientRequest::CustomRequest(custom),
            ..
        })) if is_standard_request(&custom.method) => Inbound::Reject(malformed_standard_request(&id, &custom)),
        Ok(message) => Inbound::Message(Box::new(message)),
        Err(typed) => match serde_json::from_slice::<Value>(line) {
            Ok(value) => wrong_shape(&value, &typed),
            Err(syntax) => Inbound::Reject(Rejection {
                id: lenient_id(line),
                code: ErrorCode::PARSE_ERROR,
                message: format!("parse error: {}", detail(&syntax)),
            }),
        },
    }
}

/// The answer for an oversized line, from the id found in its first bytes.
pub(crate) fn oversized(head: &[u8], max_bytes: usize) -> Rejection {
    Rejection {
        id: lenient_id(head),
        code: ErrorCode::INVALID_REQUEST,
        message: format!("message longer than {max_bytes} bytes; send smaller arguments"),
    }
}

/// rmcp reads requests as an untagged enum: a standard method whose params do not fit its
/// type falls through to `CustomRequest`, which the handler would answer "method not found".
fn malformed_standard_request(id: &RequestId, custom: &CustomRequest) -> Rejection {
    Rejection {
        id: serde_json::to_value(id).ok(),
        code: ErrorCode::INVALID_PARAMS,
        message: format!(
            "invalid params for `{}`: {}",
            custom.method,
            params_problem(&custom.method, custom.params.as_ref())
        ),
    }
}

/// The client-to-server requests of the MCP spec.
fn is_standard_request(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "logging/setLevel"
    )
}

/// Valid JSON that rmcp could not read as a client message.
fn wrong_shape(value: &Value, typed: &serde_json::Error) -> Inbound {
    let Some(object) = value.as_object() else {
        return Inbound::Reject(Rejection {
            id: None,
            code: ErrorCode::INVALID_REQUEST,
            message: "invalid request: a message is one JSON object (batches are not supported)".into(),
        });
    };
    let id = object.get("id");
    let method = object.get("method");
    if id.is_none() && method.is_some() {
        tracing::debug!(error = %typed, "ignoring a malformed notification");
        return Inbound::Ignore;
    }
    if method.is_none() && (object.contains_key("result") || object.contains_key("error")) {
        tracing::debug!(error = %typed, "ignoring a malformed response");
        return Inbound::Ignore;
    }
    let id = id.filter(|id| is_valid_id(id)).cloned();
    let invalid_request = |message: String| {
        Inbound::Reject(Rejection {
            id: id.clone(),
            code: ErrorCode::INVALID_REQUEST,
            message,
        })
    };
    if id.is_none() {
        return invalid_request("invalid request: `id` must be a string or an integer".into());
    }
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid_request("invalid request: `jsonrpc` must be \"2.0\"".into());
    }
    let Some(method) = method.and_then(Value::as_str) else {
        return invalid_request("invalid request: `method` must be a string".into());
    };
    // Unknown methods parse (rmcp answers them with method-not-found), so a known method's
    // params are what failed.
    Inbound::Reject(Rejection {
        id,
        code: ErrorCode::INVALID_PARAMS,
        message: format!(
            "invalid params for `{}`: {}",
            cut_text(method, 64),
            params_problem(method, object.get("params"))
        ),
    })
}

/// What is wrong with a standard method's params, in the protocol's words (serde's and rmcp's
/// messages name Rust types or say only "unrecognized").
fn params_problem(method: &str, params: Option<&Value>) -> String {
    match (method, params) {
        ("tools/call", Some(Value::Object(params))) => match (params.get("name"), params.get("arguments")) {
            (None, _) => "`params.name` is missing".into(),
            (Some(name), _) if !name.is_string() => "`params.name` must be a string".into(),
            (_, Some(arguments)) if !arguments.is_object() && !arguments.is_null() => {
                "`params.arguments` must be an object".into()
            }
            _ => "`params` do not match the schema of `tools/call`".into(),
        },
        ("tools/call", _) => "`params` must be an object with `name` and `arguments`".into(),
        (_, Some(params)) if !params.is_object() => "`params` must be an object".into(),
        _ => "`params` do not match the method's schema".into(),
    }
}

/// A JSON-RPC id this gateway echoes: a string or a number.
fn is_valid_id(id: &Value) -> bool {
    id.is_string() || id.is_number()
}

/// A parser message without its position and Rust type names, bounded.
fn detail(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let text = text.split(" at line ").next().unwrap_or(&text);
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    let mut skip_next = false;
    for word in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        match word {
            "struct" | "enum" => {
                out.push("a valid value");
                skip_next = true;
            }
            _ => out.push(word),
        }
    }
    cut_text(&out.join(" "), DETAIL_BYTES).into_owned()
}

/// The top-level `"id"` of a line that is not valid JSON, when it is a valid JSON string or
/// number (see [`crate::lenient_json`]).
pub(crate) fn lenient_id(line: &[u8]) -> Option<Value> {
    crate::lenient_json::scan(line).id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejection(line: &str) -> Rejection {
        match parse(line.as_bytes()) {
            Inbound::Reject(rejection) => rejection,
            other => panic!("expected a rejection for {line}, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_request_is_a_message() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert!(matches!(parse(line.as_bytes()), Inbound::Message(_)));
    }

    #[test]
    fn a_lone_surrogate_is_a_parse_error_for_its_id() {
        let r = rejection(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"\ud800"}}"#);
        assert_eq!((r.id, r.code), (Some(json!(7)), ErrorCode::PARSE_ERROR));
    }

    #[test]
    fn a_huge_number_is_a_parse_error_for_a_string_id() {
        let r = rejection(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"x":1e999},"id":"a\"b"}"#);
        assert_eq!((r.id, r.code), (Some(json!("a\"b")), ErrorCode::PARSE_ERROR));
    }

    #[test]
    fn deep_nesting_is_a_parse_error_for_its_id() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"arguments":{{"a":{deep}}}}}}}"#);
        let r = rejection(&line);
        assert_eq!((r.id, r.code), (Some(json!(3)), ErrorCode::PARSE_ERROR));
    }

    #[test]
    fn tools_call_with_string_params_is_invalid_params_for_its_id() {
        let r = rejection(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"x"}"#);
        assert_eq!((r.id.clone(), r.code), (Some(json!(4)), ErrorCode::INVALID_PARAMS));
        assert!(r.message.contains("`params` must be an object"), "{}", r.message);
    }

    #[test]
    fn tools_call_with_a_numeric_name_names_the_field() {
        let r = rejection(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}"#);
        assert_eq!(r.code, ErrorCode::INVALID_PARAMS);
        assert!(r.message.contains("`params.name` must be a string"), "{}", r.message);
    }

    #[test]
    fn other_methods_say_what_params_must_be_without_type_names() {
        let r = rejection(r#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":"x"}"#);
        assert_eq!(r.code, ErrorCode::INVALID_PARAMS);
        assert!(r.message.ends_with("`params` must be an object"), "{}", r.message);
        assert!(
            !r.message.contains("struct") && !r.message.contains("Params"),
            "{}",
            r.message
        );
    }

    #[test]
    fn unrecoverable_ids_are_answered_without_one() {
        for line in [
            r"not json",
            r#"{"id":1e999,"method":"x""#,
            "[1,2]",
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
        ] {
            assert_eq!(rejection(line).id, None, "{line}");
        }
    }

    #[test]
    fn malformed_notifications_and_responses_get_no_answer() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}"#),
            Inbound::Ignore
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"error":5}"#),
            Inbound::Ignore
        ));
    }

    #[test]
    fn the_error_line_is_one_json_rpc_error() {
        let line = Rejection {
            id: Some(json!(9)),
            code: ErrorCode::PARSE_ERROR,
            message: "m".into(),
        }
        .to_line();
        assert_eq!(
            line,
            b"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,\"message\":\"m\"},\"id\":9}\n"
        );
    }

    mod props {
        use proptest::prelude::*;
        use rmcp::model::{ClientJsonRpcMessage, JsonRpcRequest, NumberOrString};
        use serde_json::{json, Value};

        use super::super::{parse, Inbound};

        /// Fragments that break JSON in the ways clients do, mixed with ordinary tokens.
        fn junk() -> impl Strategy<Value = String> {
            let token = prop_oneof![
                Just(r"\ud800".to_owned()),
                Just(r#""\udfff""#.to_owned()),
                Just("1e999".to_owned()),
                Just("[".repeat(130)),
                Just("]".repeat(130)),
                Just(r#""name""#.to_owned()),
                Just(r#""arguments""#.to_owned()),
                "[\\[\\]{}\",:0-9a-z .eE+-]{0,12}",
                "\\PC{0,6}",
            ];
            prop::collection::vec(token, 0..8).prop_map(|parts| parts.concat())
        }

        fn id() -> impl Strategy<Value = Value> {
            prop_oneof![
                any::<i64>().prop_map(|n| json!(n)),
                "[a-z0-9]{1,8}".prop_map(|s| json!(s))
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Whatever the bytes, parsing classifies them without a panic.
            #[test]
            fn never_panics(line in prop::collection::vec(any::<u8>(), 0..256), text in junk()) {
                let _ = parse(&line);
                let _ = parse(text.as_bytes());
            }

            /// A request whose id comes before the damage gets exactly one outcome, about that id:
            /// it reaches rmcp with the id, or is answered for it.
            #[test]
            fn a_recoverable_id_is_always_answered(id in id(), params in junk(), close in any::<bool>()) {
                let line = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}{}"#,
                    if close { "}" } else { "" }
                );
                match parse(line.as_bytes()) {
                    Inbound::Reject(rejection) => prop_assert_eq!(rejection.id, Some(id)),
                    Inbound::Message(message) => {
                        let ClientJsonRpcMessage::Request(JsonRpcRequest { id: got, .. }) = *message else {
                            return Err(TestCaseError::fail(format!("not a request: {line}")));
                        };
                        let got = match got {
                            NumberOrString::Number(n) => json!(n),
                            NumberOrString::String(s) => json!(&*s),
                        };
                        prop_assert_eq!(got, id);
                    }
                    Inbound::Ignore => prop_assert!(false, "ignored a request: {}", line),
                }
            }
        }
    }
}
