//! The person's side of a sign-in: the authorization URL opened in a browser, and the
//! loopback listener the browser is sent back to.
//!
//! A remote server chooses the authorization server, and so the address the gateway opens: only
//! an `https:` address (or `http:` to this machine) is opened ([`SignInPage::check`]), never
//! `file:`, `javascript:`, `data:` or anything an OS opener would hand to another program.
//!
//! The URL opens with the command in `BROWSER` when set (as git, gh and many CLIs do; `%s` in
//! it is replaced by the URL, else the URL is its last argument), else the OS opener
//! (`xdg-open`, `open`, `ShellExecuteW` on Windows); it is always printed on stderr too, for a
//! machine with no browser. No shell ever reads the URL: `BROWSER` is split into words here
//! (quotes group words) and run directly, with the URL as one argument, so `&`, `"` or `;` in
//! it are only characters of the address. The listener binds 127.0.0.1 (a random port unless
//! the config names one), answers each connection in a task of its own (an idle or slow
//! connection delays nobody) and takes the first `GET /callback` whose `state` is the one we
//! sent; anything else is answered and ignored, so another local process cannot end a sign-in
//! by guessing the port.

use std::time::Duration;

use reqwest::Url;
use rmcp::transport::auth::AuthError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// The longest request line and headers read from the browser.
const MAX_REQUEST_BYTES: usize = 16 * 1024;
/// How long one browser connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections answered at once; more wait in the kernel's backlog until one ends. Browsers
/// open a few spare connections; a local process opening hundreds only waits its turn.
const MAX_CONNECTIONS: usize = 64;
/// Longest scheme quoted in a refusal.
const SCHEME_CHARS: usize = 32;

/// An authorization URL that may be opened: `https:`, or `http:` to a loopback host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignInPage(Url);

impl SignInPage {
    /// `address` parsed and checked, or the refusal naming `server` and the scheme.
    pub(crate) fn check(server: &str, address: &str) -> Result<Self, AuthError> {
        let refuse = |what: String| {
            AuthError::AuthorizationFailed(format!(
                "the sign-in page of {server} is not opened: its authorization server gave {what}; only https: \
                 addresses (or http: to this machine) are opened. Check the server's URL, or ask its operator"
            ))
        };
        let url = Url::parse(address).map_err(|e| refuse(format!("an address that is not a URL ({e})")))?;
        let host = url.host_str().unwrap_or_default();
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        match url.scheme() {
            "https" if !host.is_empty() => Ok(Self(url)),
            "http" if loopback => Ok(Self(url)),
            "http" => Err(refuse("a plain http: address to another machine".to_owned())),
            scheme => {
                let shown: String = scheme.chars().take(SCHEME_CHARS).collect();
                Err(refuse(format!("a `{shown}:` address")))
            }
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// What the authorization server sent the browser back with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Callback {
    /// `code`, `state` and (RFC 9207) `iss`.
    Code {
        code: String,
        state: String,
        issuer: Option<String>,
    },
    /// The authorization server refused (`error`, `error_description`).
    Refused(String),
}

/// A bound loopback listener and the redirect URI that reaches it.
pub(crate) struct Listener {
    listener: TcpListener,
    pub redirect_uri: String,
}

impl Listener {
    pub(crate) async fn bind(port: Option<u16>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// Wait for the callback carrying `state` (no time limit: the caller bounds it). Each
    /// connection is answered in its own task within [`REQUEST_TIMEOUT`]; the first with our
    /// callback ends the wait (and the others with it).
    pub(crate) async fn callback(self, state: &str, server: &str) -> Callback {
        let (found, mut first) = tokio::sync::mpsc::channel(1);
        let mut answering = JoinSet::new();
        loop {
            tokio::select! {
                Some(callback) = first.recv() => return callback,
                Some(_) = answering.join_next(), if !answering.is_empty() => {}
                accepted = self.listener.accept(), if answering.len() < MAX_CONNECTIONS => {
                    let Ok((stream, _)) = accepted else {
                        // Out of descriptors, most likely: a pause instead of a busy loop.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let (state, server, found) = (state.to_owned(), server.to_owned(), found.clone());
                    answering.spawn(async move {
                        if let Ok(Some(callback)) = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &state, &server)).await {
                            let _ = found.send(callback).await;
                        }
                    });
                }
            }
        }
    }
}

/// Read one request and answer it; the callback when it is ours.
async fn answer(mut stream: TcpStream, state: &str, server: &str) -> Option<Callback> {
    const NOT_OURS: &str = "This sign-in link is not the one the gateway started.";
    let target = read_target(&mut stream).await?;
    let (status, page, callback) = match parse_callback(&target) {
        Parsed::Elsewhere => ("404 Not Found", "Not the sign-in callback.".to_owned(), None),
        Parsed::Malformed => ("400 Bad Request", NOT_OURS.to_owned(), None),
        Parsed::Callback { state: theirs, .. } if theirs != state => ("400 Bad Request", NOT_OURS.to_owned(), None),
        Parsed::Callback {
            callback: Callback::Refused(why),
            ..
        } => (
            "200 OK",
            format!("Sign-in to {} was refused: {}", html_escape(server), html_escape(&why)),
            Some(Callback::Refused(why)),
        ),
        Parsed::Callback { callback, .. } => (
            "200 OK",
            format!("Signed in to {}. You can close this tab.", html_escape(server)),
            Some(callback),
        ),
    };
    let body = format!("<!doctype html><meta charset=utf-8><title>anygpt-discovery</title><p>{page}</p>");
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-store\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    callback
}

/// The request target of a `GET`, from the first line of what the browser sent.
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") && buffer.len() < MAX_REQUEST_BYTES {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let text = String::from_utf8_lossy(&buffer);
    let mut words = text.lines().next()?.split(' ');
    (words.next()? == "GET").then(|| words.next().map(str::to_owned))?
}

/// What one request to the listener was.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// Another path (a favicon, a probe).
    Elsewhere,
    /// The callback path without a `state`, or without a `code` or `error`.
    Malformed,
    Callback {
        state: String,
        callback: Callback,
    },
}

/// `/callback?…` read: a refusal must carry our `state` too, or any page could cancel a
/// sign-in.
fn parse_callback(target: &str) -> Parsed {
    let Ok(url) = reqwest::Url::parse(&format!("http://127.0.0.1{target}")) else {
        return Parsed::Elsewhere;
    };
    if url.path() != "/callback" {
        return Parsed::Elsewhere;
    }
    let get = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    let Some(state) = get("state") else {
        return Parsed::Malformed;
    };
    let callback = if let Some(error) = get("error") {
        let description = get("error_description").map(|d| format!(" ({d})")).unwrap_or_default();
        Callback::Refused(format!("{error}{description}"))
    } else if let Some(code) = get("code") {
        Callback::Code {
            code,
            state: state.clone(),
            issuer: get("iss"),
        }
    } else {
        return Parsed::Malformed;
    };
    Parsed::Callback { state, callback }
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Show `page` to the person: `BROWSER`, else the OS opener; always on stderr too.
pub(crate) fn open(page: &SignInPage, server: &str) {
    let url = page.as_str();
    eprintln!("anygpt-discovery: sign in to {server} in your browser: {url}");
    let browser = std::env::var("BROWSER")
        .ok()
        .map(|line| command_words(&line))
        .unwrap_or_default();
    let opened = if browser.is_empty() {
        open_with_os(url)
    } else {
        spawn_detached(&mut browser_command(&browser, url))
    };
    if let Err(e) = opened {
        tracing::warn!(%server, "could not open a browser ({e}); open the address above yourself");
    }
}

/// `BROWSER` split into words: whitespace separates, `"…"` and `'…'` group (a path with
/// spaces), nothing else is special — no variables, no escapes, no shell.
fn command_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            // Inside quotes, or an ordinary character.
            (_, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The `BROWSER` command with `url` as one argument: in place of each `%s`, else last.
fn browser_command(words: &[String], url: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(&words[0]);
    let mut placed = false;
    for word in &words[1..] {
        if word.contains("%s") {
            placed = true;
            command.arg(word.replace("%s", url));
        } else {
            command.arg(word);
        }
    }
    if !placed {
        command.arg(url);
    }
    command
}

/// The OS's own opener, given the URL as one argument: `open` on macOS, `xdg-open` elsewhere
/// on unix.
#[cfg(unix)]
fn open_with_os(url: &str) -> std::io::Result<()> {
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let mut command = tokio::process::Command::new(opener);
    command.arg(url);
    spawn_detached(&mut command)
}

/// `ShellExecuteW` (through `opener`): the URL goes to the registered browser as one string,
/// never through `cmd.exe`, whose parsing would split it at `&` and run the rest.
#[cfg(windows)]
fn open_with_os(url: &str) -> std::io::Result<()> {
    let url = url.to_owned();
    // ShellExecuteW may block while the shell starts the browser.
    tokio::task::spawn_blocking(move || {
        if let Err(error) = opener::open(&url) {
            tracing::warn!("could not open a browser ({error}); open the address on stderr yourself");
        }
    });
    Ok(())
}

/// Start the opener with no stdin or stdout (stdout is the MCP channel) and reap it.
fn spawn_detached(command: &mut tokio::process::Command) -> std::io::Result<()> {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    let mut child = command.spawn()?;
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_are_read_from_the_redirect() {
        assert_eq!(
            parse_callback("/callback?code=abc&state=s1&iss=https%3A%2F%2Fas.example"),
            Parsed::Callback {
                state: "s1".into(),
                callback: Callback::Code {
                    code: "abc".into(),
                    state: "s1".into(),
                    issuer: Some("https://as.example".into())
                }
            }
        );
        assert_eq!(parse_callback("/favicon.ico"), Parsed::Elsewhere);
        assert_eq!(parse_callback("/callback?code=abc"), Parsed::Malformed);
        assert_eq!(
            parse_callback("/callback?error=access_denied&error_description=no&state=s1"),
            Parsed::Callback {
                state: "s1".into(),
                callback: Callback::Refused("access_denied (no)".into())
            }
        );
        assert_eq!(parse_callback("/callback?error=access_denied"), Parsed::Malformed);
    }

    #[tokio::test]
    async fn only_the_callback_with_our_state_ends_the_wait() {
        let listener = Listener::bind(None).await.unwrap();
        let base = listener.redirect_uri.clone();
        let waiting = tokio::spawn(listener.callback("good", "srv"));
        // reqwest is built without a default TLS provider; the gateway installs one at connect.
        crate::upstream::remote::install_crypto_provider();
        let client = reqwest::Client::new();
        let wrong = client.get(format!("{base}?code=c&state=evil")).send().await.unwrap();
        assert_eq!(wrong.status(), 400);
        let other = client.get(base.replace("/callback", "/other")).send().await.unwrap();
        assert_eq!(other.status(), 404);
        let right = client.get(format!("{base}?code=c&state=good")).send().await.unwrap();
        assert_eq!(right.status(), 200);
        assert!(right.text().await.unwrap().contains("Signed in to srv"));
        assert_eq!(
            waiting.await.unwrap(),
            Callback::Code {
                code: "c".into(),
                state: "good".into(),
                issuer: None
            }
        );
    }

    #[test]
    fn only_https_or_loopback_http_pages_are_opened() {
        for good in [
            "https://as.example/authorize?a=1&b=%22x%22",
            "http://127.0.0.1:8080/authorize",
            "http://127.8.0.1/authorize",
            "http://localhost:9/authorize",
            "http://[::1]:9/authorize",
        ] {
            assert!(SignInPage::check("weather", good).is_ok(), "{good}");
        }
        for (bad, said) in [
            ("file:///etc/passwd?x=1", "`file:` address"),
            ("javascript:alert(1)//", "`javascript:` address"),
            ("data:text/html,<script>x</script>", "`data:` address"),
            ("ms-settings:privacy", "`ms-settings:` address"),
            ("http://as.example/authorize", "plain http: address to another machine"),
            (
                "http://127.0.0.1.evil.example/authorize",
                "plain http: address to another machine",
            ),
            ("not a url", "an address that is not a URL"),
        ] {
            let refused = SignInPage::check("weather", bad).unwrap_err().to_string();
            assert!(
                refused.contains("the sign-in page of weather is not opened"),
                "{refused}"
            );
            assert!(refused.contains(said), "{bad}: {refused}");
        }
    }

    #[test]
    fn browser_words_are_split_without_a_shell() {
        assert_eq!(
            command_words(r#""/opt/my browser/bin" --new-tab '%s' $HOME;x"#),
            ["/opt/my browser/bin", "--new-tab", "%s", "$HOME;x"]
        );
        assert_eq!(
            command_words(r#"C:\Tools\browser.exe """#),
            [r"C:\Tools\browser.exe", ""]
        );
        assert!(command_words("  ").is_empty());
        let url = r#"https://as.example/a?x=1&y="2";z"#;
        let last = browser_command(&command_words("firefox --new-tab"), url);
        let args: Vec<_> = last.as_std().get_args().collect();
        assert_eq!(args, ["--new-tab", url]);
        let placed = browser_command(&command_words("chrome --app=%s --x"), url);
        let args: Vec<_> = placed.as_std().get_args().collect();
        assert_eq!(args, [format!("--app={url}").as_str(), "--x"]);
    }

    #[tokio::test]
    async fn idle_connections_do_not_delay_the_callback() {
        let listener = Listener::bind(None).await.unwrap();
        let base = listener.redirect_uri.clone();
        let port: u16 = reqwest::Url::parse(&base).unwrap().port().unwrap();
        let waiting = tokio::spawn(listener.callback("good", "srv"));
        // Three connections that never send a request, and one that sends half of one.
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        }
        let mut partial = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        partial.write_all(b"GET /callback?code=x").await.unwrap();
        let started = std::time::Instant::now();
        let mut real = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        real.write_all(b"GET /callback?code=c&state=good HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut page = String::new();
        real.read_to_string(&mut page).await.unwrap();
        assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
        let callback = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(
            callback,
            Callback::Code {
                code: "c".into(),
                state: "good".into(),
                issuer: None
            }
        );
        drop((idle, partial));
    }
}
