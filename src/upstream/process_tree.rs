//! The processes under a server, found through the process tree (Linux `/proc`).
//!
//! A process group catches everything a server starts, except what leaves it: a grandchild
//! that called `setsid` (a daemonising helper, a `detached` Node child) has a group and a
//! session of its own, and `killpg` never reaches it. It is still a descendant by parent
//! pid as long as its parents live, so the tree is walked from the server's pid and its
//! group's members *before* anything is signalled or stdin is closed (after that, an
//! orphan is re-parented to init and the link is gone). Each process is remembered with
//! its start time, so a pid reused later by an unrelated process is never signalled.
//!
//! Elsewhere than Linux the walk finds nothing, and the group (or job object) is all there is.

/// One line of `/proc/<pid>/stat`, the fields we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: u32,
    pub ppid: u32,
    pub pgid: u32,
    /// Clock ticks after boot: with the pid, names one process for good.
    pub start: u64,
}

/// A process to signal later: its pid and when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Member {
    pub pid: u32,
    pub start: u64,
}

impl From<ProcInfo> for Member {
    fn from(info: ProcInfo) -> Self {
        Self {
            pid: info.pid,
            start: info.start,
        }
    }
}

/// Parse `/proc/<pid>/stat` of process `pid`; `None` for a zombie (it is already gone for
/// our purpose) or an unreadable line.
#[must_use]
pub fn parse_stat(pid: u32, text: &str) -> Option<ProcInfo> {
    // The command name is in parentheses and may hold spaces and ')': fields start after
    // the last one. After it: state(3) ppid(4) pgrp(5) … starttime(22).
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    if *fields.first()? == "Z" {
        return None;
    }
    Some(ProcInfo {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every live process now (empty where there is no `/proc`).
#[must_use]
pub fn snapshot() -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read)
        .collect()
}

/// Process `pid` now, if it lives.
#[must_use]
pub fn read(pid: u32) -> Option<ProcInfo> {
    parse_stat(pid, &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether `member` still runs (the same process, not a later one with its pid).
#[must_use]
#[cfg_attr(not(unix), allow(dead_code, reason = "windows ends trees through the job object"))]
pub fn is_alive(member: Member) -> bool {
    read(member.pid).is_some_and(|info| info.start == member.start)
}

/// The tree of the server whose process (and group) is `leader`: the leader, every member of
/// its group, and all their descendants by parent pid, wherever their group or session.
#[must_use]
pub fn tree(all: &[ProcInfo], leader: u32) -> Vec<ProcInfo> {
    let mut found: Vec<ProcInfo> = all
        .iter()
        .filter(|p| p.pid == leader || p.pgid == leader)
        .copied()
        .collect();
    let mut next = 0;
    while next < found.len() {
        let parent = found[next].pid;
        for child in all.iter().filter(|p| p.ppid == parent) {
            if !found.iter().any(|f| f.pid == child.pid) {
                found.push(*child);
            }
        }
        next += 1;
    }
    found
}

/// Send `signal` to `member` if it is still the process we saw; whether it was.
#[cfg(unix)]
pub fn signal(member: Member, signal: nix::sys::signal::Signal) -> bool {
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    let Ok(pid) = i32::try_from(member.pid) else {
        return false;
    };
    // The start-time check and the kill are two steps; a pid is reused only after the
    // process is gone *and* the kernel has cycled through the pid space, so the gap is moot.
    is_alive(member) && kill(Pid::from_raw(pid), signal).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `stat` line of process `pid` (command `comm`, state `state`, parent `parent`,
    /// group `group`, started at `start`).
    fn stat_line(pid: u32, comm: &str, state: char, parent: u32, group: u32, start: u64) -> String {
        format!("{pid} ({comm}) {state} {parent} {group} {group} 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 {start} 1000 10 18446744073709551615")
    }

    #[test]
    fn stat_fields_survive_odd_command_names() {
        let text = stat_line(42, "a) (b c", 'S', 7, 40, 123_456);
        assert_eq!(
            parse_stat(42, &text),
            Some(ProcInfo {
                pid: 42,
                ppid: 7,
                pgid: 40,
                start: 123_456
            })
        );
        assert_eq!(parse_stat(42, &stat_line(42, "zombie", 'Z', 7, 40, 1)), None);
        assert_eq!(parse_stat(42, "42 (cut"), None);
        assert_eq!(parse_stat(42, ""), None);
    }

    #[test]
    fn the_tree_holds_the_group_and_escaped_descendants() {
        let p = |pid, ppid, pgid| ProcInfo {
            pid,
            ppid,
            pgid,
            start: u64::from(pid),
        };
        let all = [
            p(1, 0, 1),
            p(10, 1, 10),     // the gateway
            p(100, 10, 100),  // the server (group leader)
            p(101, 100, 100), // its child, same group
            p(102, 101, 102), // a grandchild that called setsid
            p(103, 102, 102), // and its own child
            p(200, 1, 100),   // a member whose parent died (re-parented to init)
            p(201, 200, 201), // its escaped child
            p(300, 10, 300),  // another server
            p(301, 300, 300),
        ];
        let mut pids: Vec<u32> = tree(&all, 100).iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, [100, 101, 102, 103, 200, 201]);
        assert!(tree(&all, 999).is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_found_and_alive() {
        let me = read(std::process::id()).expect("own stat");
        assert!(is_alive(me.into()));
        assert!(!is_alive(Member {
            pid: me.pid,
            start: me.start + 1
        }));
        assert!(snapshot().iter().any(|p| p.pid == me.pid));
    }
}
