//! A downstream server's process tree: spawning it, keeping its child handle, ending it.
//!
//! Each server is spawned as the leader of a new process group (via `process-wrap`; a job
//! object on Windows), so a launcher like `npx` and the `node` it starts share one group.
//! `process-wrap`'s child handle is the one thing that can signal the group (or end the
//! job) on every OS; one task owns it, waits for the exit (reaping the leader, recording
//! how it ended) and carries out the orders of every `ProcessGroup` handle meanwhile.
//!
//! Ending a server: closing stdin is the polite MCP way; then SIGTERM and, after a grace,
//! SIGKILL go to the whole group *and* to the descendants that left it with `setsid`, found
//! through the process tree before anything was signalled (`process_tree`). On Windows the
//! job object holds every descendant and `TerminateJobObject` ends them all. A tree lives
//! no longer than its handles: when the last one is dropped, the tree is killed. If the
//! gateway itself is killed, the watchdog (`reaper`, unix) ends what is left; on Windows the
//! job is created kill-on-close, so the kernel does it.

use std::collections::HashSet;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use tokio::process::{ChildStdin, ChildStdout};
#[cfg(unix)]
use tokio::sync::oneshot;
use tokio::sync::{mpsc, watch};

use super::diagnostics::{read_stderr, Diagnostics, StdoutTap};
use super::launcher::{Disk, SpawnError};
use super::lock;
use super::process_tree::{self, Member};

/// How often a terminating tree is checked for being empty.
#[cfg(unix)]
const POLL: Duration = Duration::from_millis(20);

/// Handle on one spawned server's process tree; clones share it. `none()` for remote servers.
#[derive(Debug, Clone, Default)]
pub struct ProcessGroup {
    tree: Option<Arc<Tree>>,
}

#[derive(Debug)]
struct Tree {
    leader: u32,
    orders: mpsc::UnboundedSender<Order>,
    /// Whether the server has exited: Windows waits on it before ending the job (unix polls the
    /// group instead, which outlives the server).
    #[cfg_attr(unix, allow(dead_code))]
    exited: watch::Receiver<bool>,
    /// Escaped descendants seen so far (they may be orphans by the time we end them).
    remembered: Remembered,
}

/// Descendants of a server that left its group, as last seen.
type Remembered = Arc<Mutex<HashSet<Member>>>;

/// What the task owning the child handle is asked to do.
#[derive(Debug)]
enum Order {
    /// Send a signal to the group; the answer tells whether the group still exists.
    #[cfg(unix)]
    Signal(i32, oneshot::Sender<io::Result<()>>),
    /// SIGKILL the group (unix), terminate the job (windows).
    Kill,
}

/// A freshly spawned stdio server: its tree and the two pipes MCP runs over (stderr is
/// already being read into the diagnostics).
pub struct Spawned {
    pub group: ProcessGroup,
    pub stdin: ChildStdin,
    pub stdout: StdoutTap<ChildStdout>,
}

/// Make the spawned process lead a new group (unix) or job (windows), killed if its handle
/// is dropped (the job is then created kill-on-close).
pub fn configure(command: &mut CommandWrap) {
    #[cfg(unix)]
    command.wrap(process_wrap::tokio::ProcessGroup::leader());
    #[cfg(windows)]
    command.wrap(process_wrap::tokio::JobObject);
    command.wrap(KillOnDrop);
}

/// Spawn `command` (configured by `configure`, all three streams piped) as server `server`:
/// stderr goes to `diagnostics`, and the exit is recorded there too.
///
/// # Errors
/// Why the process could not start, with the real cause (a missing `cwd` is not a missing
/// command) and its fix.
pub fn spawn(command: &mut CommandWrap, server: &str, diagnostics: &Diagnostics) -> Result<Spawned, SpawnError> {
    let mut child = command.spawn().map_err(|error| classify(command, error))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin().take(), child.stdout().take(), child.stderr().take())
    else {
        // A command built without pipes is a bug of ours, not the server's: end the process.
        let _ = child.start_kill();
        return Err(SpawnError::Other {
            program: program_text(command),
            source: io::Error::other("stdin, stdout and stderr must be piped"),
        });
    };
    let leader = child.id().unwrap_or_default();
    tokio::spawn(read_stderr(server.to_owned(), stderr, diagnostics.clone()));
    #[cfg(unix)]
    if let Some(info) = process_tree::read(leader) {
        super::reaper::watch(leader, info.start);
    } else {
        // No /proc (macOS, BSD): listed without a start time, the group is still ended.
        super::reaper::watch(leader, 0);
    }
    let (orders, inbox) = mpsc::unbounded_channel();
    let (exit_tx, exited) = watch::channel(false);
    let remembered = Remembered::default();
    let kept = Kept {
        leader,
        exited: exit_tx,
        diagnostics: diagnostics.clone(),
        remembered: remembered.clone(),
    };
    tokio::spawn(keep(child, inbox, kept));
    let tree = Tree {
        leader,
        orders,
        exited,
        remembered,
    };
    Ok(Spawned {
        group: ProcessGroup {
            tree: Some(Arc::new(tree)),
        },
        stdin,
        stdout: StdoutTap::new(stdout, diagnostics.clone()),
    })
}

/// The spawn error of `command` with its cause found (missing cwd, command, interpreter…).
fn classify(command: &CommandWrap, error: io::Error) -> SpawnError {
    let std = command.command().as_std();
    let path = match std.get_envs().find(|(key, _)| key.eq_ignore_ascii_case("PATH")) {
        Some((_, value)) => value.map(ToOwned::to_owned),
        None => std::env::var_os("PATH"),
    };
    SpawnError::classify(error, std.get_program(), std.get_current_dir(), path.as_deref(), &Disk)
}

fn program_text(command: &CommandWrap) -> String {
    command.command().as_std().get_program().to_string_lossy().into_owned()
}

/// What the task owning a child handle shares with the handles.
struct Kept {
    leader: u32,
    exited: watch::Sender<bool>,
    diagnostics: Diagnostics,
    remembered: Remembered,
}

/// Owns the child handle: reaps the leader and records its exit, signals the group when
/// asked, and ends the tree once no handle is left. When the server first speaks (its
/// start-up code, where helpers get started, has run), the tree is walked once so the
/// watchdog knows the escaped descendants even if the server exits the instant the gateway dies.
async fn keep(mut child: Box<dyn ChildWrapper>, mut inbox: mpsc::UnboundedReceiver<Order>, kept: Kept) {
    let Kept {
        leader,
        exited,
        diagnostics,
        remembered,
    } = kept;
    let mut answered = diagnostics.answered();
    let mut walked = false;
    let mut running = true;
    loop {
        let order = tokio::select! {
            spoke = answered.wait_for(|spoke| *spoke), if !walked => {
                walked = true;
                if spoke.is_ok() {
                    drop(spoke);
                    remember(leader, &remembered);
                }
                continue;
            }
            status = child.wait(), if running => {
                diagnostics.set_exit(match status {
                    Ok(status) => format!("exited with {status}"),
                    Err(error) => format!("could not be waited for: {error}"),
                });
                running = false;
                exited.send_replace(true);
                #[cfg(unix)]
                if group_gone(child.signal(0)) {
                    super::reaper::forget(leader);
                }
                continue;
            }
            order = inbox.recv() => order,
        };
        match order {
            #[cfg(unix)]
            Some(Order::Signal(signal, answer)) => {
                let _ = answer.send(child.signal(signal));
            }
            Some(Order::Kill) => {
                let _ = child.start_kill();
            }
            None => break,
        }
    }
    // No handle is left, so nobody could end this tree later: end it now.
    let _ = child.start_kill();
    for member in lock(&remembered).iter() {
        #[cfg(unix)]
        process_tree::signal(*member, nix::sys::signal::Signal::SIGKILL);
        forget(member.pid);
    }
    forget(leader);
}

/// Note the escaped descendants of `leader` now, and list the new ones with the watchdog.
fn remember(leader: u32, remembered: &Remembered) {
    let members = escaped(leader);
    let mut known = lock(remembered);
    for member in members {
        if known.insert(member) {
            #[cfg(unix)]
            super::reaper::watch(member.pid, member.start);
        }
    }
}

/// Take `pid` off the watchdog's list.
fn forget(pid: u32) {
    #[cfg(unix)]
    super::reaper::forget(pid);
    #[cfg(not(unix))]
    let _ = pid;
}

/// Whether a signal's outcome says the group no longer exists.
#[cfg(unix)]
fn group_gone(outcome: io::Result<()>) -> bool {
    matches!(outcome, Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32))
}

impl ProcessGroup {
    /// No process (a remote server).
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    /// Note every process of the tree now, those that left the group included. Call it
    /// before closing the server's stdin: a server that exits on EOF orphans its escaped
    /// children, and then only this record still knows them.
    pub fn remember_tree(&self) {
        if let Some(tree) = &self.tree {
            remember(tree.leader, &tree.remembered);
        }
    }

    /// End the tree: SIGTERM the group and every escaped descendant, wait up to `grace` for
    /// all to exit, then SIGKILL what is left. On Windows: wait up to `grace` for the job to
    /// empty (stdin is closed by then), then terminate the job.
    pub async fn terminate(&self, grace: Duration) {
        let Some(tree) = &self.tree else { return };
        #[cfg(unix)]
        {
            use nix::sys::signal::Signal;
            let mut members = lock(&tree.remembered).clone();
            members.extend(escaped(tree.leader));
            let group_alive = !group_gone(tree.signal(Signal::SIGTERM as i32).await);
            members.retain(|m| process_tree::signal(*m, Signal::SIGTERM));
            let deadline = tokio::time::Instant::now() + grace;
            let mut group_alive = group_alive;
            while (group_alive || !members.is_empty()) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(POLL).await;
                group_alive = group_alive && !group_gone(tree.signal(0).await);
                members.retain(|m| process_tree::is_alive(*m));
            }
            if group_alive || !members.is_empty() {
                // Whatever the group started meanwhile is in the tree now, too.
                members.extend(escaped(tree.leader));
                let _ = tree.orders.send(Order::Kill);
                for member in &members {
                    process_tree::signal(*member, Signal::SIGKILL);
                }
            }
            if !group_alive {
                forget(tree.leader);
            }
            for member in lock(&tree.remembered).iter() {
                if !process_tree::is_alive(*member) {
                    forget(member.pid);
                }
            }
        }
        #[cfg(not(unix))]
        {
            let mut exited = tree.exited.clone();
            let _ = tokio::time::timeout(grace, exited.wait_for(|gone| *gone)).await;
            let _ = tree.orders.send(Order::Kill);
        }
    }

    /// Kill the tree now (for `Drop`, where nothing can be awaited).
    pub fn kill_now(&self) {
        let Some(tree) = &self.tree else { return };
        let _ = tree.orders.send(Order::Kill);
        #[cfg(unix)]
        {
            let mut members = lock(&tree.remembered).clone();
            members.extend(escaped(tree.leader));
            for member in members {
                process_tree::signal(member, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

impl Tree {
    /// Signal the group through the task that owns the child handle.
    #[cfg(unix)]
    async fn signal(&self, signal: i32) -> io::Result<()> {
        let (answer, outcome) = oneshot::channel();
        self.orders
            .send(Order::Signal(signal, answer))
            .map_err(|_| io::Error::from_raw_os_error(nix::errno::Errno::ESRCH as i32))?;
        outcome
            .await
            .unwrap_or_else(|_| Err(io::Error::from_raw_os_error(nix::errno::Errno::ESRCH as i32)))
    }
}

/// The descendants of `leader` that a signal to its group would miss.
fn escaped(leader: u32) -> Vec<Member> {
    process_tree::tree(&process_tree::snapshot(), leader)
        .into_iter()
        .filter(|p| p.pgid != leader)
        .map(Member::from)
        .collect()
}
