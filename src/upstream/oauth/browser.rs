//! The person's side of a sign-in: the authorization URL opened in a browser, and the
//! loopback listener the browser is sent back to.
//!
//! The URL opens with the command in `BROWSER` when set (as git, gh and many CLIs do; `%s` in
//! it is replaced by the URL, else the URL is its last argument), else the OS opener
//! (`xdg-open`, `open`, `start`); it is always printed on stderr too, for a machine with no
//! browser. The listener binds 127.0.0.1 (a random port unless the config names one) and
//! takes the first `GET /callback` whose `state` is the one we sent; anything else is
//! answered and ignored, so another local process cannot end a sign-in by guessing the port.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request line and headers read from the browser.
const MAX_REQUEST_BYTES: usize = 16 * 1024;
/// How long one browser connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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

    /// Wait for the callback carrying `state` (no time limit: the caller bounds it).
    pub(crate) async fn callback(self, state: &str, server: &str) -> Callback {
        loop {
            let Ok((stream, _)) = self.listener.accept().await else {
                continue;
            };
            if let Ok(Some(callback)) = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, state, server)).await {
                return callback;
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

/// Show `url` to the person: `BROWSER`, else the OS opener; always on stderr too.
pub(crate) fn open(url: &str, server: &str) {
    eprintln!("anygpt-discovery: sign in to {server} in your browser: {url}");
    let opened = match std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty()) {
        Some(browser) => run_browser_command(&browser, url),
        None => run_os_opener(url),
    };
    if let Err(e) = opened {
        tracing::warn!(%server, "could not open a browser ({e}); open the address above yourself");
    }
}

/// `BROWSER` as a shell command line, with the URL passed as an argument (never pasted into
/// the line, so a URL cannot inject shell syntax).
fn run_browser_command(browser: &str, url: &str) -> std::io::Result<()> {
    #[cfg(unix)]
    let mut command = {
        let line = if browser.contains("%s") {
            browser.replace("%s", "\"$1\"")
        } else {
            format!("{browser} \"$1\"")
        };
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg(line).arg("sh").arg(url);
        command
    };
    #[cfg(windows)]
    let mut command = {
        let mut command = tokio::process::Command::new("cmd");
        command.arg("/C").arg(browser).arg(url);
        command
    };
    spawn_detached(&mut command)
}

fn run_os_opener(url: &str) -> std::io::Result<()> {
    #[cfg(target_os = "macos")]
    let mut command = tokio::process::Command::new("open");
    #[cfg(windows)]
    let mut command = {
        let mut command = tokio::process::Command::new("cmd");
        command.args(["/C", "start", ""]);
        command
    };
    #[cfg(all(unix, not(target_os = "macos")))]
    let mut command = tokio::process::Command::new("xdg-open");
    command.arg(url);
    spawn_detached(&mut command)
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
}
