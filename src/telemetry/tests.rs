use super::*;

const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn tracer(spec: serde_json::Value) -> Tracer {
    let spec: TelemetrySpec = serde_json::from_value(spec).unwrap();
    Tracer::from_spec(&spec).unwrap().unwrap()
}

fn on() -> Tracer {
    tracer(serde_json::json!({ "endpoint": "http://127.0.0.1:9/" }))
}

#[test]
fn off_without_an_endpoint() {
    assert!(Tracer::from_spec(&TelemetrySpec::default()).unwrap().is_none());
}

#[test]
fn the_traces_path_is_added_once() {
    for (endpoint, url) in [
        ("http://c:4318", "http://c:4318/v1/traces"),
        ("http://c:4318/", "http://c:4318/v1/traces"),
        ("https://c/otlp", "https://c/otlp/v1/traces"),
        ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
    ] {
        assert_eq!(traces_url(endpoint).unwrap().as_str(), url);
    }
    assert!(traces_url("ftp://c").is_err());
}

#[test]
fn an_unset_header_reference_is_named() {
    let spec: TelemetrySpec = serde_json::from_value(serde_json::json!({
        "endpoint": "http://c:4318",
        "headers": { "authorization": "Bearer ${ANYGPT_TEST_UNSET_OTEL_TOKEN}" }
    }))
    .unwrap();
    let error = Tracer::from_spec(&spec).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("discovery.telemetry.headers.authorization: "),
        "{error}"
    );
}

#[test]
fn a_child_keeps_the_trace_and_names_its_parent() {
    let parent = SpanContext::parse(PARENT, Some("rojo=1")).unwrap();
    let span = on().server_span("tools/call", "execute_tool", Some("7"), Some(&parent));
    assert_eq!(span.context().trace_id, parent.trace_id);
    assert_ne!(span.context().span_id, parent.span_id);
    assert_eq!(span.parent, Some(parent.span_id));
    assert_eq!(span.context().trace_state.as_deref(), Some("rojo=1"));
    assert!(span
        .context()
        .traceparent()
        .starts_with("00-0af7651916cd43dd8448eb211c80319c-"));
    assert_eq!(span.name, "tools/call execute_tool");
    assert!(span
        .attributes
        .contains(&("jsonrpc.request.id", Attribute::Str("7".into()))));
}

#[test]
fn sampling_follows_the_parent_and_else_the_ratio() {
    let never = tracer(serde_json::json!({ "endpoint": "http://127.0.0.1:9", "samplingRatio": 0 }));
    let unsampled = SpanContext::parse(&PARENT.replace("-01", "-00"), None).unwrap();
    let sampled = SpanContext::parse(PARENT, None).unwrap();
    // A caller's decision wins both ways.
    assert!(never.start("x".into(), Kind::Server, Some(&sampled)).recorder.is_some());
    assert!(on()
        .start("x".into(), Kind::Server, Some(&unsampled))
        .recorder
        .is_none());
    // New traces: none at 0, all at 1, and an unsampled span still passes a context on.
    let root = never.start("x".into(), Kind::Server, None);
    assert!(root.recorder.is_none());
    assert!(root.context().traceparent().ends_with("-00"));
    assert!((0..50).all(|_| on().start("x".into(), Kind::Server, None).recorder.is_some()));
    let half = tracer(serde_json::json!({ "endpoint": "http://127.0.0.1:9", "samplingRatio": 0.5 }));
    let kept = (0..2000)
        .filter(|_| half.start("x".into(), Kind::Server, None).recorder.is_some())
        .count();
    assert!((800..1200).contains(&kept), "{kept} of 2000 kept at 0.5");
}

#[test]
fn attributes_are_bounded_and_scrubbed() {
    crate::secrets::register("telemetry-test", ["sk-telemetry-test-0123456789abcdef".to_owned()]);
    let mut span = on().start("x".into(), Kind::Client, None);
    span.set("a", "x".repeat(1000));
    span.set("b", "key sk-telemetry-test-0123456789abcdef here");
    let Attribute::Str(a) = &span.attributes[0].1 else {
        panic!()
    };
    assert_eq!(a.chars().count(), MAX_ATTRIBUTE_CHARS);
    let Attribute::Str(b) = &span.attributes[1].1 else {
        panic!()
    };
    assert!(!b.contains("sk-telemetry-test"), "{b}");
}

#[test]
fn the_header_wins_over_meta_and_a_bad_one_counts_as_none() {
    let meta_parent = "00-11111111111111111111111111111111-2222222222222222-01";
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"_meta":{{"traceparent":"{meta_parent}"}}}}}}"#
    );
    let mut headers = http::HeaderMap::new();
    assert_eq!(inbound(&headers, body.as_bytes()).unwrap().traceparent(), meta_parent);
    headers.insert("traceparent", PARENT.parse().unwrap());
    headers.insert("tracestate", "rojo=1".parse().unwrap());
    let context = inbound(&headers, body.as_bytes()).unwrap();
    assert_eq!(context.traceparent(), PARENT);
    assert_eq!(context.trace_state.as_deref(), Some("rojo=1"));
    headers.insert("traceparent", "00-garbage".parse().unwrap());
    assert!(inbound(&headers, body.as_bytes()).is_none());
    // Two traceparent headers: ambiguous, none is used.
    headers.insert("traceparent", PARENT.parse().unwrap());
    headers.append("traceparent", PARENT.parse().unwrap());
    assert!(inbound(&headers, b"{}").is_none());
}

#[test]
fn spans_encode_as_otlp_json() {
    let parent = SpanContext::parse(PARENT, None).unwrap();
    let mut span = on().tool_call_span("files", "read_file", Some(&parent));
    span.fail("tool_error");
    let finished = export::Finished {
        context: span.context().clone(),
        parent: span.parent,
        name: span.name.clone(),
        kind: span.kind,
        start_unix_nanos: 1_700_000_000_000_000_000,
        end_unix_nanos: 1_700_000_000_500_000_000,
        attributes: span.attributes.clone(),
        error: span.error.clone(),
    };
    let body: serde_json::Value = serde_json::from_slice(&export::encode(&[finished], "svc")).unwrap();
    let resource = &body["resourceSpans"][0];
    assert_eq!(
        resource["resource"]["attributes"][0],
        serde_json::json!({ "key": "service.name", "value": { "stringValue": "svc" } })
    );
    let out = &resource["scopeSpans"][0]["spans"][0];
    assert_eq!(out["traceId"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(out["parentSpanId"], "b7ad6b7169203331");
    assert_eq!(out["spanId"], span.context().span_id.hex());
    assert_eq!(out["name"], "tools/call read_file");
    assert_eq!(out["kind"], 3);
    assert_eq!(out["startTimeUnixNano"], "1700000000000000000");
    assert_eq!(out["status"], serde_json::json!({ "code": 2, "message": "tool_error" }));
    let keys: Vec<&str> = out["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "mcp.method.name",
            "gen_ai.tool.name",
            "gen_ai.operation.name",
            "anygpt.discovery.server",
            "error.type"
        ]
    );
    // The span was not dropped into a queue with no runtime to send it: nothing counted.
    drop(span);
}

/// A collector on a loopback port: answers each request 200 and sends its body on.
async fn collector() -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (bodies, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let bodies = bodies.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0; 8192];
                loop {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&request).into_owned();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        let _ = bodies.send(body.to_owned());
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                            .await;
                        return;
                    }
                }
            });
        }
    });
    (url, received)
}

#[tokio::test]
async fn flush_waits_until_the_queued_spans_are_exported() {
    let (url, mut received) = collector().await;
    let tracer = tracer(serde_json::json!({ "endpoint": url }));
    let parent = SpanContext::parse(PARENT, None).unwrap();
    tracer.server_span("tools/list", "", Some("1"), Some(&parent)).end();
    tracer.flush(std::time::Duration::from_secs(5)).await;
    // Exported already: no waiting here for the batch delay.
    let body = received
        .try_recv()
        .expect("flush returned before the span was exported");
    assert!(body.contains("\"name\":\"tools/list\""), "{body}");
    assert!(body.contains("\"parentSpanId\":\"b7ad6b7169203331\""), "{body}");
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_waiting() {
    // A collector that takes the connection and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let _held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    let tracer = tracer(serde_json::json!({ "endpoint": url }));
    let before = dropped_spans();
    let started = std::time::Instant::now();
    for _ in 0..5000 {
        tracer.start("x".into(), Kind::Server, None).end();
    }
    // Generous: 5000 spans take milliseconds; a push that waited would take the export timeout.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // At most the queue and one batch are held; the rest were dropped and counted.
    assert!(
        dropped_spans() - before >= 5000 - 2048 - 512,
        "{}",
        dropped_spans() - before
    );
}
