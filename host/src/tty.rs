//! Approvals for the CLI: answered on the controlling terminal (`/dev/tty`, so a prompt
//! works even when stdin and stdout are pipes), or by a fixed answer for one call.
//! Cards arrive escaped by the approvals broker: every field is one line, so a field
//! cannot draw a line of the frame.

use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::pin::Pin;
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

/// Asks on `/dev/tty`; one prompt at a time.
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
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || {
                let mut f = tty.lock().ok()?;
                f.write_all(card.as_bytes()).ok()?;
                f.flush().ok()?;
                let mut line = String::new();
                BufReader::new(&mut *f).read_line(&mut line).ok()?;
                Some(line)
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
