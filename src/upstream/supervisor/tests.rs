//! The state machine under paused time, with a scripted connector: no processes, no sleeps.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;

/// What the next `open` does.
enum Script {
    Fail,
    /// The server waits for a person to sign in (`oauth`).
    SignIn,
    Ok,
    Hang,
}

#[derive(Default)]
struct Fake {
    script: Mutex<VecDeque<Script>>,
    opens: AtomicUsize,
    /// Sessions die right after their handshake.
    dead: AtomicBool,
}

struct FakeSession {
    closed: Arc<AtomicBool>,
    ended: Arc<AtomicUsize>,
}

impl Session for FakeSession {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
    fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
        let closed = self.closed.clone();
        async move {
            while !closed.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    fn write_blocked_for(&self) -> Option<Duration> {
        None
    }
    fn explain_end(&self) -> String {
        "the server closed the connection; the process exited with exit status: 3".into()
    }
    async fn call(
        &self,
        params: CallToolRequestParams,
        _timeout: Duration,
        _progress: Option<ProgressSink>,
    ) -> Result<CallToolResult, UpstreamError> {
        if params.name == "slow" {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        if self.is_closed() {
            return Err(UpstreamError::closed(self.explain_end()));
        }
        Ok(CallToolResult::success(vec![]))
    }
    fn capabilities(&self) -> Option<rmcp::model::ServerCapabilities> {
        None
    }
    async fn request(
        &self,
        _request: rmcp::model::ClientRequest,
        _timeout: Duration,
    ) -> Result<rmcp::model::ServerResult, UpstreamError> {
        Err(UpstreamError::protocol("the scripted session answers tool calls only"))
    }
    async fn end(self: Arc<Self>) {
        self.closed.store(true, Ordering::SeqCst);
        self.ended.fetch_add(1, Ordering::SeqCst);
    }
}

struct Scripted(Arc<Fake>, Arc<AtomicUsize>);

impl Connector for Scripted {
    type Session = FakeSession;
    async fn open(
        &self,
        _spec: &ServerSpec,
        shutdown: &CancellationToken,
        _on_tools: ToolsSink,
    ) -> Result<(FakeSession, Listing), UpstreamError> {
        self.0.opens.fetch_add(1, Ordering::SeqCst);
        let next = lock(&self.0.script).pop_front().unwrap_or(Script::Ok);
        tokio::time::sleep(Duration::from_millis(10)).await;
        match next {
            Script::Fail => Err(UpstreamError::handshake("did not answer initialize")),
            Script::SignIn => Err(UpstreamError::NeedsSignIn {
                detail: "needs sign-in: run `anygpt-discovery auth login a`".into(),
            }),
            Script::Ok => Ok((
                FakeSession {
                    closed: Arc::new(AtomicBool::new(self.0.dead.load(Ordering::SeqCst))),
                    ended: self.1.clone(),
                },
                Listing::default(),
            )),
            Script::Hang => {
                shutdown.cancelled().await;
                Err(UpstreamError::ShuttingDown)
            }
        }
    }
}

fn spec(name: &str, idle_ms: u64) -> ServerSpec {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "connection": { "command": "x" },
        "idleTimeoutMs": idle_ms,
    }))
    .unwrap()
}

struct Setup {
    supervisor: Supervisor<Scripted>,
    fake: Arc<Fake>,
    ended: Arc<AtomicUsize>,
}

fn setup(names: &[&str], script: Vec<Script>) -> Setup {
    let fake = Arc::new(Fake {
        script: Mutex::new(script.into()),
        ..Fake::default()
    });
    let ended = Arc::new(AtomicUsize::new(0));
    let specs: Vec<ServerSpec> = names.iter().map(|n| spec(n, 60_000)).collect();
    let supervisor = Supervisor::new(&specs, Scripted(fake.clone(), ended.clone()), None, Arc::default());
    Setup {
        supervisor,
        fake,
        ended,
    }
}

fn call_params() -> CallToolRequestParams {
    CallToolRequestParams::new("t")
}

/// A call left running in the background (a call in flight during a reload or close).
fn spawn_slow_call(handle: &Arc<Handle<Scripted>>) -> tokio::task::JoinHandle<Result<CallToolResult, CallError>> {
    let handle = handle.clone();
    tokio::spawn(async move {
        handle
            .call(CallToolRequestParams::new("slow"), Duration::from_secs(60), None)
            .await
    })
}

async fn settle() {
    // Let spawned tasks run to their next timer (time is paused: no real waiting).
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_first_start_is_retried_in_the_background_with_backoff() {
    let s = setup(&["a"], vec![Script::Fail, Script::Fail, Script::Ok]);
    let handle = s.supervisor.get("a").unwrap().clone();
    handle.start();
    assert!(handle.is_first_start(), "searches may wait for a first start");
    settle().await;
    let backoff = matches!(handle.state(), ServerState::Backoff { .. });
    assert!(backoff, "{:?}", handle.state());
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 1);
    // Nobody asks; the supervisor tries again after ~1 s (0.8–1.2 s)…
    let failed_at = Instant::now();
    while matches!(handle.state(), ServerState::Backoff { .. }) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let waited = failed_at.elapsed();
    assert!(
        waited >= Duration::from_millis(770) && waited <= Duration::from_millis(1200),
        "{waited:?}"
    );
    assert!(
        matches!(handle.state(), ServerState::Connecting { last_failure: Some(_) }),
        "retrying, with the last failure shown: {:?}",
        handle.state()
    );
    assert!(!handle.is_first_start(), "nobody waits for a retry");
    settle().await;
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 2);
    // …and again after ~2 s (1.6–2.4 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 3);
    assert_eq!(handle.state(), ServerState::Ready);
}

#[tokio::test(start_paused = true)]
async fn a_server_waiting_for_a_sign_in_says_so_typed_and_a_call_tries_at_once() {
    let s = setup(&["a"], vec![Script::SignIn, Script::SignIn, Script::Ok]);
    let handle = s.supervisor.get("a").unwrap().clone();
    handle.start();
    settle().await;
    let state = handle.state();
    let ServerState::Backoff {
        reason: Trouble::NeedsSignIn(detail),
        ..
    } = &state
    else {
        panic!("{state:?}")
    };
    assert!(detail.contains("auth login a"), "{detail}");
    assert!(state.needs_sign_in());
    assert_eq!(
        state.reason().as_deref(),
        Some(detail.as_str()),
        "no retry in the reason"
    );
    // Retrying in the background, it still needs the sign-in: a person must act.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(handle.state().needs_sign_in(), "{:?}", handle.state());
    // A call is who the sign-in was for: it connects at once instead of waiting out the
    // backoff (the real connector's attempt may then open the browser).
    let opens = s.fake.opens.load(Ordering::SeqCst);
    let started = Instant::now();
    let outcome = handle.call(call_params(), Duration::from_secs(60), None).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), opens + 1);
    assert!(!handle.state().needs_sign_in());
}

#[tokio::test(start_paused = true)]
async fn a_call_during_backoff_fails_at_once_naming_the_wait() {
    let s = setup(&["a"], vec![Script::Fail]);
    let handle = s.supervisor.get("a").unwrap().clone();
    handle.start();
    settle().await;
    let Err(CallError::Connect(error)) = handle.call(call_params(), Duration::from_secs(1), None).await else {
        panic!("expected a connect error")
    };
    assert!(error.to_string().contains("(next attempt in 1 s)"), "{error}");
    assert_eq!(
        s.fake.opens.load(Ordering::SeqCst),
        1,
        "no attempt before the backoff ends"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_waits_for_a_hung_connect_no_longer_than_its_own_timeout() {
    let s = setup(&["a"], vec![Script::Hang]);
    let handle = s.supervisor.get("a").unwrap().clone();
    let started = tokio::time::Instant::now();
    let Err(CallError::Connect(error)) = handle.call(call_params(), Duration::from_secs(2), None).await else {
        panic!("expected a connect error")
    };
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(error.to_string(), "did not connect within 2000 ms");
    assert!(
        matches!(handle.state(), ServerState::Connecting { .. }),
        "the connect goes on"
    );
}

#[tokio::test(start_paused = true)]
async fn a_session_that_dies_right_after_starting_backs_off() {
    let s = setup(&["a"], vec![]);
    s.fake.dead.store(true, Ordering::SeqCst);
    let handle = s.supervisor.get("a").unwrap().clone();
    for _ in 0..40 {
        let outcome = handle.call(call_params(), Duration::from_secs(1), None).await;
        assert!(outcome.is_err());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // 4 s of calls every 100 ms: respawned at once only the first time, then after ~1 s, ~2 s.
    let opens = s.fake.opens.load(Ordering::SeqCst);
    assert!((3..=5).contains(&opens), "{opens} starts in 4 s");
}

#[tokio::test(start_paused = true)]
async fn a_session_that_answers_one_call_and_dies_still_backs_off() {
    let s = setup(&["a"], vec![]);
    let handle = s.supervisor.get("a").unwrap().clone();
    for _ in 0..40 {
        if handle.call(call_params(), Duration::from_secs(1), None).await.is_ok() {
            crash(&handle);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let opens = s.fake.opens.load(Ordering::SeqCst);
    assert!((3..=5).contains(&opens), "{opens} starts in 4 s");
}

#[tokio::test(start_paused = true)]
async fn a_lasting_session_that_ends_is_restarted_at_once() {
    let s = setup(&["a"], vec![]);
    let handle = s.supervisor.get("a").unwrap().clone();
    for _ in 0..3 {
        handle.call(call_params(), Duration::from_secs(1), None).await.unwrap();
        tokio::time::sleep(STABLE_SESSION).await;
        crash(&handle);
    }
    // Each end found by the next call restarted the server at once; that call went through.
    handle.call(call_params(), Duration::from_secs(1), None).await.unwrap();
    settle().await;
    assert_eq!(handle.state(), ServerState::Ready);
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 4);
}

/// End the live session as a crash would, without a call noticing.
fn crash(handle: &Handle<Scripted>) {
    let inner = handle.lock();
    inner
        .live
        .as_ref()
        .unwrap()
        .session
        .closed
        .store(true, Ordering::SeqCst);
}

#[tokio::test(start_paused = true)]
async fn a_session_that_ends_while_idle_leaves_ready_at_once_and_restarts_by_the_policy() {
    let s = setup(&["a"], vec![]);
    let handle = s.supervisor.get("a").unwrap().clone();
    handle.call(call_params(), Duration::from_secs(1), None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(handle.state(), ServerState::Ready);
    // No call comes: the watcher sees the end (within the fake's 10 ms poll and the 30 ms
    // left for the process's last words) and starts again at once (a first short end),
    // showing why the last session ended meanwhile.
    let mut states = handle.state.subscribe();
    crash(&handle);
    let crashed = Instant::now();
    states.wait_for(|s| *s != ServerState::Ready).await.unwrap();
    assert!(
        crashed.elapsed() <= Duration::from_millis(50),
        "{:?}",
        crashed.elapsed()
    );
    let ServerState::Connecting {
        last_failure: Some(reason),
    } = handle.state()
    else {
        panic!("{:?}", handle.state())
    };
    assert!(reason.text().contains("exit status: 3"), "{reason}");
    settle().await;
    assert_eq!(handle.state(), ServerState::Ready);
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 2);
    assert_eq!(s.ended.load(Ordering::SeqCst), 1, "the ended session was closed");
    // It ends soon again: now it backs off, with the reason, and no start before the wait.
    crash(&handle);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ServerState::Backoff { reason, until } = handle.state() else {
        panic!("{:?}", handle.state())
    };
    assert!(reason.text().contains("exit status: 3"), "{reason}");
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 2);
    tokio::time::sleep_until(until + Duration::from_millis(20)).await;
    assert_eq!(
        s.fake.opens.load(Ordering::SeqCst),
        3,
        "restarted when the backoff ended"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unused_session_is_drained_and_closed_after_its_idle_timeout() {
    let s = setup(&["a"], vec![]);
    let handle = s.supervisor.get("a").unwrap().clone();
    handle.call(call_params(), Duration::from_secs(1), None).await.unwrap();
    assert_eq!(handle.state(), ServerState::Ready);
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert_eq!(handle.state(), ServerState::Ready, "not before the idle timeout");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(handle.state(), ServerState::Idle);
    assert_eq!(s.ended.load(Ordering::SeqCst), 1);
    // The next call starts it again.
    handle.call(call_params(), Duration::from_secs(1), None).await.unwrap();
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn hung_starts_give_their_slot_up_so_a_healthy_server_is_not_kept_waiting() {
    let names: Vec<String> = (0..9).map(|i| format!("s{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut script: Vec<Script> = (0..8).map(|_| Script::Hang).collect();
    script.push(Script::Ok);
    let s = setup(&names, script);
    for handle in s.supervisor.handles() {
        handle.start();
    }
    let healthy = s.supervisor.get("s8").unwrap().clone();
    let started = Instant::now();
    healthy.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(healthy.state(), ServerState::Ready);
    assert!(started.elapsed() <= Duration::from_secs(1), "{:?}", started.elapsed());
    s.supervisor.close().await;
    assert!(s.supervisor.handles().all(|h| h.state() == ServerState::Idle));
}

#[test]
fn backoff_doubles_up_to_a_minute_with_a_fifth_of_jitter() {
    let waits: Vec<u64> = (1..=9).map(|n| backoff(n, 0.5).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    assert_eq!(backoff(1, 0.0), Duration::from_millis(800));
    assert_eq!(backoff(1, 1.0), Duration::from_millis(1200));
    assert_eq!(backoff(9, 1.0), BACKOFF_MAX);
}

#[test]
fn after_loss_restarts_lasting_sessions_at_once_and_backs_off_short_ones() {
    let mut failures = 0;
    let short = Duration::from_millis(200);
    assert_eq!(after_loss(&mut failures, short, 0.5), Duration::ZERO);
    assert_eq!(after_loss(&mut failures, short, 0.5), Duration::from_secs(1));
    assert_eq!(after_loss(&mut failures, short, 0.5), Duration::from_secs(2));
    assert_eq!(after_loss(&mut failures, STABLE_SESSION, 0.5), Duration::ZERO);
    assert_eq!(after_loss(&mut failures, short, 0.5), Duration::from_secs(1));
}

fn with_command(name: &str, command: &str) -> ServerSpec {
    let mut spec = spec(name, 60_000);
    spec.connection.command = Some(command.into());
    spec
}

fn same(old: &ServerSpec, new: &ServerSpec) -> bool {
    old.name == new.name && old.connection.command == new.connection.command
}

#[tokio::test(start_paused = true)]
async fn reconcile_keeps_unchanged_handles_and_replaces_changed_removed_and_added_ones() {
    let s = setup(&["kept", "changed", "removed"], vec![]);
    for name in ["kept", "changed", "removed"] {
        s.supervisor.get(name).unwrap().start();
    }
    settle().await;
    let kept = s.supervisor.get("kept").unwrap().clone();
    assert_eq!(kept.state(), ServerState::Ready);
    let specs = [
        with_command("kept", "x"),
        with_command("changed", "y"),
        with_command("added", "x"),
    ];
    let (next, changes) = s.supervisor.reconcile(&specs, None, same);
    assert_eq!(changes.kept, ["kept"]);
    assert_eq!(changes.restarted, ["changed"]);
    assert_eq!(changes.stopped, ["removed"]);
    assert_eq!(changes.added, ["added"]);
    assert!(
        Arc::ptr_eq(next.get("kept").unwrap(), &kept),
        "the same handle, session and all"
    );
    assert_eq!(kept.state(), ServerState::Ready);
    assert_eq!(next.get("changed").unwrap().state(), ServerState::Idle, "a new handle");
    assert!(next.get("removed").is_none());
    settle().await;
    // Nothing was in flight: the replaced and the removed sessions end at once; the kept one lives.
    assert_eq!(s.ended.load(Ordering::SeqCst), 2);
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 3, "nothing reconnected");
}

#[tokio::test(start_paused = true)]
async fn a_removed_server_ends_only_after_its_call_in_flight_and_takes_no_new_ones() {
    let s = setup(&["a"], vec![]);
    let handle = s.supervisor.get("a").unwrap().clone();
    let calling = spawn_slow_call(&handle);
    settle().await;
    let (next, changes) = s.supervisor.reconcile(&[], None, same);
    assert_eq!(changes.stopped, ["a"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(s.ended.load(Ordering::SeqCst), 0, "still serving the call in flight");
    let late = handle.call(call_params(), Duration::from_secs(1), None).await;
    assert!(late.is_ok(), "its session still answers while it drains: {late:?}");
    assert!(calling.await.unwrap().is_ok(), "the call in flight completed");
    settle().await;
    assert_eq!(s.ended.load(Ordering::SeqCst), 1, "closed once the call ended");
    assert_eq!(handle.state(), ServerState::Idle);
    match handle.call(call_params(), Duration::from_secs(1), None).await {
        Err(CallError::Connect(UpstreamError::Failed { reason })) => assert!(reason.contains("reload"), "{reason}"),
        other => panic!("a retired server must not start again: {other:?}"),
    }
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 1);
    next.close().await;
}

#[tokio::test(start_paused = true)]
async fn closing_ends_a_retiring_server_without_waiting_for_its_calls() {
    let s = setup(&["a"], vec![]);
    let handle = s.supervisor.get("a").unwrap().clone();
    let _calling = spawn_slow_call(&handle);
    settle().await;
    let (next, _) = s.supervisor.reconcile(&[], None, same);
    settle().await;
    assert_eq!(s.ended.load(Ordering::SeqCst), 0);
    next.close().await;
    assert_eq!(s.ended.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_kept_server_that_failed_as_configured_is_tried_again() {
    let s = setup(&["a"], vec![]);
    let handle = s.supervisor.get("a").unwrap().clone();
    handle.state.send_replace(ServerState::Failed {
        reason: "unset ${TOKEN}".into(),
    });
    let (_next, changes) = s.supervisor.reconcile(&[spec("a", 60_000)], None, same);
    assert_eq!(changes.kept, ["a"]);
    assert_eq!(handle.state(), ServerState::Idle);
}

fn per_user_spec(name: &str, cap: u32) -> ServerSpec {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "connection": { "type": "http", "url": "http://127.0.0.1:9/mcp", "oauth": { "perUser": true, "maxUserConnections": cap } },
    }))
    .unwrap()
}

fn per_user_setup(cap: u32) -> Setup {
    let fake = Arc::new(Fake::default());
    let ended = Arc::new(AtomicUsize::new(0));
    let supervisor = Supervisor::new(
        &[per_user_spec("gh", cap), spec("shared", 60_000)],
        Scripted(fake.clone(), ended.clone()),
        None,
        Arc::default(),
    );
    Setup {
        supervisor,
        fake,
        ended,
    }
}

#[tokio::test(start_paused = true)]
async fn a_per_user_server_connects_once_per_caller_with_that_callers_token() {
    let s = per_user_setup(8);
    let gh = s.supervisor.get("gh").unwrap().clone();
    assert!(gh.is_per_user());
    assert!(
        !s.supervisor.get("shared").unwrap().is_per_user(),
        "others keep one pool"
    );
    // The server's own handle never connects.
    gh.start();
    assert_eq!(gh.state(), ServerState::Idle);
    let call = gh
        .call(CallToolRequestParams::new("t"), Duration::from_secs(5), None)
        .await;
    assert!(matches!(call, Err(CallError::Connect(UpstreamError::Failed { .. }))));
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 0);

    let alice = gh.for_caller("alice", "alice-token-1").unwrap();
    assert_eq!(
        alice.spec.connection.headers.get("Authorization").map(String::as_str),
        Some("Bearer alice-token-1")
    );
    assert!(alice.spec.connection.oauth.is_none(), "no shared sign-in of its own");
    assert!(Arc::ptr_eq(&alice, &gh.for_caller("alice", "alice-token-1").unwrap()));
    let bob = gh.for_caller("bob", "bob-token-1").unwrap();
    assert!(!Arc::ptr_eq(&alice, &bob), "never shared across callers");
    assert_eq!(
        bob.spec.connection.headers.get("Authorization").map(String::as_str),
        Some("Bearer bob-token-1")
    );
    alice
        .call(CallToolRequestParams::new("t"), Duration::from_secs(5), None)
        .await
        .unwrap();
    bob.call(CallToolRequestParams::new("t"), Duration::from_secs(5), None)
        .await
        .unwrap();
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 2, "one connection per caller");
    alice
        .call(CallToolRequestParams::new("t"), Duration::from_secs(5), None)
        .await
        .unwrap();
    assert_eq!(s.fake.opens.load(Ordering::SeqCst), 2, "reused");
    // Each caller's own connection has its own state; one who has none has no state there.
    assert_eq!(gh.caller_state("alice"), Some(ServerState::Ready));
    assert_eq!(gh.caller_state("carol"), None);
    assert_eq!(gh.state(), ServerState::Idle);
    assert_eq!(s.supervisor.get("shared").unwrap().caller_state("alice"), None);

    // A new token (refreshed) opens a new connection; the old one is retired and closed.
    let renewed = gh.for_caller("alice", "alice-token-2").unwrap();
    assert!(!Arc::ptr_eq(&alice, &renewed));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(s.ended.load(Ordering::SeqCst), 1, "the old connection closed");
    // Anything a header or `${VAR}` would read as more than a token is refused.
    assert!(gh.for_caller("alice", "x\r\nHost: evil").is_none());
    assert!(gh.for_caller("alice", "${HOME}").is_none());
    assert!(s.supervisor.get("shared").unwrap().for_caller("alice", "t").is_none());
    s.supervisor.close().await;
    // The renewed handle never connected: bob's is the one left to end.
    assert_eq!(
        s.ended.load(Ordering::SeqCst),
        2,
        "close ends every caller's connection"
    );
}

#[tokio::test(start_paused = true)]
async fn a_per_user_server_keeps_at_most_its_cap_closing_the_least_recently_used() {
    let s = per_user_setup(2);
    let gh = s.supervisor.get("gh").unwrap().clone();
    let a = gh.for_caller("a", "token-a").unwrap();
    a.call(CallToolRequestParams::new("t"), Duration::from_secs(5), None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let b = gh.for_caller("b", "token-b").unwrap();
    b.call(CallToolRequestParams::new("t"), Duration::from_secs(5), None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    // `a` used again: `b` is now the least recently used.
    assert!(Arc::ptr_eq(&a, &gh.for_caller("a", "token-a").unwrap()));
    tokio::time::sleep(Duration::from_millis(10)).await;
    let _c = gh.for_caller("c", "token-c").unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gh.users.as_ref().unwrap().len(), 2);
    assert_eq!(s.ended.load(Ordering::SeqCst), 1, "b's connection closed");
    assert!(Arc::ptr_eq(&a, &gh.for_caller("a", "token-a").unwrap()), "a kept");
    assert!(
        !Arc::ptr_eq(&b, &gh.for_caller("b", "token-b").unwrap()),
        "b opens anew"
    );
}
