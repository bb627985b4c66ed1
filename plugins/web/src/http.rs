//! One HTTP exchange over `wasi:http`, and the redirects that follow it.
//!
//! The host does the dangerous part — the address check, the connection to the
//! checked address, the deadline and the byte cap — so this is a plain client: it
//! builds the request, reads the status and headers, reads the body up to the cap
//! (decoding gzip and deflate, bounded after decoding too), and follows at most
//! [`MAX_REDIRECTS`] redirects, each of which the host checks again. A redirect to a
//! scheme other than http or https is refused here, before anything is asked.

use std::io::Read;

use url::Url;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, IncomingBody, Method, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// A response, read.
pub struct Response {
    /// The URL that answered, after redirects.
    pub final_url: Url,
    /// Every URL visited before it.
    pub redirects: Vec<String>,
    /// The status.
    pub status: u16,
    /// `Content-Type`, as sent.
    pub content_type: Option<String>,
    /// The body, decoded, at most the cap.
    pub body: Vec<u8>,
    /// Bytes read from the wire.
    pub wire_bytes: u64,
    /// The body was cut (at the cap, or when the deadline ended it).
    pub truncated: bool,
    /// Why it was cut, when it was.
    pub cut: Option<String>,
}

/// Why no response was read.
#[derive(Debug)]
pub enum NetError {
    /// The host's guard refused the request (its message names the rule or class).
    Refused(String),
    /// The URL or a redirect's target is unusable.
    BadUrl(String),
    /// The request did not reach the service (DNS, connection, TLS, timeout).
    Unreachable(String),
    /// More than [`MAX_REDIRECTS`] redirects.
    TooManyRedirects(Vec<String>),
}

fn describe(code: &ErrorCode) -> String {
    match code {
        ErrorCode::InternalError(Some(m)) => m.clone(),
        ErrorCode::DnsTimeout => "the name lookup timed out".into(),
        ErrorCode::DnsError(_) => "the name could not be resolved".into(),
        ErrorCode::DestinationNotFound => "the host was not found".into(),
        ErrorCode::DestinationUnavailable => "the host is unavailable".into(),
        ErrorCode::DestinationIpProhibited => "refused: the destination address is not allowed".into(),
        ErrorCode::DestinationIpUnroutable => "the destination address is unroutable".into(),
        ErrorCode::ConnectionRefused => "the connection was refused".into(),
        ErrorCode::ConnectionTerminated => "the connection was closed by the server".into(),
        ErrorCode::ConnectionTimeout => "the connection timed out".into(),
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => "the response timed out".into(),
        ErrorCode::TlsProtocolError | ErrorCode::TlsAlertReceived(_) => "the TLS handshake failed".into(),
        ErrorCode::TlsCertificateError => "the server's TLS certificate was not accepted".into(),
        ErrorCode::HttpRequestDenied => "refused: the request was denied by the host".into(),
        ErrorCode::HttpProtocolError => "the server broke the HTTP protocol".into(),
        other => format!("{other:?}"),
    }
}

fn error_of(code: &ErrorCode) -> NetError {
    let m = describe(code);
    if m.starts_with("refused:") { NetError::Refused(m) } else { NetError::Unreachable(m) }
}

/// GET `url`, following redirects; read at most `cap` body bytes (after decoding).
/// `timeout_ms` is the host's limit per request (for telling a cut at it from others).
pub fn get(url: &Url, headers: &[(&str, String)], cap: usize, timeout_ms: u64) -> Result<Response, NetError> {
    let mut current = url.clone();
    let mut visited = Vec::new();
    loop {
        let started = std::time::Instant::now();
        let (status, fields, body) = exchange(&current, headers)?;
        let location = (300..400).contains(&status).then(|| header(&fields, "location")).flatten();
        if let Some(loc) = location {
            drop(body);
            let next = current
                .join(&loc)
                .map_err(|e| NetError::BadUrl(format!("{current} redirected to \"{loc}\", which is not a URL: {e}")))?;
            if !matches!(next.scheme(), "http" | "https") {
                return Err(NetError::Refused(format!(
                    "refused: {current} redirected to {next}; only http and https URLs are fetched"
                )));
            }
            visited.push(current.to_string());
            if visited.len() > MAX_REDIRECTS {
                visited.push(next.to_string());
                return Err(NetError::TooManyRedirects(visited));
            }
            current = next;
            continue;
        }
        let content_type = header(&fields, "content-type");
        let encoding = header(&fields, "content-encoding").map(|e| e.trim().to_ascii_lowercase());
        let (raw, wire_bytes, wire_cut) = read_body(body, cap, started, timeout_ms);
        let (body, decode_cut) = decode(raw, encoding.as_deref(), cap);
        let cut = wire_cut.or(decode_cut);
        return Ok(Response {
            final_url: current,
            redirects: visited,
            status,
            content_type,
            body,
            wire_bytes,
            truncated: cut.is_some(),
            cut,
        });
    }
}

fn header(fields: &Fields, name: &str) -> Option<String> {
    fields.get(name).first().map(|v| String::from_utf8_lossy(v).into_owned())
}

fn exchange(url: &Url, headers: &[(&str, String)]) -> Result<(u16, Fields, Option<IncomingBody>), NetError> {
    let mut list: Vec<(String, Vec<u8>)> =
        headers.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect();
    list.push(("accept-encoding".into(), b"gzip, deflate".to_vec()));
    let fields =
        Fields::from_list(&list).map_err(|e| NetError::BadUrl(format!("a request header is invalid: {e:?}")))?;
    let req = OutgoingRequest::new(fields);
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(NetError::Refused(format!("refused: {other}: URLs are not fetched; only http and https are")));
        }
    };
    let host = url.host_str().ok_or_else(|| NetError::BadUrl(format!("{url} has no host")))?;
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let bad = |what: &str| NetError::BadUrl(format!("{url}: the {what} cannot be sent"));
    req.set_method(&Method::Get).map_err(|_| bad("method"))?;
    req.set_scheme(Some(&scheme)).map_err(|_| bad("scheme"))?;
    req.set_authority(Some(&authority)).map_err(|_| bad("host"))?;
    req.set_path_with_query(Some(&path)).map_err(|_| bad("path"))?;
    let pending = outgoing_handler::handle(req, None).map_err(|e| error_of(&e))?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(code))) => return Err(error_of(&code)),
        Some(Err(())) | None => return Err(NetError::Unreachable("the response was lost".into())),
    };
    let status = response.status();
    let fields = response.headers();
    let body = response.consume().ok();
    Ok((status, fields, body))
}

/// The body's bytes, up to `cap` from the wire; the cut's reason when it was cut.
fn read_body(
    body: Option<IncomingBody>,
    cap: usize,
    started: std::time::Instant,
    timeout_ms: u64,
) -> (Vec<u8>, u64, Option<String>) {
    let Some(body) = body else { return (Vec::new(), 0, None) };
    let Ok(stream) = body.stream() else { return (Vec::new(), 0, None) };
    let mut out = Vec::new();
    let mut cut = None;
    // One byte past the cap tells a body of exactly the cap from a longer one (the
    // host passes the cap and then fails the read).
    loop {
        let room = cap.saturating_add(1).saturating_sub(out.len());
        if room == 0 {
            out.truncate(cap);
            cut = Some(format!("cut at {cap} bytes"));
            break;
        }
        match stream.blocking_read(room.min(64 << 10) as u64) {
            Ok(chunk) => out.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                // The host ends a body at the cap and at the deadline; its error says
                // which, in words, so the byte count and the clock decide.
                let late = started.elapsed().as_millis() as u64 + 250 >= timeout_ms;
                let why = match wasip2::http::types::http_error_code(&e) {
                    _ if out.len() >= cap => format!("cut at {cap} bytes"),
                    Some(ErrorCode::HttpResponseBodySize(_)) => format!("cut at {cap} bytes"),
                    Some(ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout) => {
                        "cut at the time limit".to_string()
                    }
                    _ if late => "cut at the time limit".to_string(),
                    Some(code) => format!("cut: {}", describe(&code)),
                    None => format!("cut: {}", e.to_debug_string()),
                };
                cut = Some(why);
                break;
            }
        }
    }
    drop(stream);
    drop(body);
    let n = out.len() as u64;
    (out, n, cut)
}

/// Undo a content encoding, reading at most `cap` decoded bytes (a small compressed
/// body cannot expand past it).
fn decode(raw: Vec<u8>, encoding: Option<&str>, cap: usize) -> (Vec<u8>, Option<String>) {
    let mut reader: Box<dyn Read> = match encoding {
        Some("gzip" | "x-gzip") => Box::new(flate2::read::MultiGzDecoder::new(&raw[..])),
        Some("deflate") => Box::new(flate2::read::ZlibDecoder::new(&raw[..])),
        _ => return (raw, None),
    };
    let mut out = Vec::new();
    let mut limited = (&mut reader).take((cap as u64).saturating_add(1));
    match limited.read_to_end(&mut out) {
        Ok(_) if out.len() > cap => {
            out.truncate(cap);
            (out, Some(format!("cut at {cap} decoded bytes")))
        }
        Ok(_) => (out, None),
        // A body cut on the wire ends mid-stream: keep what decoded.
        Err(_) if !out.is_empty() => (out, Some("the compressed body ended early".into())),
        Err(_) => (Vec::new(), Some("the compressed body could not be decoded".into())),
    }
}
