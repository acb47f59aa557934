//! A watchdog that ends every server's process tree when the gateway dies, even by SIGKILL.
//!
//! A gateway killed outright runs no cleanup. Its servers only see stdin EOF, which a server
//! may ignore; the children they started never see anything. So the first server spawned
//! also starts this watchdog: a small `/bin/sh` script, in a process group of its own (a
//! signal to the gateway's group does not reach it), reading a pipe whose other end only
//! the gateway holds (close-on-exec: servers do not inherit it). The gateway writes
//! `+ PID START` when a server starts and `- PID` once its tree is gone. When the pipe reads
//! EOF — the kernel closes it whatever way the gateway ended — the script waits until the
//! gateway's exit has re-parented its servers (stopping a group before that makes the kernel
//! hang it up as a newly orphaned group with a stopped member), stops each listed group
//! (`SIGSTOP`, so no server exits and orphans its children while it looks), walks
//! `/proc` for every descendant of the groups (grandchildren that left with `setsid`
//! included), and SIGKILLs them all. A pid whose start time differs from the one listed was
//! reused by an unrelated process and is left alone. After a clean shutdown the list is
//! empty and it just exits.
//!
//! Why not `PR_SET_PDEATHSIG` on each server: it reaches only the server itself, not the
//! processes it started (an `npx` launcher's `node`, a setsid grandchild); it fires when the
//! *thread* that spawned the server ends, not the process (a tokio worker, or a blocking-pool
//! thread retiring after 10 s idle); and it needs `unsafe` code between fork and exec. The
//! watchdog costs one idle `sh` per gateway and no unsafe code.
//!
//! A server that exits the instant its stdin closes orphans the children that left its group
//! (setsid) before the watchdog may stop it — it must first let the gateway's exit
//! re-parent the servers, or the kernel would hang up the stopped groups. So the gateway
//! also lists those escaped descendants themselves, found by walking the tree when the
//! server first speaks on stdout and whenever it is asked to close. Known gap: a setsid
//! child started later than that, by a server that exits on EOF, survives a gateway killed
//! by SIGKILL.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// The watchdog, in POSIX sh (dash, bash, busybox). Reads `+ PID START` / `- PID` lines;
/// on EOF ends what is listed. `stat` reads `/proc/PID/stat` into `ppid pgid start` without
/// a fork (the command name, in parentheses, may hold spaces: fields follow the last `) `).
const SCRIPT: &str = r#"
trap '' INT HUP
stat() {
  { read -r line < "/proc/$1/stat"; } 2>/dev/null || return 1
  set -- ${line##*) }
  [ "$1" != Z ] || return 1
  ppid=$2 pgid=$3 start=${20}
}
trees=''
while read -r op pid when; do
  case $op in
    +) trees="$trees $pid:$when" ;;
    -) kept=''
       for t in $trees; do [ "${t%%:*}" = "$pid" ] || kept="$kept $t"; done
       trees=$kept ;;
  esac
done
[ -n "$trees" ] || exit 0
# Stopping a group while the gateway still exits would make the kernel send it SIGHUP and
# SIGCONT once the group is orphaned (POSIX job control): while the gateway is exiting
# (a zombie, or PF_EXITING = 4 in its flags), wait until its children are re-parented.
exiting() {
  { read -r line < "/proc/$PPID/stat"; } 2>/dev/null || return 1
  set -- ${line##*) }
  [ "$1" = Z ] || [ $(($7 & 4)) -ne 0 ]
}
for t in $trees; do
  n=0
  while stat "${t%%:*}" && [ "$ppid" = "$PPID" ] && exiting && [ $n -lt 100000 ]; do n=$((n + 1)); done
done
groups=''
for t in $trees; do
  pid=${t%%:*}
  if stat "$pid" && [ "$start" != "${t#*:}" ]; then continue; fi
  groups="$groups $pid"
  kill -s STOP -- "-$pid" 2>/dev/null
done
doomed=" $groups "
if [ -d /proc/self ]; then
  table=''
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    stat "$p" || continue
    table="$table $p:$ppid"
    case $doomed in *" $pgid "*) case $doomed in *" $p "*) ;; *) doomed="$doomed$p " ;; esac ;; esac
  done
  grown=1
  while [ $grown = 1 ]; do
    grown=0
    for e in $table; do
      p=${e%%:*}
      case $doomed in *" $p "*) continue ;; esac
      case $doomed in *" ${e#*:} "*) doomed="$doomed$p "; grown=1 ;; esac
    done
  done
fi
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
for p in $doomed; do kill -s KILL "$p" 2>/dev/null; done
exit 0
"#;

struct Watchdog {
    child: Child,
    pipe: ChildStdin,
}

#[derive(Default)]
struct State {
    watchdog: Option<Watchdog>,
    /// Leader pid → start time of every tree listed, to brief a new watchdog.
    trees: HashMap<u32, u64>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with_state<T>(f: impl FnOnce(&mut State) -> T) -> T {
    let mut guard = STATE
        .lock()
        .expect("reaper lock is never poisoned: no panics while held");
    f(guard.get_or_insert_with(State::default))
}

/// List the tree led by `leader` (started at `start`, in clock ticks after boot).
pub fn watch(leader: u32, start: u64) {
    with_state(|state| {
        state.trees.insert(leader, start);
        send(state, &format!("+ {leader} {start}\n"));
    });
}

/// The tree led by `leader` is gone: take it off the list.
pub fn forget(leader: u32) {
    with_state(|state| {
        if state.trees.remove(&leader).is_some() {
            send(state, &format!("- {leader}\n"));
        }
    });
}

/// Write `line` to the watchdog, starting one (briefed with every listed tree) if there is
/// none or the last one died.
fn send(state: &mut State, line: &str) {
    if let Some(watchdog) = &mut state.watchdog {
        if watchdog.pipe.write_all(line.as_bytes()).is_ok() {
            return;
        }
        // Reap the dead one; a new one gets the whole list below.
        let _ = watchdog.child.wait();
        state.watchdog = None;
    }
    match start() {
        Ok(mut watchdog) => {
            let mut brief = String::new();
            for (pid, start) in &state.trees {
                use std::fmt::Write as _;
                let _ = writeln!(brief, "+ {pid} {start}");
            }
            if watchdog.pipe.write_all(brief.as_bytes()).is_ok() {
                state.watchdog = Some(watchdog);
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot start the watchdog that ends servers if the gateway is killed");
        }
    }
}

fn start() -> std::io::Result<Watchdog> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pipe = child.stdin.take().expect("stdin is piped above");
    Ok(Watchdog { child, pipe })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::upstream::process_tree;
    use std::time::{Duration, Instant};

    fn wait_gone(pids: &[process_tree::Member]) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if pids.iter().all(|m| !process_tree::is_alive(*m)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn member(pid: u32) -> process_tree::Member {
        process_tree::read(pid).expect("running").into()
    }

    /// A group led by `sh` holding a same-group child and a `setsid` grandchild that ignores
    /// SIGTERM; returns (leader, child pids) once all three run.
    fn spawn_tree() -> (Child, Vec<process_tree::Member>) {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let script = format!(
            "sleep 600 & echo $! > {p}.1; setsid sh -c 'trap \"\" TERM; echo $$ > {p}.2; sleep 600' & wait",
            p = pids.display()
        );
        let leader = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .process_group(0)
            .spawn()
            .unwrap();
        let read = |n| {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(text) = std::fs::read_to_string(format!("{}.{n}", pids.display())) {
                    if let Ok(pid) = text.trim().parse::<u32>() {
                        return pid;
                    }
                }
                assert!(Instant::now() < deadline, "tree did not start");
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let members = vec![member(leader.id()), member(read(1)), member(read(2))];
        (leader, members)
    }

    #[test]
    fn eof_ends_every_listed_tree_and_spares_the_rest() {
        let (mut leader, members) = spawn_tree();
        let (mut bystander, bystander_members) = spawn_tree();
        let mut watchdog = start().unwrap();
        let line = format!("+ {} {}\n+ {} {}\n", members[0].pid, members[0].start, 999_999, 1);
        watchdog.pipe.write_all(line.as_bytes()).unwrap();
        // The gateway dies: its end of the pipe closes.
        drop(watchdog.pipe);
        assert!(wait_gone(&members), "tree left after the watchdog's EOF");
        let _ = leader.wait();
        let _ = watchdog.child.wait();
        assert!(bystander_members.iter().all(|m| process_tree::is_alive(*m)));
        for m in &bystander_members {
            process_tree::signal(*m, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = bystander.wait();
    }

    #[test]
    fn forgotten_and_reused_pids_are_left_alone() {
        let (mut leader, members) = spawn_tree();
        let mut watchdog = start().unwrap();
        let m = members[0];
        // Listed then forgotten, and listed with a start time of another process.
        let lines = format!("+ {0} {1}\n- {0}\n+ {0} {2}\n", m.pid, m.start, m.start + 1);
        watchdog.pipe.write_all(lines.as_bytes()).unwrap();
        drop(watchdog.pipe);
        let _ = watchdog.child.wait();
        assert!(members.iter().all(|m| process_tree::is_alive(*m)));
        for m in &members {
            process_tree::signal(*m, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = leader.wait();
    }
}
