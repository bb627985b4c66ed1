//! `[web]`: what the web tools (and plugins granted `net`) may reach, and how —
//! host lists, opened private ranges, time and size caps, a proxy, the user agent, and
//! the search provider (`[web.search]`). Read into the guard's [`Rules`] once, when
//! the host starts; a bad value is refused then, naming the key.

use std::time::Duration;

use serde::Deserialize;

use crate::net::{HostPattern, Injected, Proxy, Rules};

/// `[web]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    /// When not empty, only these hosts (`example.com`, `*.example.com`, an address;
    /// optionally `:port`).
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Never these hosts.
    #[serde(default)]
    pub deny_hosts: Vec<String>,
    /// Address ranges (CIDR, or one address) opened although their class is refused,
    /// e.g. an intranet's `10.20.0.0/16`. A cloud metadata address opens only when
    /// named as a single address.
    #[serde(default)]
    pub allow_private: Vec<String>,
    /// A whole request, body included, in ms.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Resolving a name, and connecting, each, in ms.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// Bytes of a response read from the wire; past it the body is cut.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// An HTTP proxy (`http://host:port`); the target is checked before the proxy is
    /// asked, and the proxy is asked for the checked address.
    pub proxy: Option<String>,
    /// The `User-Agent` sent when a component sets none.
    pub user_agent: Option<String>,
    /// A PEM file of certificate authorities to trust besides the Mozilla roots (an
    /// intranet's, or a TLS-inspecting proxy's), relative to this file.
    pub ca_file: Option<std::path::PathBuf>,
    /// The search provider.
    #[serde(default)]
    pub search: SearchConfig,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            allow_hosts: Vec::new(),
            deny_hosts: Vec::new(),
            allow_private: Vec::new(),
            timeout_ms: default_timeout(),
            connect_timeout_ms: default_connect_timeout(),
            max_bytes: default_max_bytes(),
            proxy: None,
            user_agent: None,
            ca_file: None,
            search: SearchConfig::default(),
        }
    }
}

/// The largest `[web] max_bytes`: a body is held in a component's memory.
pub const MAX_BYTES_CEILING: u64 = 256 << 20;

fn default_timeout() -> u64 {
    20_000
}
fn default_connect_timeout() -> u64 {
    10_000
}
fn default_max_bytes() -> u64 {
    5 << 20
}

/// Which search service `web_search` asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// A search engine's HTML results page (DuckDuckGo's HTML endpoint by default).
    #[default]
    Duckduckgo,
    /// A SearXNG instance's JSON API (`url` names the instance).
    Searxng,
    /// The Brave Search API (key from the environment variable `api_key_env`).
    Brave,
}

impl Provider {
    /// The provider's name, as written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Duckduckgo => "duckduckgo",
            Provider::Searxng => "searxng",
            Provider::Brave => "brave",
        }
    }

    fn default_url(self) -> Option<&'static str> {
        match self {
            Provider::Duckduckgo => Some("https://html.duckduckgo.com/html/"),
            Provider::Searxng => None,
            Provider::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
        }
    }
}

/// `[web.search]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// `duckduckgo` (default), `searxng` or `brave`.
    #[serde(default)]
    pub provider: Provider,
    /// The endpoint: a SearXNG instance (required for it), or a replacement for the
    /// default endpoint of the others.
    pub url: Option<String>,
    /// The environment variable holding the Brave API key (default `BRAVE_API_KEY`).
    /// The host reads it and adds it to requests to the API; the component never sees it.
    pub api_key_env: Option<String>,
}

/// The search settings the web component is told (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSettings {
    /// The provider.
    pub provider: Provider,
    /// Its endpoint.
    pub url: String,
    /// Whether the host holds a key for it (Brave).
    pub key_present: bool,
    /// The variable the key is read from (for the message when it is missing).
    pub key_env: String,
}

/// `[web]`, read: the guard's rules and what the web component is told.
#[derive(Debug, Clone)]
pub struct Web {
    /// The egress guard's rules.
    pub rules: Rules,
    /// The search provider.
    pub search: SearchSettings,
}

fn parse_url(what: &str, text: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = text.parse().map_err(|e| format!("{what} \"{text}\" is not a URL: {e}"))?;
    if uri.host().is_none() {
        return Err(format!("{what} \"{text}\" has no host"));
    }
    Ok(uri)
}

impl WebConfig {
    /// Check every value and produce the guard's rules; `env` reads the environment
    /// (the Brave key).
    pub fn read(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Web, crate::SettingError> {
        self.checked(env).map_err(crate::SettingError)
    }

    fn checked(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Web, String> {
        let patterns = |key: &str, list: &[String]| {
            list.iter()
                .map(|p| HostPattern::parse(p).map_err(|e| format!("[web] {key}: {e}")))
                .collect::<Result<Vec<_>, String>>()
        };
        let mut allow_private = Vec::new();
        for net in &self.allow_private {
            let parsed = net
                .parse::<ipnet::IpNet>()
                .or_else(|_| net.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    format!("[web] allow_private: \"{net}\" is not an address range (10.20.0.0/16) or address")
                })?;
            allow_private.push(parsed);
        }
        for (key, v) in [("timeout_ms", self.timeout_ms), ("connect_timeout_ms", self.connect_timeout_ms)] {
            if v == 0 {
                return Err(format!("[web] {key} must be a positive number of milliseconds"));
            }
        }
        if self.max_bytes == 0 || self.max_bytes > MAX_BYTES_CEILING {
            return Err(format!("[web] max_bytes must be between 1 and {MAX_BYTES_CEILING}"));
        }
        let proxy = match &self.proxy {
            None => None,
            Some(p) => {
                let uri = parse_url("[web] proxy", p)?;
                if uri.scheme_str() != Some("http") {
                    return Err(format!("[web] proxy \"{p}\" must be an http:// URL (the proxy is asked by CONNECT)"));
                }
                Some(Proxy {
                    host: uri.host().unwrap_or_default().trim_matches(['[', ']']).to_string(),
                    port: uri.port_u16().unwrap_or(80),
                })
            }
        };
        let provider = self.search.provider;
        let url = match (&self.search.url, provider.default_url()) {
            (Some(u), _) => u.clone(),
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(format!("[web.search] provider = \"{}\" needs url = \"https://…\"", provider.as_str()));
            }
        };
        let endpoint = parse_url("[web.search] url", &url)?;
        if !matches!(endpoint.scheme_str(), Some("http" | "https")) {
            return Err(format!("[web.search] url \"{url}\" must be http:// or https://"));
        }
        let key_env = self.search.api_key_env.clone().unwrap_or_else(|| "BRAVE_API_KEY".to_string());
        let mut inject = Vec::new();
        let mut key_present = false;
        if provider == Provider::Brave
            && let Some(key) = env(&key_env).filter(|k| !k.is_empty())
        {
            let mut value = http::HeaderValue::from_str(&key)
                .map_err(|_| format!("the environment variable {key_env} holds characters a header cannot carry"))?;
            value.set_sensitive(true);
            let host = endpoint.authority().map(|a| a.host()).unwrap_or_default();
            let https = endpoint.scheme_str() == Some("https");
            inject.push(Injected {
                host: HostPattern::parse(host).map_err(|e| format!("[web.search] url: {e}"))?,
                https,
                port: endpoint.port_u16().unwrap_or(if https { 443 } else { 80 }),
                name: http::HeaderName::from_static("x-subscription-token"),
                value,
            });
            key_present = true;
        }
        let defaults = Rules::default();
        Ok(Web {
            rules: Rules {
                allow_hosts: patterns("allow_hosts", &self.allow_hosts)?,
                deny_hosts: patterns("deny_hosts", &self.deny_hosts)?,
                allow_private,
                connect_timeout: Duration::from_millis(self.connect_timeout_ms),
                timeout: Duration::from_millis(self.timeout_ms),
                max_bytes: self.max_bytes,
                proxy,
                user_agent: self.user_agent.clone().unwrap_or(defaults.user_agent),
                inject,
                extra_roots: Vec::new(),
            },
            search: SearchSettings { provider, url, key_present, key_env },
        })
    }

    /// The certificates of `ca_file` (relative to `base`, the configuration's
    /// directory), read when the host starts.
    pub fn extra_roots(
        &self,
        base: Option<&std::path::Path>,
    ) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, String> {
        let mut extra_roots = Vec::new();
        if let Some(f) = &self.ca_file {
            use rustls_pki_types::pem::PemObject;
            let path = match base {
                Some(b) if f.is_relative() => b.join(f),
                _ => f.clone(),
            };
            let shown = path.display();
            let pem = crate::hostfile::read(&path, crate::hostfile::CA_FILE)
                .map_err(|e| format!("[web] ca_file {shown}: {}", e.reason()))?;
            let certs = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
                .map(|c| c.map(|c| c.into_owned()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("[web] ca_file {shown}: {e}"))?;
            if certs.is_empty() {
                return Err(format!("[web] ca_file {shown} holds no PEM certificate"));
            }
            extra_roots = certs;
        }
        Ok(extra_roots)
    }
}
