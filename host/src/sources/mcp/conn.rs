//! One connection to a running server: the process (started by the host's spawn path,
//! confined), MCP over its stdin and stdout through rmcp's client, and what the host
//! watches while it runs — its exit, the tail of its stderr, and the messages it sends.
//!
//! The framing is the host's, not the server's: one JSON-RPC message per line, at most
//! [`crate::policy::mcp::DEFAULT_MESSAGE_BYTES`] each. A line that is not JSON, or one
//! past the cap, ends the connection (and with it every call in flight) with the
//! reason kept for the `transport_error` result; a JSON line that is no MCP message is logged
//! and skipped. Stderr is drained continuously into a bounded tail, so a server that
//! floods it never blocks, and never fills the host's memory.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::SinkExt;
use rmcp::ServiceExt;
use rmcp::service::{NotificationContext, RoleClient, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::SourceError;
use super::pins::{Pinned, pin_of};
use crate::process::mcp_server::ServerProcess;

/// How much of a server's stderr is kept for messages.
const STDERR_TAIL: usize = 2048;

/// What the host watches on a live connection.
#[derive(Default)]
pub(crate) struct Watch {
    /// Why the connection ended, once it has.
    pub dead: Mutex<Option<String>>,
    /// The tail of its stderr.
    pub stderr: Mutex<std::collections::VecDeque<u8>>,
    /// The server said its tool list changed.
    pub list_changed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watch {
    fn die(&self, why: String) {
        let mut d = lock(&self.dead);
        if d.is_none() {
            *d = Some(why);
        }
    }

    /// Why it ended, if it has.
    pub fn dead(&self) -> Option<String> {
        lock(&self.dead).clone()
    }

    /// `why`, with the last of the server's stderr when it wrote any.
    fn explain(&self, why: String) -> String {
        let tail = self.stderr_tail();
        if tail.is_empty() { why } else { format!("{why} (its stderr ended with: {tail})") }
    }

    /// The last of its stderr, one line, for messages.
    pub fn stderr_tail(&self) -> String {
        let bytes: Vec<u8> = lock(&self.stderr).iter().copied().collect();
        let s = String::from_utf8_lossy(&bytes);
        let last: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
        let start = last.len().saturating_sub(3);
        cheng_contract::text::escape_line(&cheng_contract::text::cut_chars(&last[start..].join(" | "), 400))
    }
}

/// The client side the host runs for a server: it answers the server's pings, and
/// notes `notifications/tools/list_changed`. Sampling, roots and elicitation requests
/// from a server are refused (rmcp's defaults).
pub(crate) struct Handler {
    watch: Arc<Watch>,
}

impl rmcp::ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.watch.list_changed.store(true, Ordering::SeqCst);
    }
}

/// A live connection. Dropping it stops the server's whole process tree.
pub(crate) struct Conn {
    pub service: RunningService<RoleClient, Handler>,
    pub watch: Arc<Watch>,
    _stop: tokio_util::sync::DropGuard,
}

impl Conn {
    /// Whether the server is still there.
    pub fn alive(&self) -> bool {
        self.watch.dead().is_none() && !self.service.is_closed()
    }

    /// The server's tools now, by name, as pins.
    pub async fn list(&self) -> Result<BTreeMap<String, Pinned>, String> {
        let tools = self.service.peer().list_all_tools().await.map_err(|e| self.why(&e.to_string()))?;
        let mut out = BTreeMap::new();
        for t in tools {
            let v = serde_json::to_value(&t).map_err(|e| e.to_string())?;
            out.insert(t.name.to_string(), pin_of(&v));
        }
        Ok(out)
    }

    /// Why a request failed: the connection's end when it ended, else `fallback`.
    pub fn why(&self, fallback: &str) -> String {
        self.watch.explain(self.watch.dead().unwrap_or_else(|| fallback.to_string()))
    }
}

/// Read one line (without its newline) into `line`; false at the end of the stream.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> Result<bool, String> {
    line.clear();
    loop {
        let buf = r.fill_buf().await.map_err(|e| format!("reading from the server failed: {e}"))?;
        if buf.is_empty() {
            return Ok(!line.is_empty());
        }
        let (part, used, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        if line.len() + part.len() > max {
            return Err(format!("the server sent a message over {max} bytes"));
        }
        line.extend_from_slice(part);
        r.consume(used);
        if done {
            return Ok(true);
        }
    }
}

/// Start talking MCP to `process`: the handshake, bounded by `timeout`.
pub(crate) async fn connect(
    mut process: ServerProcess,
    timeout: std::time::Duration,
    max_message: usize,
) -> Result<Conn, SourceError> {
    let watch = Arc::new(Watch::default());
    let stop = CancellationToken::new();
    let gone = |which: &str| SourceError::Start(format!("the server's {which} is gone"));
    let stdin = process.stdin.take().ok_or_else(|| gone("stdin"))?;
    let stdout = process.stdout.take().ok_or_else(|| gone("stdout"))?;
    let stderr = process.stderr.take().ok_or_else(|| gone("stderr"))?;

    // Stderr: drained into the bounded tail.
    {
        let watch = watch.clone();
        tokio::spawn(async move {
            let mut r = tokio::io::BufReader::new(stderr);
            loop {
                let chunk = match r.fill_buf().await {
                    Ok([]) | Err(_) => break,
                    Ok(c) => c.to_vec(),
                };
                r.consume(chunk.len());
                let mut tail = lock(&watch.stderr);
                tail.extend(chunk.iter().rev().take(STDERR_TAIL).rev());
                let over = tail.len().saturating_sub(STDERR_TAIL);
                tail.drain(..over);
            }
        });
    }
    // The process: its exit ends the connection; the stop token kills it.
    {
        let watch = watch.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                code = process.exited() => watch.die(match code {
                    Some(c) => format!("the server exited with status {c}"),
                    None => "the server was killed by a signal".to_string(),
                }),
                _ = stop.cancelled() => {}
            }
            drop(process);
        });
    }
    // Stdout: one message per line, checked, into rmcp.
    let (tx, rx) = tokio::sync::mpsc::channel::<RxJsonRpcMessage<RoleClient>>(64);
    {
        let watch = watch.clone();
        tokio::spawn(async move {
            let mut r = tokio::io::BufReader::new(stdout);
            let mut line = Vec::new();
            let why = loop {
                match read_line(&mut r, &mut line, max_message).await {
                    Ok(false) => break "the server closed its output".to_string(),
                    Ok(true) => {}
                    Err(why) => break why,
                }
                let text = line.trim_ascii();
                if text.is_empty() {
                    continue;
                }
                let Ok(value) = serde_json::from_slice::<serde_json::Value>(text) else {
                    let shown = String::from_utf8_lossy(&text[..text.len().min(80)]).into_owned();
                    break format!(
                        "the server sent malformed JSON-RPC: \"{}\"",
                        cheng_contract::text::escape_line(&shown)
                    );
                };
                // Noted here, in order, before any answer that follows it is passed on.
                if value.get("method").and_then(|m| m.as_str()) == Some("notifications/tools/list_changed") {
                    watch.list_changed.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
                    Ok(msg) => {
                        if tx.send(msg).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::warn!(target: "cheng::mcp", "skipped a message that is not MCP: {e}"),
                }
            };
            watch.die(why);
        });
    }
    let sink = futures::sink::unfold(stdin, |mut w, msg: TxJsonRpcMessage<RoleClient>| async move {
        let mut bytes = serde_json::to_vec(&msg).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        w.write_all(&bytes).await?;
        Ok::<_, std::io::Error>(w)
    });
    let sink: std::pin::Pin<Box<dyn futures::Sink<TxJsonRpcMessage<RoleClient>, Error = std::io::Error> + Send>> =
        Box::pin(sink.sink_map_err(|e| e));
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let handler = Handler { watch: watch.clone() };
    let guard = stop.clone().drop_guard();
    let service = match tokio::time::timeout(timeout, handler.serve((sink, stream))).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let why = watch.dead().unwrap_or_else(|| format!("the MCP handshake failed: {e}"));
            return Err(SourceError::Transport(watch.explain(why)));
        }
        Err(_) => {
            let why = format!("the server did not finish the MCP handshake within {} ms", timeout.as_millis());
            return Err(SourceError::HandshakeTimeout(watch.explain(why)));
        }
    };
    Ok(Conn { service, watch, _stop: guard })
}

/// The resolver an HTTP server's client uses: every name through the egress guard, so
/// only checked addresses are connected to (a name rebound to a private address later
/// is refused at that connection).
struct Guarded {
    egress: Arc<crate::egress::Egress>,
    reach: crate::egress::Reach,
    port: u16,
}

impl reqwest::dns::Resolve for Guarded {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let egress = self.egress.clone();
        let reach = self.reach.clone();
        let authority = format!("{}:{}", name.as_str(), self.port);
        Box::pin(async move {
            let target = egress.check(false, &authority, &reach).await.map_err(|e| e.to_string())?;
            let addrs: reqwest::dns::Addrs = Box::new(target.addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Talk MCP to a streamable-HTTP server at `url` (`http://` only), every address through
/// the egress guard, with `bearer` as its token.
pub(crate) async fn connect_http(
    url: &str,
    bearer: Option<String>,
    egress: Arc<crate::egress::Egress>,
    timeout: std::time::Duration,
) -> Result<Conn, SourceError> {
    use rmcp::transport::streamable_http_client::{StreamableHttpClientTransport, StreamableHttpClientTransportConfig};
    let start = SourceError::Start;
    let parsed = url::Url::parse(url).map_err(|e| start(format!("\"{url}\" is not a URL: {e}")))?;
    if parsed.scheme() != "http" {
        return Err(start(format!(
            "\"{url}\": only http:// servers are reached so far (no TLS client for MCP servers yet)"
        )));
    }
    let host = parsed.host_str().ok_or_else(|| start(format!("\"{url}\" has no host")))?.to_string();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let pattern = crate::egress::HostPattern::parse(&format!("{host}:{port}")).map_err(|e| start(e.to_string()))?;
    let reach = crate::egress::Reach::Only(vec![pattern]);
    // An address literal is never resolved by the client: check it here.
    egress.check(false, &format!("{host}:{port}"), &reach).await.map_err(|e| start(e.to_string()))?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(Guarded { egress, reach, port }))
        .connect_timeout(timeout)
        .build()
        .map_err(|e| start(format!("cannot build the HTTP client: {e}")))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(b) = bearer {
        config = config.auth_header(b);
    }
    let watch = Arc::new(Watch::default());
    let handler = Handler { watch: watch.clone() };
    let transport = StreamableHttpClientTransport::with_client(Traced(client), config);
    let service = match tokio::time::timeout(timeout, handler.serve(transport)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(SourceError::Transport(format!("the MCP handshake with {url} failed: {e}"))),
        Err(_) => {
            return Err(SourceError::HandshakeTimeout(format!(
                "{url} did not finish the MCP handshake within {} ms",
                timeout.as_millis()
            )));
        }
    };
    Ok(Conn { service, watch, _stop: CancellationToken::new().drop_guard() })
}

/// The client of a streamable-HTTP server: reqwest's, with the trace context a
/// `tools/call` carries in `_meta` sent as `traceparent`/`tracestate` headers too (what
/// an HTTP server's instrumentation reads).
#[derive(Clone)]
struct Traced(reqwest::Client);

type Headers = std::collections::HashMap<http::HeaderName, http::HeaderValue>;

mod traced {
    use std::future::Future;
    use std::sync::Arc;

    use futures::stream::BoxStream;
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestParamsMeta as _};
    use rmcp::transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
    };

    use super::{Headers, Traced};

    /// `headers` with the trace context of `message`, when it is a `tools/call` that has one.
    fn with_trace(message: &ClientJsonRpcMessage, mut headers: Headers) -> Headers {
        if let JsonRpcMessage::Request(r) = message
            && let ClientRequest::CallToolRequest(call) = &r.request
        {
            for (name, value) in [("traceparent", call.params.traceparent()), ("tracestate", call.params.tracestate())]
            {
                if let Some(v) = value.and_then(|v| http::HeaderValue::from_str(v).ok()) {
                    headers.insert(http::HeaderName::from_static(name), v);
                }
            }
        }
        headers
    }

    impl StreamableHttpClient for Traced {
        type Error = reqwest::Error;

        fn post_message(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: Headers,
        ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>> + Send + '_
        {
            let headers = with_trace(&message, custom_headers);
            self.0.post_message(uri, message, session_id, auth_header, headers)
        }

        fn post_message_with_max_sse_event_size(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: Headers,
            max_sse_event_size: usize,
        ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>> + Send + '_
        {
            let headers = with_trace(&message, custom_headers);
            self.0.post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
        }

        fn post_message_with_response_limits(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: Headers,
            limits: StreamableHttpResponseLimits,
        ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>> + Send + '_
        {
            let headers = with_trace(&message, custom_headers);
            self.0.post_message_with_response_limits(uri, message, session_id, auth_header, headers, limits)
        }

        fn delete_session(
            &self,
            uri: Arc<str>,
            session_id: Arc<str>,
            auth_header: Option<String>,
            custom_headers: Headers,
        ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
            self.0.delete_session(uri, session_id, auth_header, custom_headers)
        }

        fn get_stream(
            &self,
            uri: Arc<str>,
            session_id: Option<Arc<str>>,
            last_event_id: Option<String>,
            auth_header: Option<String>,
            custom_headers: Headers,
        ) -> impl Future<
            Output = Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, StreamableHttpError<Self::Error>>,
        > + Send
        + '_ {
            self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
        }

        fn get_stream_with_max_sse_event_size(
            &self,
            uri: Arc<str>,
            session_id: Option<Arc<str>>,
            last_event_id: Option<String>,
            auth_header: Option<String>,
            custom_headers: Headers,
            max_sse_event_size: usize,
        ) -> impl Future<
            Output = Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, StreamableHttpError<Self::Error>>,
        > + Send
        + '_ {
            self.0.get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
        }
    }
}
