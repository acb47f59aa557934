//! The stdio transport's OS side: the command line a spec describes, the spawned process
//! group with its pipes, and a watch on the write side that tells a server which stopped
//! reading its input from one that is merely slow.

use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use process_wrap::tokio::CommandWrap;
use tokio::io::AsyncWrite;
use tokio::process::{ChildStdin, ChildStdout};

use super::diagnostics::{Diagnostics, StdoutTap};
use super::error::UpstreamError;
use super::process::{self, ProcessGroup};
use crate::config::{expand, ServerSpec};
use crate::secrets::{self, ExposeSecret, SecretString};

/// A started server: its process group, what it says, and its pipes.
pub(super) struct Spawned {
    pub group: ProcessGroup,
    pub stdout: StdoutTap<ChildStdout>,
    pub stdin: WriteWatch<ChildStdin>,
    pub blocked: BlockedSince,
}

/// Start a stdio server: its process group and the transport's two pipes.
pub(super) fn spawn(
    spec: &ServerSpec,
    base_dir: Option<&Path>,
    diagnostics: &Diagnostics,
) -> Result<Spawned, UpstreamError> {
    let mut command = build_command(spec, base_dir)?;
    let spawned = process::spawn(&mut command, &spec.name, diagnostics)?;
    let blocked = BlockedSince::default();
    Ok(Spawned {
        group: spawned.group,
        stdout: spawned.stdout,
        stdin: WriteWatch::new(spawned.stdin, blocked.clone()),
        blocked,
    })
}

/// The command for `spec` with `${VAR}`s expanded and its `cwd` resolved.
fn build_command(spec: &ServerSpec, base_dir: Option<&Path>) -> Result<CommandWrap, UpstreamError> {
    let conn = &spec.connection;
    let expand = |what: &str, text: &str| expand::expand_env(text).map_err(|e| UpstreamError::spec(what, e));
    let program = expand("command", conn.command.as_deref().unwrap_or_default())?;
    // `npx` is `npx.cmd` on Windows, which CreateProcess does not find by itself.
    #[cfg(windows)]
    let program = {
        let server_path = conn.env.iter().find(|(k, _)| k.eq_ignore_ascii_case("PATH"));
        let server_path = server_path.map(|(k, v)| expand(&format!("env.{k}"), v)).transpose()?;
        super::launcher::resolve_from_env(&program, server_path.as_deref())
            .map_or(program, |p| p.to_string_lossy().into_owned())
    };
    let mut command = tokio::process::Command::new(&program);
    let args = conn
        .args
        .iter()
        .enumerate()
        .map(|(i, arg)| expand(&format!("args[{i}]"), arg))
        .collect::<Result<Vec<_>, _>>()?;
    let mut env = Vec::with_capacity(conn.env.len());
    for (key, value) in &conn.env {
        env.push((key, value, SecretString::from(expand(&format!("env.{key}"), value)?)));
    }
    // Before the process can print anything: its first stderr line may quote them.
    secrets::register_stdio(
        &spec.name,
        &args,
        env.iter()
            .map(|(key, written, value)| (key.as_str(), written.as_str(), value.expose_secret())),
    );
    command.args(&args);
    for name in secrets::withheld() {
        command.env_remove(name);
    }
    for (key, _, value) in &env {
        command.env(key, value.expose_secret());
    }
    if let Some(cwd) = &conn.cwd {
        let cwd = Path::new(&expand("cwd", cwd)?).to_path_buf();
        let cwd = match base_dir {
            Some(base) if cwd.is_relative() => base.join(cwd),
            _ => cwd,
        };
        command.current_dir(&cwd);
    }
    command.stdin(std::process::Stdio::piped());
    command.stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    let mut wrapped = CommandWrap::from(command);
    process::configure(&mut wrapped);
    Ok(wrapped)
}

/// Since when a write to a server has been waiting for the server to read (none: not blocked).
#[derive(Debug, Clone, Default)]
pub(super) struct BlockedSince(Arc<Mutex<Option<Instant>>>);

impl BlockedSince {
    fn with<T>(&self, f: impl FnOnce(&mut Option<Instant>) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .expect("blocked-since lock is never poisoned: no panics while held"))
    }

    fn note(&self, pending: bool) {
        self.with(|since| match (pending, since.is_some()) {
            (true, false) => *since = Some(Instant::now()),
            (false, true) => *since = None,
            _ => {}
        });
    }

    /// How long the current write has been blocked, if one is.
    #[must_use]
    pub fn blocked_for(&self) -> Option<Duration> {
        self.with(|since| since.map(|at| at.elapsed()))
    }
}

/// Passes writes through, noting when one cannot proceed because the pipe is full.
pub(super) struct WriteWatch<W> {
    inner: W,
    blocked: BlockedSince,
}

impl<W> WriteWatch<W> {
    pub fn new(inner: W, blocked: BlockedSince) -> Self {
        Self { inner, blocked }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for WriteWatch<W> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.blocked.note(poll.is_pending());
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        this.blocked.note(poll.is_pending());
        poll
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_into_a_full_pipe_is_seen_as_blocked_until_it_drains() {
        let (writer, mut reader) = tokio::io::duplex(16);
        let blocked = BlockedSince::default();
        let mut watched = WriteWatch::new(writer, blocked.clone());
        assert_eq!(blocked.blocked_for(), None);
        let write = tokio::spawn(async move {
            watched.write_all(&[0; 64]).await.unwrap();
            watched
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(blocked.blocked_for().is_some(), "a write into a full pipe is blocked");
        let mut sink = vec![0; 64];
        tokio::io::AsyncReadExt::read_exact(&mut reader, &mut sink)
            .await
            .unwrap();
        let _watched = write.await.unwrap();
        assert_eq!(blocked.blocked_for(), None);
    }
}
