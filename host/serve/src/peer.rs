//! Who is at the other end of the approvals socket. Being the same user is not enough:
//! every command and MCP server a host starts runs as that user too, and a child that
//! could list and answer approvals would approve the agent's own waiting commands.
//! So every connection is vetted, and refused when any of these holds:
//!
//! 1. **A namespace of its own.** The connecting process's user or pid namespace is
//!    not the server's. Everything a host starts runs in namespaces of its own
//!    (the host's process spawner), and no process can leave a user namespace for its
//!    parent: this holds for anything a child forks, `setsid`ed or double-forked.
//! 2. **A host's descendant.** One of its ancestors is a running `cheng serve` of
//!    this state directory (each has a socket named by its pid). Where the host is a
//!    child subreaper (the `/proc` walk), orphans of its commands are re-parented to it
//!    and stay its descendants.
//! 3. **A command's cgroup.** It runs in a cgroup a host made for a command
//!    (`cheng-<pid>-<id>`), which no process of it can leave (Landlock keeps it from
//!    writing the cgroup tree).
//!
//! What cannot be read (a `/proc` entry gone or hidden, a process that made itself
//! undumpable to hide its namespaces) is refused too. The process is pinned by a pidfd
//! taken from the socket (`SO_PEERPIDFD`, Linux 6.5) and checked alive after the
//! checks, so a pid reused in between is never vetted in its place.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;

/// `SO_PEERPIDFD` (`asm-generic/socket.h`; not in every libc binding yet).
const SO_PEERPIDFD: libc::c_int = 77;

/// A pidfd for the process that connected `sock`, when the kernel gives one.
fn peer_pidfd(sock: RawFd) -> Option<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int into `fd`.
    let rc = unsafe {
        libc::getsockopt(sock, libc::SOL_SOCKET, SO_PEERPIDFD, (&mut fd as *mut libc::c_int).cast(), &mut len)
    };
    // SAFETY: on success the descriptor is new and ours.
    (rc == 0 && fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the process behind `pidfd` still runs.
fn alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: signal 0 through a pidfd only checks that the process exists.
    unsafe { libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), 0, std::ptr::null::<u8>(), 0u32) == 0 }
}

/// Why a connecting process is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The socket names no process this server can see.
    #[error("the connecting process is not visible here")]
    Invisible,
    /// Check 1: it runs in a user or pid namespace of its own.
    #[error("process {pid} runs in a {namespace} namespace of its own, as everything a host starts does")]
    OwnNamespace {
        /// The process.
        pid: i32,
        /// `user` or `pid`.
        namespace: &'static str,
    },
    /// Check 2: it descends from a running server of this state directory.
    #[error("process {pid} descends from a running `cheng serve` (pid {host})")]
    HostDescendant {
        /// The process.
        pid: i32,
        /// The server it descends from.
        host: i32,
    },
    /// Check 3: it runs in a cgroup a host made for a command.
    #[error("process {pid} runs in a command's cgroup ({cgroup})")]
    CommandCgroup {
        /// The process.
        pid: i32,
        /// The cgroup.
        cgroup: String,
    },
    /// Something a check needs could not be read (and is then refused).
    #[error("{0}")]
    Unreadable(String),
    /// It ended before the checks finished (its pid may be someone else's now).
    #[error("process {0} ended before it could be vetted")]
    Ended(i32),
}

/// Vet the process `pid` that connected on `sock`; `hosts` are the pids of the running
/// servers of this state directory, this one included. `Err` says why it is refused.
pub fn vet(sock: RawFd, pid: i32, hosts: &[i32]) -> Result<(), Refused> {
    let pinned = peer_pidfd(sock);
    let verdict = started_by_a_host(pid, hosts);
    if let Some(fd) = &pinned
        && !alive(fd)
    {
        return Err(Refused::Ended(pid));
    }
    verdict
}

/// The checks on `pid`, by `/proc`.
fn started_by_a_host(pid: i32, hosts: &[i32]) -> Result<(), Refused> {
    if pid <= 0 {
        return Err(Refused::Invisible);
    }
    for ns in ["user", "pid"] {
        let id = |p: &str| std::fs::metadata(format!("/proc/{p}/ns/{ns}")).map(|m| (m.dev(), m.ino()));
        match (id("self"), id(&pid.to_string())) {
            (Ok(mine), Ok(theirs)) if mine == theirs => {}
            (Ok(_), Ok(_)) => {
                return Err(Refused::OwnNamespace { pid, namespace: ns });
            }
            (_, Err(e)) => {
                return Err(Refused::Unreadable(format!("the namespaces of process {pid} cannot be read ({e})")));
            }
            (Err(e), _) => {
                return Err(Refused::Unreadable(format!("this server's own namespaces cannot be read ({e})")));
            }
        }
    }
    let mut p = pid;
    for _ in 0..4096 {
        if hosts.contains(&p) {
            return Err(Refused::HostDescendant { pid, host: p });
        }
        if p <= 1 {
            break;
        }
        match cheng_host::process_stat(p) {
            Some(st) => p = st.ppid,
            None => return Err(Refused::Unreadable(format!("the ancestry of process {pid} cannot be read"))),
        }
    }
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| Refused::Unreadable(format!("the cgroup of process {pid} cannot be read ({e})")))?;
    if let Some(cg) = cgroups.lines().filter_map(|l| l.splitn(3, ':').nth(2)).find(|path| in_command_cgroup(path)) {
        return Err(Refused::CommandCgroup { pid, cgroup: cg.to_string() });
    }
    Ok(())
}

/// Whether a cgroup path has a component a host made for a command (`cheng-<pid>-…`).
fn in_command_cgroup(path: &str) -> bool {
    path.split('/').any(|c| {
        c.strip_prefix("cheng-")
            .and_then(|rest| rest.split_once('-'))
            .is_some_and(|(pid, _)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_cgroups_are_recognised() {
        assert!(in_command_cgroup("/user.slice/cheng-1234-abc"));
        assert!(in_command_cgroup("/a/cheng-1-x/b"));
        assert!(!in_command_cgroup("/user.slice/cheng-probe-1"));
        assert!(!in_command_cgroup("/cheng-"));
        assert!(!in_command_cgroup("/user.slice/session-2.scope"));
    }

    #[test]
    fn this_process_passes_and_its_children_do_not() {
        // This test process is no host's descendant.
        assert_eq!(started_by_a_host(std::process::id() as i32, &[]), Ok(()));
        // A child of a "host" (this process, listed) is refused by ancestry.
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let why = started_by_a_host(child.id() as i32, &[std::process::id() as i32]).unwrap_err();
        assert_eq!(why, Refused::HostDescendant { pid: child.id() as i32, host: std::process::id() as i32 });
        let _ = child.kill();
        let _ = child.wait();
        // A pid that does not exist is refused, not waved through.
        assert!(matches!(started_by_a_host(i32::MAX - 7, &[]), Err(Refused::Unreadable(_))));
    }
}
