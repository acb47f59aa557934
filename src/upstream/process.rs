//! Process groups: end a downstream server together with everything it spawned.
//!
//! Each server is spawned as the leader of a new process group (via `process-wrap`; a job
//! object on Windows), so a launcher like `npx` and the `node` it starts share one group.
//! Closing stdin is the polite MCP way to stop a server; a server that ignores it, or leaves a
//! grandchild behind, gets SIGTERM and then SIGKILL on the whole group.

use std::time::Duration;

use process_wrap::tokio::CommandWrap;

/// The group of one spawned server (the leader's pid).
#[derive(Debug, Clone, Copy)]
pub struct ProcessGroup {
    #[cfg_attr(
        not(unix),
        expect(dead_code, reason = "windows ends the tree through its job object")
    )]
    pgid: Option<u32>,
}

impl ProcessGroup {
    pub fn new(pgid: Option<u32>) -> Self {
        Self { pgid }
    }

    /// Make the spawned process lead a new group (unix) or job (windows).
    pub fn configure(command: &mut CommandWrap) {
        #[cfg(unix)]
        command.wrap(process_wrap::tokio::ProcessGroup::leader());
        #[cfg(windows)]
        command.wrap(process_wrap::tokio::JobObject);
    }

    /// SIGTERM the group, wait up to `grace` for it to empty, then SIGKILL what is left.
    pub async fn terminate(self, grace: Duration) {
        #[cfg(unix)]
        if let Some(pgid) = self.unix_pgid() {
            if !signal_group(pgid, libc::SIGTERM) {
                return;
            }
            let deadline = tokio::time::Instant::now() + grace;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if !signal_group(pgid, 0) {
                    return;
                }
            }
            signal_group(pgid, libc::SIGKILL);
        }
        #[cfg(not(unix))]
        let _ = grace;
    }

    /// SIGKILL the group now (for `Drop`, where nothing can be awaited).
    pub fn kill_now(self) {
        #[cfg(unix)]
        if let Some(pgid) = self.unix_pgid() {
            signal_group(pgid, libc::SIGKILL);
        }
    }

    #[cfg(unix)]
    fn unix_pgid(self) -> Option<i32> {
        self.pgid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1)
    }
}

/// Send `signal` to every process of group `pgid`; false when the group no longer exists.
#[cfg(unix)]
#[expect(unsafe_code, reason = "killpg is the only way to signal a whole process group")]
fn signal_group(pgid: i32, signal: i32) -> bool {
    // SAFETY: killpg has no memory-safety preconditions; a stale pgid only yields ESRCH.
    unsafe { libc::killpg(pgid, signal) == 0 }
}
