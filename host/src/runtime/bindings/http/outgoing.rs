//! The hook itself: wasmtime-wasi-http's [`WasiHttpHooks`] for [`HttpHooks`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::uri::Scheme;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::HttpHooks;
use crate::call::{CallScope, MAX_REQUESTS_PER_CALL, NetRequest};
use crate::capability;
use crate::egress::CheckError;
type Sent = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>;

fn refuse(scope: Option<&CallScope>, entry: Option<&NetRequest>, target: &str, message: String) -> Error {
    if let Some(e) = entry {
        e.refuse(&message);
    }
    if let Some(s) = scope {
        s.deny(capability::network(target, &message));
    }
    Error::InternalError(Some(message))
}

impl WasiHttpHooks for HttpHooks {
    fn is_supported_scheme(&mut self, scheme: &Scheme) -> bool {
        let ok = *scheme == Scheme::HTTP || *scheme == Scheme::HTTPS;
        if !ok && let Some((_, s)) = &self.call {
            let message = format!("refused: {scheme}: URLs are not fetched; only http and https are");
            let entry = s.request("?", &format!("{scheme}:"));
            if entry.counted() {
                refuse(Some(s), Some(&entry), scheme.as_str(), message);
            }
        }
        ok
    }

    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let call = self.call.clone();
        let reach = self.reach.clone();
        Box::new(async move {
            let uri = request.uri().clone();
            let url = uri.to_string();
            let Some((egress, scope)) = call else {
                return Err(refuse(None, None, &url, "refused: no network while a component describes itself".into()));
            };
            let entry = scope.request(request.method().as_str(), &url);
            if !entry.counted() {
                // Past the cap: refused, and only the first such refusal is recorded.
                let m = format!("refused: more than {MAX_REQUESTS_PER_CALL} requests in one call");
                return Err(match entry.first_past_cap() {
                    true => refuse(Some(&scope), None, &url, m),
                    false => Error::InternalError(Some(m)),
                });
            }
            let rules = egress.rules();
            // One deadline for the whole request: the lookup, the connection, the body.
            let deadline = tokio::time::Instant::now() + rules.timeout;
            let https = uri.scheme() == Some(&Scheme::HTTPS);
            let authority = uri.authority().map(|a| a.as_str().to_string()).unwrap_or_default();
            let checked = tokio::time::timeout_at(deadline, egress.check(https, &authority, &reach)).await;
            let target = match checked {
                Ok(Ok(t)) => t,
                Ok(Err(CheckError::Refused(m))) => return Err(refuse(Some(&scope), Some(&entry), &url, m)),
                Ok(Err(CheckError::Dns(m))) => {
                    entry.fail(&m);
                    return Err(Error::InternalError(Some(m)));
                }
                Err(_) => {
                    entry.fail("timed out resolving the name");
                    return Err(Error::DnsTimeout);
                }
            };
            let headers = request.headers_mut();
            if !headers.contains_key(http::header::USER_AGENT)
                && let Ok(v) = http::HeaderValue::from_str(&rules.user_agent)
            {
                headers.insert(http::header::USER_AGENT, v);
            }
            // The call's trace context replaces any the component set.
            for (name, value) in scope.trace_headers() {
                if let Ok(v) = http::HeaderValue::from_str(&value) {
                    headers.insert(http::HeaderName::from_static(name), v);
                }
            }
            for inj in egress.injected(&target, &reach) {
                headers.insert(inj.name.clone(), inj.value.clone());
            }
            let response = match crate::egress::connect::send(&egress, &target, request, deadline).await {
                Ok(r) => r,
                Err(e) => {
                    let m = format!("{e} ({})", target.name());
                    entry.fail(&m);
                    return Err(match e {
                        crate::egress::connect::SendError::Timeout(_) => Error::ConnectionTimeout,
                        _ => Error::InternalError(Some(m)),
                    });
                }
            };
            entry.status(response.status().as_u16());
            let (parts, incoming) = response.into_parts();
            let body = Metered {
                inner: Some(incoming),
                deadline: Box::pin(tokio::time::sleep_until(deadline)),
                limit: rules.max_bytes,
                seen: 0,
                entry: entry.clone(),
                ended: None,
            };
            let driver = async { Ok(()) };
            Ok((
                http::Response::from_parts(parts, body.boxed_unsync()),
                Box::new(driver) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

/// A response body bounded by the request's deadline and the byte cap, counting what
/// it passes into the call's record. Past the cap the frame that crosses it is cut to
/// the cap and the next read fails, so the guest gets exactly the cap.
struct Metered {
    inner: Option<Incoming>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: u64,
    seen: u64,
    entry: Arc<NetRequest>,
    ended: Option<fn() -> Error>,
}

impl Body for Metered {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if let Some(e) = self.ended {
            return Poll::Ready(Some(Err(e())));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.inner = None;
            self.entry.fail("cut at the deadline");
            self.ended = Some(|| Error::ConnectionReadTimeout);
            return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
        }
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.inner = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.inner = None;
                self.entry.fail(&e.to_string());
                Poll::Ready(Some(Err(Error::Hyper(e))))
            }
            Poll::Ready(Some(Ok(frame))) => {
                let Ok(mut data) = frame.into_data() else {
                    // Trailers: not passed on.
                    return Poll::Ready(None);
                };
                let room = self.limit - self.seen;
                if data.len() as u64 > room {
                    data.truncate(room as usize);
                    // The connection is dropped now: nothing more is read from it.
                    self.inner = None;
                    self.entry.fail(&format!("cut at the cap of {} bytes", self.limit));
                    self.ended = Some(|| Error::HttpResponseBodySize(None));
                }
                self.seen += data.len() as u64;
                self.entry.add_bytes(data.len() as u64);
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
        }
    }
}
