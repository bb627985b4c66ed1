//! The registry client: the OCI distribution API's two reads (a manifest, a blob),
//! every request through the egress guard ([`Egress::check`] then
//! [`connect::send`](crate::egress::connect::send)), so a registry's address is checked
//! like any other and connected to exactly as checked; TLS with the host's roots; basic
//! or bearer credentials, and the bearer-token exchange registries ask for; redirects
//! followed hop by hop, each hop checked again and never carrying credentials to
//! another host; every body read under a cap and a deadline.

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Empty};
use sha2::Digest as _;
use tokio::time::Instant;

use super::{OciError, OciRef};
use crate::egress::{Egress, Reach, connect};

/// The manifest media types asked for: the OCI image manifest (the Wasm OCI layout's).
pub(crate) const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json";
/// The image index media type (referrers are listed in one).
pub(crate) const INDEX_ACCEPT: &str = "application/vnd.oci.image.index.v1+json";
/// Most redirects one request follows (blob stores answer with one).
const MAX_REDIRECTS: usize = 5;
/// Largest token answer from a registry's token service.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;
/// Largest error body read to explain a failure.
const MAX_ERROR_BYTES: u64 = 16 * 1024;

/// Credentials for a registry, as the entry's `auth_env` variable holds them.
#[derive(Clone)]
pub(crate) enum Credentials {
    /// `user:password`.
    Basic(String),
    /// `Bearer <token>`.
    Bearer(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credentials::Basic(_) => "Basic(…)",
            Credentials::Bearer(_) => "Bearer(…)",
        })
    }
}

impl Credentials {
    /// Read `value` (`user:password` or `Bearer <token>`).
    pub(crate) fn parse(value: &str) -> Option<Credentials> {
        let value = value.trim();
        if let Some(token) = value.strip_prefix("Bearer ").map(str::trim).filter(|t| !t.is_empty()) {
            return Some(Credentials::Bearer(token.to_string()));
        }
        value.contains(':').then(|| Credentials::Basic(value.to_string()))
    }

    fn header(&self) -> String {
        match self {
            Credentials::Basic(pair) => format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair)),
            Credentials::Bearer(token) => format!("Bearer {token}"),
        }
    }
}

/// One registry, for the requests of one pull.
pub(crate) struct Client<'a> {
    egress: &'a Egress,
    source: &'a OciRef,
    credentials: Option<Credentials>,
    /// A token the registry's token service issued during this pull.
    token: Option<String>,
    deadline: Instant,
}

/// A body read whole, and the headers it came with.
pub(crate) struct Fetched {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl<'a> Client<'a> {
    pub(crate) fn new(
        egress: &'a Egress,
        source: &'a OciRef,
        credentials: Option<Credentials>,
        deadline: Instant,
    ) -> Client<'a> {
        Client { egress, source, credentials, token: None, deadline }
    }

    fn base(&self) -> String {
        let scheme = if self.source.plain_http() { "http" } else { "https" };
        format!("{scheme}://{}/v2/{}", self.source.registry(), self.source.repository())
    }

    /// The manifest `reference` (a tag or a digest) names, at most `cap` bytes.
    pub(crate) async fn manifest(&mut self, reference: &str, cap: u64) -> Result<Fetched, OciError> {
        let url = format!("{}/manifests/{reference}", self.base());
        self.get(&url, MANIFEST_ACCEPT, cap, None).await
    }

    /// The referrers of the manifest `digest` as an image index: the registry's
    /// referrers API, else the tag schema OCI 1.1 defines for registries without it
    /// (`sha256-<hex>`). `None` when neither has any.
    pub(crate) async fn referrers(&mut self, digest: &str, cap: u64) -> Result<Option<Vec<u8>>, OciError> {
        let url = format!("{}/referrers/{digest}", self.base());
        match self.get(&url, INDEX_ACCEPT, cap, None).await {
            Ok(f) => return Ok(Some(f.body)),
            Err(OciError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        let url = format!("{}/manifests/{}", self.base(), digest.replacen(':', "-", 1));
        match self.get(&url, INDEX_ACCEPT, cap, None).await {
            Ok(f) => Ok(Some(f.body)),
            Err(OciError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The blob `digest` (`sha256:<hex>`), exactly `size` bytes, checked against it.
    pub(crate) async fn blob(&mut self, digest: &str, size: u64) -> Result<Vec<u8>, OciError> {
        let url = format!("{}/blobs/{digest}", self.base());
        let fetched = self.get(&url, "*/*", size, Some(size)).await?;
        let actual = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&fetched.body)));
        if actual != digest {
            return Err(OciError::Invalid(format!(
                "{}: the registry sent a blob whose digest is {actual}, not the {digest} its manifest names",
                self.source
            )));
        }
        Ok(fetched.body)
    }

    /// GET `url`, answering the registry's authentication challenge once, following
    /// redirects; the body capped at `cap` bytes (`exact`: it must be that long).
    async fn get(&mut self, url: &str, accept: &str, cap: u64, exact: Option<u64>) -> Result<Fetched, OciError> {
        let mut challenged = false;
        loop {
            let res = self.send(url, accept).await?;
            if res.status() == StatusCode::UNAUTHORIZED && !challenged {
                challenged = true;
                let challenge = res
                    .headers()
                    .get(header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                self.answer(&challenge).await?;
                continue;
            }
            if !res.status().is_success() {
                return Err(self.failure(res).await);
            }
            let headers = res.headers().clone();
            if let Some(len) = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                && len > cap
            {
                return Err(OciError::TooLarge(format!(
                    "{}: the registry announces {len} bytes for {url}, over the {cap}-byte cap",
                    self.source
                )));
            }
            let body = read_capped(res.into_body(), cap, self.deadline).await.map_err(|e| match e {
                Capped::Over => OciError::TooLarge(format!(
                    "{}: {url} sent more than {cap} bytes{}",
                    self.source,
                    if exact.is_some() { ", the size its manifest gives" } else { ", the cap" }
                )),
                Capped::Timeout => OciError::Unreachable(format!("{}: reading {url} timed out", self.source)),
                Capped::Failed(m) => OciError::Unreachable(format!("{}: reading {url} failed: {m}", self.source)),
            })?;
            if let Some(n) = exact
                && body.len() as u64 != n
            {
                return Err(OciError::Invalid(format!(
                    "{}: {url} sent {} bytes, but its manifest gives {n}",
                    self.source,
                    body.len()
                )));
            }
            return Ok(Fetched { headers, body });
        }
    }

    /// The response to GET `url`, redirects followed (each hop through the guard;
    /// credentials only to the registry itself).
    async fn send(&self, url: &str, accept: &str) -> Result<http::Response<hyper::body::Incoming>, OciError> {
        let registry = self.source.registry().to_string();
        let mut url = url::Url::parse(url).map_err(|e| OciError::Source(format!("{url}: {e}")))?;
        for _ in 0..=MAX_REDIRECTS {
            let authority = authority_of(&url)?;
            let https = url.scheme() == "https";
            if !https && url.scheme() != "http" {
                return Err(OciError::Invalid(format!("{}: redirected to {url}", self.source)));
            }
            let own = authority == registry;
            // Plain HTTP only to a registry on this machine (the address guard still decides
            // whether this machine may be reached at all).
            if !(https || own && self.source.plain_http()) {
                return Err(OciError::Refused(format!(
                    "{}: refused to fetch {url} over plain HTTP (only a registry on loopback is reached without TLS)",
                    self.source
                )));
            }
            let (target, req) = self.checked(https, &authority, &url).await?;
            let mut req = req.header(header::ACCEPT, accept);
            if own {
                if let Some(token) = &self.token {
                    req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
                } else if let Some(c) = &self.credentials {
                    req = req.header(header::AUTHORIZATION, c.header());
                }
            }
            let req = req.body(Empty::<Bytes>::new()).map_err(|e| OciError::Source(format!("{url}: {e}")))?;
            let res = connect::send(self.egress, &target, req, self.deadline)
                .await
                .map_err(|e| OciError::Unreachable(format!("{}: {url}: {e}", self.source)))?;
            if res.status().is_redirection()
                && let Some(next) = res.headers().get(header::LOCATION).and_then(|v| v.to_str().ok())
            {
                url = url
                    .join(next)
                    .map_err(|e| OciError::Invalid(format!("{}: bad redirect {next}: {e}", self.source)))?;
                continue;
            }
            return Ok(res);
        }
        Err(OciError::Invalid(format!("{}: more than {MAX_REDIRECTS} redirects", self.source)))
    }

    /// Answer a `WWW-Authenticate` challenge: basic needs the entry's credentials;
    /// bearer sends them (when there are any) to the named token service for a token.
    async fn answer(&mut self, challenge: &str) -> Result<(), OciError> {
        let (scheme, params) = parse_challenge(challenge);
        let no_credentials = || {
            OciError::Auth(format!(
                "{}: the registry asks for credentials; name an environment variable holding \
                 user:password or \"Bearer <token>\" in the entry's auth_env",
                self.source
            ))
        };
        match scheme.as_str() {
            "basic" => match &self.credentials {
                None => Err(no_credentials()),
                Some(_) => Err(OciError::Auth(format!("{}: the registry refused the credentials", self.source))),
            },
            "bearer" => {
                if self.token.is_some() {
                    return Err(OciError::Auth(format!("{}: the registry refused its own token", self.source)));
                }
                let realm = params.get("realm").ok_or_else(|| {
                    OciError::Auth(format!("{}: a bearer challenge without a realm: {challenge}", self.source))
                })?;
                let mut url = url::Url::parse(realm)
                    .map_err(|e| OciError::Auth(format!("{}: token realm {realm}: {e}", self.source)))?;
                {
                    let mut q = url.query_pairs_mut();
                    if let Some(s) = params.get("service") {
                        q.append_pair("service", s);
                    }
                    let scope = params
                        .get("scope")
                        .cloned()
                        .unwrap_or_else(|| format!("repository:{}:pull", self.source.repository()));
                    q.append_pair("scope", &scope);
                }
                self.token = Some(self.token_from(&url).await?);
                Ok(())
            }
            _ if self.credentials.is_none() => Err(no_credentials()),
            _ => Err(OciError::Auth(format!("{}: the registry refused the credentials ({challenge})", self.source))),
        }
    }

    /// A token from the token service at `url` (the entry's credentials sent along,
    /// only over TLS or to this machine's registry).
    async fn token_from(&self, url: &url::Url) -> Result<String, OciError> {
        let authority = authority_of(url)?;
        let https = url.scheme() == "https";
        let local = !https && url.scheme() == "http" && self.source.plain_http() && authority == self.source.registry();
        if !https && !local {
            return Err(OciError::Refused(format!(
                "{}: refused to ask the token service {url} over plain HTTP",
                self.source
            )));
        }
        let (target, mut req) = self.checked(https, &authority, url).await?;
        if let Some(c @ Credentials::Basic(_)) = &self.credentials {
            req = req.header(header::AUTHORIZATION, c.header());
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|e| OciError::Source(format!("{url}: {e}")))?;
        let res = connect::send(self.egress, &target, req, self.deadline)
            .await
            .map_err(|e| OciError::Unreachable(format!("{}: token service {url}: {e}", self.source)))?;
        if !res.status().is_success() {
            let status = res.status();
            return Err(OciError::Auth(format!("{}: the token service answered {status}", self.source)));
        }
        let body = read_capped(res.into_body(), MAX_TOKEN_BYTES, self.deadline)
            .await
            .map_err(|_| OciError::Auth(format!("{}: the token service's answer could not be read", self.source)))?;
        #[derive(serde::Deserialize)]
        struct TokenAnswer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|e| OciError::Auth(format!("{}: the token service's answer is not JSON: {e}", self.source)))?;
        answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| OciError::Auth(format!("{}: the token service sent no token", self.source)))
    }

    /// `authority` checked by the egress guard (resolved once; only those addresses are
    /// connected to), and a GET of `url` addressed to it.
    async fn checked(
        &self,
        https: bool,
        authority: &str,
        url: &url::Url,
    ) -> Result<(crate::egress::Target, http::request::Builder), OciError> {
        let target = self.egress.check(https, authority, &Reach::Public).await.map_err(|e| match e {
            crate::egress::CheckError::Refused(m) => OciError::Refused(format!("{}: {m}", self.source)),
            crate::egress::CheckError::Dns(m) => OciError::Unreachable(format!("{}: {m}", self.source)),
        })?;
        let req = Request::get(url.as_str())
            .header(header::HOST, authority)
            .header(header::USER_AGENT, concat!("cheng/", env!("CARGO_PKG_VERSION")));
        Ok((target, req))
    }

    /// A failed response as an error: the status and the registry's own message.
    async fn failure(&self, res: http::Response<hyper::body::Incoming>) -> OciError {
        let status = res.status();
        let body = read_capped(res.into_body(), MAX_ERROR_BYTES, self.deadline).await.unwrap_or_default();
        // The distribution API's error body: {"errors":[{"code","message"}]}.
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let e = v.get("errors")?.get(0)?;
                Some(format!(
                    "{}: {}",
                    e.get("code").and_then(|c| c.as_str()).unwrap_or("error"),
                    e.get("message").and_then(|c| c.as_str()).unwrap_or("")
                ))
            })
            .unwrap_or_default();
        let message = cheng_contract::text::escape_line(&message);
        if status == StatusCode::NOT_FOUND {
            return OciError::NotFound(format!(
                "{}: the registry has no such manifest or blob ({message})",
                self.source
            ));
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return OciError::Auth(format!("{}: the registry answered {status} ({message})", self.source));
        }
        OciError::Registry(format!("{}: the registry answered {status} {message}", self.source))
    }
}

/// `host[:port]` of `url`, as the guard and the `Host` header take it.
fn authority_of(url: &url::Url) -> Result<String, OciError> {
    let host = url.host_str().ok_or_else(|| OciError::Source(format!("{url} has no host")))?;
    Ok(match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    })
}

/// A challenge's scheme (lower-case) and its `key="value"` parameters.
fn parse_challenge(challenge: &str) -> (String, std::collections::BTreeMap<String, String>) {
    let challenge = challenge.trim();
    let (scheme, rest) = challenge.split_once(' ').unwrap_or((challenge, ""));
    let mut params = std::collections::BTreeMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else { break };
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        params.insert(key, value.to_string());
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    (scheme.to_ascii_lowercase(), params)
}

enum Capped {
    Over,
    Timeout,
    Failed(String),
}

/// Read `body` whole, failing as soon as it passes `cap` bytes or `deadline` passes.
async fn read_capped(mut body: hyper::body::Incoming, cap: u64, deadline: Instant) -> Result<Vec<u8>, Capped> {
    let mut out = Vec::new();
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(Capped::Timeout),
            Ok(None) => return Ok(out),
            Ok(Some(Err(e))) => return Err(Capped::Failed(e.to_string())),
            Ok(Some(Ok(f))) => f,
        };
        if let Ok(data) = frame.into_data() {
            if out.len() as u64 + data.len() as u64 > cap {
                return Err(Capped::Over);
            }
            out.extend_from_slice(&data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_and_credentials_read_as_registries_send_them() {
        let (s, p) =
            parse_challenge(r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull""#);
        assert_eq!(s, "bearer");
        assert_eq!(p["realm"], "https://ghcr.io/token");
        assert_eq!(p["service"], "ghcr.io");
        assert_eq!(p["scope"], "repository:a/b:pull");
        let (s, p) = parse_challenge(r#"Basic realm="Registry Realm""#);
        assert_eq!((s.as_str(), p["realm"].as_str()), ("basic", "Registry Realm"));
        assert!(matches!(Credentials::parse("u:p"), Some(Credentials::Basic(_))));
        assert!(matches!(Credentials::parse("Bearer abc"), Some(Credentials::Bearer(t)) if t == "abc"));
        assert!(Credentials::parse("nonsense").is_none());
        assert!(Credentials::parse("Bearer ").is_none());
        assert_eq!(Credentials::parse("u:p").unwrap().header(), "Basic dTpw");
    }
}
