//! A component that asks for the network. Plugins hold no network grant, so the host
//! refuses to load it at all (its `wasi:sockets` imports are named in the refusal).

use std::io::{Read, Write};

use cheng_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// tcp, dns or http.
    action: String,
    /// An address or host name.
    target: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    /// What it reached.
    detail: String,
}

fn io(e: std::io::Error) -> Failure {
    Failure::new(ErrorKind::Io, e.to_string())
}

pub struct Probe;
impl Tool for Probe {
    const NAME: &'static str = "probe";
    const DESCRIPTION: &'static str = "Try the network.";
    type Input = Input;
    type Output = Output;
    fn run(input: Input, _cx: &Context) -> Result<Output, Failure> {
        let detail = match input.action.as_str() {
            "tcp" => {
                format!("connected: {:?}", std::net::TcpStream::connect(&input.target).map_err(io)?.peer_addr().ok())
            }
            "dns" => {
                use std::net::ToSocketAddrs;
                format!("resolved {:?}", (input.target.as_str(), 80).to_socket_addrs().map_err(io)?.collect::<Vec<_>>())
            }
            "http" => {
                let mut s = std::net::TcpStream::connect(&input.target).map_err(io)?;
                s.write_all(b"GET / HTTP/1.0\r\n\r\n").map_err(io)?;
                let mut body = String::new();
                s.read_to_string(&mut body).map_err(io)?;
                body
            }
            other => return Err(Failure::invalid_argument(format!("unknown action {other}"))),
        };
        Ok(Output { detail })
    }
}

cheng_sdk::export_tools!(Probe);
