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

use cheng_host::approvals::{Answer, ApprovalRequest, Approver, Decision, Scope, Tier};

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

/// The card as the terminal shows it, with the answers it takes.
fn card_text(req: &ApprovalRequest) -> String {
    let mut card = format!(
        "\n── approval requested ── tool {} · role {} · run {}\n  summary: {}\n  detail:  {}\n  purpose: {}\n  workspace: {}\n  asked by: {}\n",
        req.tool, req.role, req.run, req.summary, req.detail, req.purpose, req.workspace, req.asked_by,
    );
    let Some(offer) = &req.offer else {
        card.push_str("Approve? [y/N, or n: MESSAGE to say what to do instead] ");
        return card;
    };
    match offer.hosts.as_slice() {
        [] => card.push_str("  y runs it confined: the workspace and toolchains, no network\n"),
        hosts => card.push_str(&format!("  y runs it confined, with the network to {} only\n", hosts.join(", "))),
    }
    if offer.tiers.contains(&Tier::Full) {
        card.push_str(&format!("  f: {} (this command only)\n", offer.full));
    }
    if let Some(why) = &offer.once_only {
        card.push_str(&format!("  answered once only: {why}\n"));
        card.push_str("Approve? [y/f/N, or n: MESSAGE] ");
        return card;
    }
    card.push_str("  r: for the rest of this run; a: always (a learned rule, `cheng rules` lists it), keeping\n");
    for p in &offer.prefixes {
        let mark = if p.words == offer.prefix { " (default)" } else { "" };
        card.push_str(&format!("    {}: {}{mark}\n", p.words, p.text));
    }
    card.push_str("Approve? [y/r/a, r2/a2 to keep 2 words, f, N, or n: MESSAGE] ");
    card
}

/// A typed line as an answer: `y`, `r[N]`, `a[N]`, `f`, `n`, `n: MESSAGE`; `None` for
/// anything else (asked again).
fn parse_answer(line: &str) -> Option<Answer> {
    let t = line.trim();
    if let Some(m) = t.strip_prefix("n:").or_else(|| t.strip_prefix("no:")) {
        return Some(Answer::decline_with(m.trim()));
    }
    let (head, digits) = t.split_at(t.find(|c: char| c.is_ascii_digit()).unwrap_or(t.len()));
    let prefix = if digits.is_empty() { None } else { Some(digits.parse().ok()?) };
    let yes = |scope| Some(Answer { scope, prefix, ..Answer::yes() });
    match head {
        "y" | "Y" | "yes" if prefix.is_none() => yes(Scope::Once),
        "r" | "R" => yes(Scope::Run),
        "a" | "A" => yes(Scope::Always),
        "f" | "F" if prefix.is_none() => Some(Answer { tier: Some(Tier::Full), ..Answer::yes() }),
        "" | "n" | "N" | "no" if prefix.is_none() => Some(Answer::no()),
        _ => None,
    }
}

impl Approver for TtyApprover {
    fn name(&self) -> &str {
        "terminal"
    }

    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move { self.answer(req).await.decision })
    }

    fn answer<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        let tty = self.tty.clone();
        let card = card_text(req);
        let offer = req.offer.clone();
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
                // An answer the card does not take is asked again (three times).
                for _ in 0..3 {
                    let line = read_answer(&mut f, &flag)?;
                    match parse_answer(&line) {
                        Some(a) => match a.clone().checked(offer.as_ref(), cheng_host::approvals::Route::Operator) {
                            Ok(_) => return Some(a),
                            Err(why) => {
                                let _ = f.write_all(format!("  {why}\nAnswer again: ").as_bytes());
                            }
                        },
                        None => {
                            let _ = f.write_all(b"  not an answer here\nAnswer again: ");
                        }
                    }
                }
                Some(Answer::no())
            })
            .await
            .ok()
            .flatten();
            answer.unwrap_or_else(|| Decision::NoApprover.into())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_answers() {
        assert_eq!(parse_answer("y\n"), Some(Answer::yes()));
        assert_eq!(parse_answer("\n"), Some(Answer::no()));
        assert_eq!(parse_answer("n: use cargo check\n"), Some(Answer::decline_with("use cargo check")));
        assert_eq!(parse_answer("r").map(|a| (a.scope, a.prefix)), Some((Scope::Run, None)));
        assert_eq!(parse_answer("a2").map(|a| (a.scope, a.prefix)), Some((Scope::Always, Some(2))));
        assert_eq!(parse_answer("f").and_then(|a| a.tier), Some(Tier::Full));
        assert_eq!(parse_answer("maybe"), None);
        assert_eq!(parse_answer("y2"), None);
    }
}
