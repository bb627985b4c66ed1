//! The operator's network rules as data: how a host is read and classified
//! ([`address`]), the host patterns rules name, what a component may reach, the proxy,
//! the headers injected for given hosts, and `[web]`'s rules read and checked. The
//! host's egress guard enforces them; nothing here opens a connection.

pub mod address;

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

pub use address::{AddressClass, AddressError, Classified, Host, classify, parse_host};

/// A host a rule names: `example.com`, `*.example.com` (any name below it, not the
/// name itself), or an IP address; optionally with `:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: PatternHost,
    port: Option<u16>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PatternHost {
    Exact(String),
    Below(String),
    Ip(IpAddr),
}

/// Why a host pattern cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// Its port part is wrong.
    #[error("host pattern \"{text}\" {reason}")]
    Port {
        /// The pattern as written.
        text: String,
        /// What is wrong with it.
        reason: SplitError,
    },
    /// Its host part is not a host.
    #[error("host pattern \"{text}\" {reason}")]
    Host {
        /// The pattern as written.
        text: String,
        /// What is wrong with it.
        reason: AddressError,
    },
    /// `*.` before an address.
    #[error("host pattern \"{0}\" puts a wildcard on an address")]
    WildcardAddress(String),
}

impl HostPattern {
    /// Read a pattern.
    pub fn parse(text: &str) -> Result<HostPattern, PatternError> {
        let host_err = |reason| PatternError::Host { text: text.to_string(), reason };
        let (host, port) = split_port(text).map_err(|reason| PatternError::Port { text: text.to_string(), reason })?;
        let host = if let Some(rest) = host.strip_prefix("*.") {
            match parse_host(rest).map_err(host_err)? {
                Host::Name(n) => PatternHost::Below(n),
                Host::Ip(_) => return Err(PatternError::WildcardAddress(text.to_string())),
            }
        } else {
            match parse_host(host).map_err(host_err)? {
                Host::Name(n) => PatternHost::Exact(n),
                Host::Ip(ip) => PatternHost::Ip(ip),
            }
        };
        Ok(HostPattern { host, port, text: text.to_string() })
    }

    /// Whether a request to `host` on `port` matches.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, host) {
            (PatternHost::Exact(p), Host::Name(n)) => p == n,
            (PatternHost::Below(p), Host::Name(n)) => {
                n.len() > p.len() + 1 && n.ends_with(p.as_str()) && n.as_bytes()[n.len() - p.len() - 1] == b'.'
            }
            (PatternHost::Ip(p), Host::Ip(ip)) => p == ip,
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why `host[:port]` cannot be split; each reads after the address it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// Something other than `:port` after `[address]`.
    #[error("has \"{0}\" after the address")]
    AfterAddress(String),
    /// `[` without `]`.
    #[error("has an unclosed bracket")]
    UnclosedBracket,
    /// A port that is not a number from 0 to 65535.
    #[error("has an invalid port \"{0}\"")]
    Port(String),
}

/// Split `host[:port]` (IPv6 in brackets).
pub fn split_port(s: &str) -> Result<(&str, Option<u16>), SplitError> {
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => match &s[end + 1..] {
                "" => (&s[..=end], None),
                rest => match rest.strip_prefix(':') {
                    Some(p) => (&s[..=end], Some(p)),
                    None => return Err(SplitError::AfterAddress(rest.to_string())),
                },
            },
            None => return Err(SplitError::UnclosedBracket),
        }
    } else if s.matches(':').count() == 1 {
        let (h, p) = s.split_once(':').unwrap_or((s, ""));
        (h, Some(p))
    } else {
        (s, None)
    };
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().map_err(|_| SplitError::Port(p.to_string()))?),
    };
    Ok((host, port))
}

/// The hosts a component may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// None: every request is refused.
    Nothing,
    /// Any public host the operator's lists allow (the built-in web tools).
    Public,
    /// Only these hosts, and then only as the operator's lists allow (a plugin's `net`).
    Only(Vec<HostPattern>),
}

/// An HTTP proxy every request goes through (by `CONNECT` to the checked address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    /// The proxy's host.
    pub host: String,
    /// Its port.
    pub port: u16,
}

/// A header the host adds to requests for one host (a search API's key): the
/// component never holds the value.
#[derive(Clone)]
pub struct Injected {
    /// Requests to this host get the header (with this scheme and port only).
    pub host: HostPattern,
    /// The endpoint's scheme is https.
    pub https: bool,
    /// The endpoint's port.
    pub port: u16,
    /// The header.
    pub name: http::HeaderName,
    /// Its value.
    pub value: http::HeaderValue,
}

impl fmt::Debug for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injected").field("host", &self.host).field("name", &self.name).finish_non_exhaustive()
    }
}

/// The operator's egress rules (`[web]`), read and checked.
#[derive(Debug, Clone)]
pub struct Rules {
    /// When not empty, only these hosts.
    pub allow_hosts: Vec<HostPattern>,
    /// Never these hosts.
    pub deny_hosts: Vec<HostPattern>,
    /// Address ranges the operator opens although their class is refused (an
    /// intranet). A cloud metadata address opens only when named exactly.
    pub allow_private: Vec<IpNet>,
    /// Resolving a name and connecting, each.
    pub connect_timeout: Duration,
    /// A whole request, body included.
    pub timeout: Duration,
    /// Bytes of a response body read from the wire.
    pub max_bytes: u64,
    /// Optional proxy.
    pub proxy: Option<Proxy>,
    /// Sent when the component sets no `User-Agent`.
    pub user_agent: String,
    /// Headers added for given hosts.
    pub inject: Vec<Injected>,
    /// Certificate authorities trusted besides the Mozilla roots (`[web] ca_file`).
    pub extra_roots: Vec<rustls_pki_types::CertificateDer<'static>>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            allow_hosts: Vec::new(),
            deny_hosts: Vec::new(),
            allow_private: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(20),
            max_bytes: 5 << 20,
            proxy: None,
            user_agent: concat!("cheng/", env!("CARGO_PKG_VERSION"), " (web_fetch)").to_string(),
            inject: Vec::new(),
            extra_roots: Vec::new(),
        }
    }
}
