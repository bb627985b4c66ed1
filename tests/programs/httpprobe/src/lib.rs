//! A plugin that asks for URLs through `wasi:http` only. With a `net` grant it reaches
//! the granted hosts (as the host's guard allows); without one it is refused at load.

use cheng_sdk::prelude::*;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, Method, OutgoingRequest, Scheme};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// `http` or `https`.
    scheme: String,
    /// `host[:port]`, sent as written.
    authority: String,
    /// The path.
    path: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    /// The status.
    status: u16,
    /// The body, as text.
    body: String,
}

fn failed(code: ErrorCode) -> Failure {
    let m = match code {
        ErrorCode::InternalError(Some(m)) => m,
        other => format!("{other:?}"),
    };
    Failure::new(ErrorKind::NotGranted, m)
}

pub struct Get;
impl Tool for Get {
    const NAME: &'static str = "get";
    const DESCRIPTION: &'static str = "GET a URL through wasi:http.";
    const NEEDS: Needs = Needs { fs: cheng_sdk::FsAccess::None, spawn: false, network: &["*"] };
    type Input = Input;
    type Output = Output;
    fn run(input: Input, _cx: &Context) -> Result<Output, Failure> {
        let req = OutgoingRequest::new(Fields::new());
        let scheme = match input.scheme.as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => Scheme::Other(other.to_string()),
        };
        let bad = |_| Failure::invalid_argument("the request cannot be built");
        req.set_method(&Method::Get).map_err(bad)?;
        req.set_scheme(Some(&scheme)).map_err(bad)?;
        req.set_authority(Some(&input.authority)).map_err(bad)?;
        req.set_path_with_query(Some(&input.path)).map_err(bad)?;
        let pending = outgoing_handler::handle(req, None).map_err(failed)?;
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(Ok(r))) => r,
            Some(Ok(Err(code))) => return Err(failed(code)),
            _ => return Err(Failure::new(ErrorKind::Io, "no response")),
        };
        let status = response.status();
        let body = response.consume().map_err(|_| Failure::new(ErrorKind::Io, "no body"))?;
        let stream = body.stream().map_err(|_| Failure::new(ErrorKind::Io, "no stream"))?;
        let mut bytes = Vec::new();
        while let Ok(chunk) = stream.blocking_read(65536) {
            bytes.extend_from_slice(&chunk);
        }
        Ok(Output { status, body: String::from_utf8_lossy(&bytes).into_owned() })
    }
}

cheng_sdk::export_tools!(Get);
