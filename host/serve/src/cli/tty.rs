//! Approvals for the CLI: answered on the controlling terminal (`/dev/tty`, so a prompt
//! works even when stdin and stdout are pipes), or by a fixed answer for one call.
//! Cards arrive escaped by the approvals broker: every field is one line, so a field
//! cannot draw a line of the frame.

use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cheng_host::approvals::{ApprovalRequest, Approver, Decision};

/// Approves without asking, saying so on stderr each time (auto-approve, `--approve yes`).
pub struct AutoApprover;

impl Approver for AutoApprover {
    fn name(&self) -> &str {
        "auto-approve"
    }

    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        eprintln!("cheng: approved without asking (auto-approve is on): {}", req.summary);
        Box::pin(async { Decision::AutoApproved })
    }
}

/// Declines every request (`--approve deny`).
pub struct DeclineAll;

impl Approver for DeclineAll {
    fn name(&self) -> &str {
        "--approve deny"
    }

    fn decide<'a>(&'a self, _req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async { Decision::Declined })
    }
}

/// Asks on `/dev/tty`; one prompt at a time. A prompt whose request is settled
/// elsewhere (answered from the console or another terminal, timed out, withdrawn) is
/// taken down at once — it says so — and the next request's prompt is shown, so an
/// answer is never typed into a prompt that no longer counts.
pub struct TtyApprover {
    tty: Arc<Mutex<File>>,
}

impl TtyApprover {
    /// `None` when the process has no controlling terminal.
    pub fn open() -> Option<Self> {
        let tty = OpenOptions::new().read(true).write(true).open("/dev/tty").ok()?;
        Some(TtyApprover { tty: Arc::new(Mutex::new(tty)) })
    }
}

impl Approver for TtyApprover {
    fn name(&self) -> &str {
        "terminal"
    }

    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        let tty = self.tty.clone();
        let card = format!(
            "\n── approval requested ── tool {} · role {} · run {}\n  summary: {}\n  detail:  {}\n  purpose: {}\n  workspace: {}\n  asked by: {}\nApprove? [y/N] ",
            req.tool, req.role, req.run, req.summary, req.detail, req.purpose, req.workspace, req.asked_by,
        );
        // Set when this wait is dropped: the request was settled some other way.
        struct Settled(Arc<AtomicBool>);
        impl Drop for Settled {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let settled = Arc::new(AtomicBool::new(false));
        let flag = settled.clone();
        Box::pin(async move {
            let _settled = Settled(settled);
            let answer = tokio::task::spawn_blocking(move || {
                let mut f = tty.lock().ok()?;
                if flag.load(Ordering::Relaxed) {
                    return None;
                }
                f.write_all(card.as_bytes()).ok()?;
                f.flush().ok()?;
                read_answer(&mut f, &flag)
            })
            .await
            .ok()
            .flatten();
            match answer.as_deref().map(str::trim) {
                Some("y") | Some("Y") | Some("yes") => Decision::Approved,
                Some(_) => Decision::Declined,
                None => Decision::NoApprover,
            }
        })
    }
}

/// One line typed at the terminal, or `None` once `settled` is set (checked five times a
/// second) or the terminal fails. The terminal is in canonical mode: a read returns a
/// whole line.
fn read_answer(f: &mut File, settled: &AtomicBool) -> Option<String> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let wait = Timespec { tv_sec: 0, tv_nsec: 200_000_000 };
    loop {
        if settled.load(Ordering::Relaxed) {
            let _ = f.write_all(b"(answered elsewhere)\n");
            return None;
        }
        let ready = poll(&mut [PollFd::from_borrowed_fd(f.as_fd(), PollFlags::IN)], Some(&wait));
        match ready {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {
                let mut buf = [0u8; 256];
                let n = f.read(&mut buf).ok()?;
                if n == 0 {
                    return None;
                }
                return Some(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
            Err(_) => return None,
        }
    }
}
