//! The network guard: which addresses a component's outgoing HTTP request may reach,
//! decided by the host before any connection is made, and the connection made to the
//! address that was checked.
//!
//! A request's host is read as a resolver would read it ([`address::parse_host`]: an
//! IPv4 address in any legacy spelling is that address), checked against the
//! operator's `[web]` lists and the component's own grant, resolved **once** by the
//! host ([`Resolve`]), and refused if any address it resolves to is loopback, private,
//! link-local, CGNAT, metadata or otherwise special ([`address::classify`]) unless
//! `[web] allow_private` opens it. [`connect`] then connects to one of exactly those
//! addresses — the name goes into the `Host` header and the TLS server name, never back
//! to a resolver — so a second DNS answer cannot move the request (no rebinding).
//!
//! Nothing here knows about the engine: the `wasi:http` hook in
//! `runtime::bindings::http` calls [`Egress::check`] and [`connect::send`].

pub mod address;
pub mod connect;
#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

pub use address::{AddressClass, Classified, Host, classify, parse_host};

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

impl HostPattern {
    /// Read a pattern.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let bad = |why: &str| format!("host pattern \"{text}\" {why}");
        let (host, port) = split_port(text).map_err(|e| bad(&e))?;
        let host = if let Some(rest) = host.strip_prefix("*.") {
            match parse_host(rest).map_err(|e| bad(&e))? {
                Host::Name(n) => PatternHost::Below(n),
                Host::Ip(_) => return Err(bad("puts a wildcard on an address")),
            }
        } else {
            match parse_host(host).map_err(|e| bad(&e))? {
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

/// Split `host[:port]` (IPv6 in brackets).
fn split_port(s: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => match &s[end + 1..] {
                "" => (&s[..=end], None),
                rest => match rest.strip_prefix(':') {
                    Some(p) => (&s[..=end], Some(p)),
                    None => return Err(format!("has \"{rest}\" after the address")),
                },
            },
            None => return Err("has an unclosed bracket".into()),
        }
    } else if s.matches(':').count() == 1 {
        let (h, p) = s.split_once(':').unwrap_or((s, ""));
        (h, Some(p))
    } else {
        (s, None)
    };
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().map_err(|_| format!("has an invalid port \"{p}\""))?),
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
    pub extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
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

/// Resolves host names. The host's resolver is the system's; tests and embedders may
/// put their own in ([`crate::HostBuilder::resolver`]).
pub trait Resolve: Send + Sync + 'static {
    /// The addresses of `name`.
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>>;
}

/// The system resolver (`getaddrinfo`, through tokio).
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((name, port)).await?.map(|a| a.ip()).collect()) })
    }
}

/// Why a request did not get a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// The guard refused it; the message names the rule or the address class.
    Refused(String),
    /// The name could not be resolved.
    Dns(String),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Refused(m) | CheckError::Dns(m) => f.write_str(m),
        }
    }
}

/// A checked request target: where to connect, and the name to present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// TLS.
    pub https: bool,
    /// The host as read.
    pub host: Host,
    /// The port.
    pub port: u16,
    /// The checked addresses, in the resolver's order: the only ones connected to.
    pub addrs: Vec<SocketAddr>,
}

impl Target {
    /// The host as the `Host` header and TLS name carry it.
    pub fn name(&self) -> String {
        self.host.to_string()
    }
}

/// The guard: rules, a resolver, and the TLS configuration connections use.
pub struct Egress {
    rules: Rules,
    resolver: Arc<dyn Resolve>,
    tls: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Egress").field("rules", &self.rules).finish_non_exhaustive()
    }
}

impl Egress {
    /// A guard with `rules`, resolving through `resolver`.
    pub fn new(rules: Rules, resolver: Arc<dyn Resolve>) -> Egress {
        let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let (added, ignored) = roots.add_parsable_certificates(rules.extra_roots.iter().cloned());
        if ignored > 0 {
            tracing::warn!(target: "cheng::web", added, ignored, "[web] ca_file: some certificates could not be used");
        }
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Egress { rules, resolver, tls: Arc::new(tls) }
    }

    /// The rules.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    pub(crate) fn tls(&self) -> &Arc<rustls::ClientConfig> {
        &self.tls
    }

    /// Check a request for `authority` (`host[:port]`) and resolve it, once.
    pub async fn check(&self, https: bool, authority: &str, reach: &Reach) -> Result<Target, CheckError> {
        let refused = |m: String| CheckError::Refused(format!("refused: {m}"));
        if authority.contains('@') {
            return Err(refused("the URL carries credentials (user@host); send them another way".into()));
        }
        let (raw, port) = split_port(authority).map_err(|e| refused(format!("the address \"{authority}\" {e}")))?;
        let port = port.unwrap_or(if https { 443 } else { 80 });
        let host = parse_host(raw).map_err(refused)?;
        let shown = host.to_string();
        if let Some(p) = self.rules.deny_hosts.iter().find(|p| p.matches(&host, port)) {
            return Err(refused(format!("{shown} is denied by [web] deny_hosts (\"{p}\")")));
        }
        match reach {
            Reach::Nothing => {
                return Err(refused(format!("this tool holds no network grant, so {shown} cannot be reached")));
            }
            Reach::Public => {}
            Reach::Only(list) => {
                if !list.iter().any(|p| p.matches(&host, port)) {
                    let granted = list.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
                    return Err(refused(format!("{shown} is not among the hosts this plugin is granted ({granted})")));
                }
            }
        }
        if !self.rules.allow_hosts.is_empty() && !self.rules.allow_hosts.iter().any(|p| p.matches(&host, port)) {
            return Err(refused(format!("{shown} is not in [web] allow_hosts")));
        }
        let ips = match &host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => {
                let lookup = self.resolver.resolve(name, port);
                match tokio::time::timeout(self.rules.connect_timeout, lookup).await {
                    Err(_) => return Err(CheckError::Dns(format!("resolving {name} timed out"))),
                    Ok(Err(e)) => return Err(CheckError::Dns(format!("cannot resolve {name}: {e}"))),
                    Ok(Ok(ips)) if ips.is_empty() => {
                        return Err(CheckError::Dns(format!("{name} has no addresses")));
                    }
                    Ok(Ok(ips)) => ips,
                }
            }
        };
        for ip in &ips {
            if let Some(p) = self.rules.deny_hosts.iter().find(|p| p.matches(&Host::Ip(*ip), port)) {
                return Err(refused(format!("{shown} resolves to {ip}, denied by [web] deny_hosts (\"{p}\")")));
            }
            if let Some(c) = self.refused_class(*ip) {
                let inside = c.inside.map(|(form, v4)| format!(" ({form} carrying {v4})")).unwrap_or_default();
                let what = match &host {
                    Host::Ip(_) => format!("{ip} is {}{inside}", c.class.describe()),
                    Host::Name(n) => format!("{n} resolves to {ip}, {}{inside}", c.class.describe()),
                };
                return Err(refused(what));
            }
        }
        let mut addrs: Vec<SocketAddr> = Vec::with_capacity(ips.len());
        for ip in ips {
            let a = SocketAddr::new(ip, port);
            if !addrs.contains(&a) {
                addrs.push(a);
            }
        }
        Ok(Target { https, host, port, addrs })
    }

    /// The class that refuses `ip`, unless `allow_private` opens it.
    fn refused_class(&self, ip: IpAddr) -> Option<Classified> {
        let c = classify(ip)?;
        let opened = self.rules.allow_private.iter().any(|net| {
            net.contains(&ip) && (c.class != AddressClass::Metadata || net.prefix_len() == net.max_prefix_len())
        });
        (!opened).then_some(c)
    }

    /// Headers the host adds for a request to `target` from a component with `reach`:
    /// only the built-in web component's requests (never a plugin's), and only to the
    /// endpoint's exact scheme, host and port.
    pub fn injected<'a>(&'a self, target: &'a Target, reach: &'a Reach) -> impl Iterator<Item = &'a Injected> + 'a {
        self.rules.inject.iter().filter(move |i| {
            *reach == Reach::Public
                && i.https == target.https
                && i.port == target.port
                && i.host.matches(&target.host, target.port)
        })
    }
}
