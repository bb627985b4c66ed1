//! The network for a command granted named hosts: an HTTP proxy the host runs for that
//! one command.
//!
//! The command runs in a network namespace of its own that holds only loopback. Before
//! the command starts, its init opens a listening socket there (`127.0.0.1:3128`) and
//! hands it to the host over a Unix socket pair; the host serves the proxy on it —
//! `CONNECT host:port` (HTTPS and anything tunnelled) and plain HTTP requests in
//! absolute form — and the command's `http_proxy`, `https_proxy`, `all_proxy` (and
//! upper-case forms) point at it, set by the host. Every target goes through the same
//! guard as `web_fetch` ([`crate::egress::Egress::check`]): the host must match one of the
//! granted patterns, `[web] deny_hosts` wins over any grant, the name is resolved once
//! by the host and no private, loopback or metadata address is reached unless `[web]
//! allow_private` opens it, and the address connected to is the address checked.
//! Each refusal is answered `403` and reported, naming host and port, for the call's
//! record. A connection that ignores the proxy has nowhere to go: the namespace has no
//! other interface, and Landlock allows the command TCP connections to the proxy's
//! port only.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::egress::{Egress, HostPattern, Reach};

/// The port the proxy listens on inside the command's network namespace.
pub const PORT: u16 = 3128;

/// Longest request head read.
const MAX_HEAD: usize = 32 << 10;

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A target the proxy refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The host and port asked for, as the command wrote them.
    pub target: String,
    /// Why (the guard's words).
    pub why: String,
}

/// The variables pointing a command at the proxy.
pub fn env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PORT}");
    let mut vars = Vec::new();
    for name in ["http_proxy", "https_proxy", "all_proxy"] {
        vars.push((name.to_string(), url.clone()));
        vars.push((name.to_ascii_uppercase(), url.clone()));
    }
    vars.push(("no_proxy".into(), String::new()));
    vars.push(("NO_PROXY".into(), String::new()));
    vars
}

/// A Unix socket pair for the listening socket's hand-over: (the host's end, the
/// init's end).
pub fn handover() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created for us.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Take the listening socket the init sent on `ours`.
pub fn receive(ours: &OwnedFd) -> io::Result<std::net::TcpListener> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut space = [0u64; 8];
    // SAFETY: a msghdr over live local buffers; the kernel fills at most their sizes.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&space);
        let n = libc::recvmsg(ours.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other("the command's init sent no listening socket"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
        let listener = std::net::TcpListener::from_raw_fd(fd);
        listener.set_nonblocking(true)?;
        Ok(listener)
    }
}

/// The proxy of one command: serves until dropped.
pub struct Proxy {
    task: tokio::task::JoinHandle<()>,
    refused: Arc<Mutex<Vec<Refused>>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Serve on `listener` for a command granted `hosts`, checking with `egress`.
    pub fn start(listener: std::net::TcpListener, egress: Arc<Egress>, hosts: &[String]) -> io::Result<Proxy> {
        let patterns: Vec<HostPattern> = hosts.iter().filter_map(|h| HostPattern::parse(h).ok()).collect();
        let reach = Arc::new(Reach::Only(patterns));
        let listener = TcpListener::from_std(listener)?;
        let refused = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let refused = refused.clone();
            async move {
                // Dropped with this task, which ends every connection it serves.
                let mut conns = tokio::task::JoinSet::new();
                loop {
                    let Ok((stream, _)) = listener.accept().await else { break };
                    while conns.try_join_next().is_some() {}
                    let (egress, reach, refused) = (egress.clone(), reach.clone(), refused.clone());
                    conns.spawn(async move {
                        if let Err(e) = serve(stream, &egress, &reach, &refused).await {
                            tracing::debug!(target: "cheng::process", "proxy connection ended: {e}");
                        }
                    });
                }
            }
        });
        Ok(Proxy { task, refused })
    }

    /// The targets refused so far.
    pub fn refused(&self) -> Vec<Refused> {
        self.refused.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Read a request head: the bytes through the blank line, and what followed it.
async fn read_head(stream: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::other("request head too long"));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before a request"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn reply(stream: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes()).await
}

/// One client connection: one request, then the bytes both ways.
async fn serve(mut client: TcpStream, egress: &Egress, reach: &Reach, refused: &Mutex<Vec<Refused>>) -> io::Result<()> {
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(r) => r?,
        Err(_) => return reply(&mut client, "408 Request Timeout", "no request in time\n").await,
    };
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let (method, target, version) =
        (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/1.") {
        return reply(&mut client, "400 Bad Request", "not an HTTP/1 request\n").await;
    }
    let (connect, authority, path) = if method.eq_ignore_ascii_case("CONNECT") {
        (true, target.to_string(), String::new())
    } else if let Some(rest) = target.strip_prefix("http://") {
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        (false, authority.to_string(), path.to_string())
    } else {
        return reply(
            &mut client,
            "400 Bad Request",
            "this proxy takes CONNECT host:port, or a plain http:// URL in absolute form\n",
        )
        .await;
    };
    let checked = match egress.check(false, &authority, reach).await {
        Ok(t) => t,
        Err(e) => {
            let why = e.to_string();
            refused
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Refused { target: authority.clone(), why: why.clone() });
            return reply(&mut client, "403 Forbidden", &format!("cheng: {authority}: {why}\n")).await;
        }
    };
    let mut upstream = None;
    let mut last = String::new();
    for addr in &checked.addrs {
        match tokio::time::timeout(egress.rules().connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                upstream = Some(s);
                break;
            }
            Ok(Err(e)) => last = format!("{addr}: {e}"),
            Err(_) => last = format!("{addr}: timed out"),
        }
    }
    let Some(mut upstream) = upstream else {
        return reply(&mut client, "502 Bad Gateway", &format!("cheng: cannot connect to {authority}: {last}\n")).await;
    };
    let _ = upstream.set_nodelay(true);
    if connect {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await?;
    } else {
        // The request in origin form, once, with the proxy's own headers left out.
        let mut out = format!("{method} {path} {version}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
            if matches!(name.as_str(), "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive") {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("connection: close\r\n\r\n");
        upstream.write_all(out.as_bytes()).await?;
    }
    if !rest.is_empty() {
        upstream.write_all(&rest).await?;
    }
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}
