//! Connecting to a checked [`Target`]: TCP to one of its checked addresses (directly,
//! or through the operator's proxy by `CONNECT` to that address), TLS with the
//! original name as the server name, then HTTP/1.1 with hyper.

use std::fmt;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{Egress, Proxy, Target};

/// Why a checked request could not be sent.
#[derive(Debug)]
pub enum SendError {
    /// No checked address accepted a connection.
    Connect(String),
    /// The connection, or the answer, took longer than allowed.
    Timeout(&'static str),
    /// The TLS handshake failed (certificate, protocol).
    Tls(String),
    /// The proxy refused or failed.
    Proxy(String),
    /// HTTP failed.
    Http(hyper::Error),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Connect(m) => write!(f, "cannot connect: {m}"),
            SendError::Timeout(what) => write!(f, "timed out {what}"),
            SendError::Tls(m) => write!(f, "TLS failed: {m}"),
            SendError::Proxy(m) => write!(f, "the proxy failed: {m}"),
            SendError::Http(e) => write!(f, "HTTP failed: {e}"),
        }
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// The first checked address that accepts a TCP connection.
async fn tcp(addrs: &[SocketAddr], deadline: Instant, each: std::time::Duration) -> Result<TcpStream, SendError> {
    let mut last = String::from("no address");
    for a in addrs {
        // Each address gets `each` (the connect timeout), so a silent one leaves time
        // for the next.
        let until = deadline.min(Instant::now() + each);
        match tokio::time::timeout_at(until, TcpStream::connect(a)).await {
            Err(_) if Instant::now() >= deadline => return Err(SendError::Timeout("connecting")),
            Err(_) => last = format!("{a}: timed out"),
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = format!("{a}: {e}"),
        }
    }
    Err(SendError::Connect(last))
}

/// A tunnel through `proxy` to `to` (the checked address, never the name).
async fn tunnel(
    proxy: &Proxy,
    to: SocketAddr,
    deadline: Instant,
    each: std::time::Duration,
) -> Result<TcpStream, SendError> {
    let lookup = tokio::net::lookup_host((proxy.host.as_str(), proxy.port));
    let addrs: Vec<SocketAddr> = match tokio::time::timeout_at(deadline, lookup).await {
        Err(_) => return Err(SendError::Timeout("resolving the proxy")),
        Ok(Err(e)) => return Err(SendError::Proxy(format!("cannot resolve {}: {e}", proxy.host))),
        Ok(Ok(a)) => a.collect(),
    };
    let mut s = tcp(&addrs, deadline, each).await.map_err(|e| SendError::Proxy(e.to_string()))?;
    let hello = format!("CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n");
    let exchange = async {
        s.write_all(hello.as_bytes()).await?;
        // The proxy's answer, up to the blank line; nothing past it is read.
        let mut head = Vec::with_capacity(256);
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() > 8192 || s.read(&mut byte).await? == 0 {
                return Err(std::io::Error::other("no complete answer"));
            }
            head.push(byte[0]);
        }
        Ok(head)
    };
    let head = match tokio::time::timeout_at(deadline, exchange).await {
        Err(_) => return Err(SendError::Timeout("waiting for the proxy")),
        Ok(Err(e)) => return Err(SendError::Proxy(e.to_string())),
        Ok(Ok(h)) => h,
    };
    let status = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
    let ok = status.split_whitespace().nth(1) == Some("200");
    if !ok {
        return Err(SendError::Proxy(format!("CONNECT {to} answered \"{status}\"")));
    }
    Ok(s)
}

/// Send `req` to `target`, which [`Egress::check`] produced. The connection goes to a
/// checked address only, and ends by `deadline`.
pub async fn send<B>(
    egress: &Egress,
    target: &Target,
    mut req: Request<B>,
    deadline: Instant,
) -> Result<Response<Incoming>, SendError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream: Box<dyn Stream> = match &egress.rules().proxy {
        None => Box::new(tcp(&target.addrs, deadline, egress.rules().connect_timeout).await?),
        Some(p) => {
            let mut last = None;
            let mut opened = None;
            for a in &target.addrs {
                match tunnel(p, *a, deadline, egress.rules().connect_timeout).await {
                    Ok(s) => {
                        opened = Some(s);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            match opened {
                Some(s) => Box::new(s),
                None => return Err(last.unwrap_or(SendError::Connect("no address".into()))),
            }
        }
    };
    let stream: Box<dyn Stream> = if target.https {
        let name = match &target.host {
            super::Host::Name(n) => rustls::pki_types::ServerName::try_from(n.clone())
                .map_err(|e| SendError::Tls(format!("{n} is not a valid TLS server name: {e}")))?,
            super::Host::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
        };
        let connector = tokio_rustls::TlsConnector::from(egress.tls().clone());
        match tokio::time::timeout_at(deadline, connector.connect(name, stream)).await {
            Err(_) => return Err(SendError::Timeout("in the TLS handshake")),
            Ok(Err(e)) => return Err(SendError::Tls(e.to_string())),
            Ok(Ok(s)) => Box::new(s),
        }
    } else {
        stream
    };
    let (mut sender, conn) =
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)).await.map_err(SendError::Http)?;
    // The connection is driven by its own task, which ends with the body or at the
    // deadline, whatever the server does; an error on it fails the pending request.
    tokio::spawn(async move {
        let _ = tokio::time::timeout_at(deadline, conn).await;
    });
    // The request line carries the path only; the name stays in the Host header.
    let path = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
    *req.uri_mut() = http::Uri::builder().path_and_query(path).build().unwrap_or_default();
    match tokio::time::timeout_at(deadline, sender.send_request(req)).await {
        Err(_) => Err(SendError::Timeout("waiting for the response")),
        Ok(Err(e)) => Err(SendError::Http(e)),
        Ok(Ok(res)) => Ok(res),
    }
}
