//! The network guard: which addresses a component's outgoing HTTP request may reach,
//! decided by the host before any connection is made, and the connection made to the
//! address that was checked.
//!
//! A request's host is read as a resolver would read it ([`address::parse_host`]: an
//! IPv4 address in any legacy spelling is that address), checked against the
//! operator's `[web]` lists and the component's own grant, resolved **once** by the
//! host ([`Resolve`]), and refused if any address it resolves to is loopback, private,
//! link-local, CGNAT, metadata or otherwise special ([`address::classify`]) unless
//! `[web] allow_private` opens it. `connect` then connects to one of exactly those
//! addresses — the name goes into the `Host` header and the TLS server name, never back
//! to a resolver — so a second DNS answer cannot move the request (no rebinding).
//!
//! Nothing here knows about the engine: the `wasi:http` hook in
//! `runtime::bindings::http::outgoing` (the `web` feature) calls [`Egress::check`] and
//! `connect::send`. The `connect` module is compiled with the host's own HTTP client,
//! which the `oci`, `telemetry` and `web` features bring.

#[cfg(feature = "http-client")]
pub mod connect;
#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

pub use cheng_policy::net::address;
pub use cheng_policy::net::{
    AddressClass, Classified, Host, HostPattern, Injected, Proxy, Reach, Rules, classify, parse_host, split_port,
};

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

/// The guard: rules, a resolver, and the TLS configuration connections use (with the
/// host's own HTTP client: the `web`, `oci` or `telemetry` feature).
pub struct Egress {
    rules: Rules,
    resolver: Arc<dyn Resolve>,
    #[cfg(feature = "http-client")]
    tls: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Egress").field("rules", &self.rules).finish_non_exhaustive()
    }
}

/// The TLS configuration of the host's connections: the web PKI's roots and the ones
/// `[web] ca_file` adds.
#[cfg(feature = "http-client")]
fn tls_config(rules: &Rules) -> Arc<rustls::ClientConfig> {
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
    Arc::new(tls)
}

impl Egress {
    /// A guard with `rules`, resolving through `resolver`.
    pub fn new(rules: Rules, resolver: Arc<dyn Resolve>) -> Egress {
        Egress {
            #[cfg(feature = "http-client")]
            tls: tls_config(&rules),
            rules,
            resolver,
        }
    }

    /// The rules.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    #[cfg(feature = "http-client")]
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
        let host = parse_host(raw).map_err(|e| refused(e.to_string()))?;
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
