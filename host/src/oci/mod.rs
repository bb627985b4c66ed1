//! Components from OCI registries (`[[plugins]] source = "oci://…"`), published the way
//! the WebAssembly ecosystem publishes them: an image manifest whose one layer of type
//! `application/wasm` is the component.
//!
//! Pulling is an explicit step (`cheng plugin pull`, or [`pull`] from an embedder);
//! nothing is fetched when a host starts or a tool is called. A pull reads the manifest
//! (capped at [`MAX_MANIFEST_BYTES`], checked against the reference's digest when it
//! names one), then the layer (refused past [`MAX_LAYER_BYTES`] before a byte is read,
//! and again if the registry sends more than the manifest gives), checks the layer's
//! SHA-256 against the manifest, and stores it content-addressed in the state
//! directory: `oci/blobs/sha256/<hex>`. `oci/plugins.json` records, per plugin, the
//! source and the digest the operator accepted.
//!
//! The first pull of a source is accepted (the operator asked for it, and sees the
//! digest); an entry's `sha256` pin accepts exactly the bytes it names. A tag that
//! later points at other bytes is stored as *pending*: the host keeps loading the
//! accepted component until the operator compares the two (`cheng plugin diff`) and
//! accepts the new one ([`accept`], `cheng plugin accept`). With `signed_by`, a
//! signature by a listed key that refers to the manifest (an artifact of type
//! [`MINISIG_ARTIFACT`], found through the referrers API or its tag fallback) is
//! required, is stored beside the component, and accepts new bytes as a pin would.
//!
//! Every request goes through the host's egress guard ([`crate::egress`]): the
//! registry's addresses are checked like any web request's (loopback only where
//! `[web] allow_private` opens it) and connected to exactly as checked; TLS uses the
//! host's roots and `[web] ca_file`. A registry on loopback is reached over plain HTTP,
//! as container tools do; any other only over TLS.

mod registry;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::egress::Egress;
use crate::policy::hostfile;

/// The layer media type of a component in the Wasm OCI layout.
pub const WASM_LAYER: &str = "application/wasm";
/// The config media type of the Wasm OCI layout.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The artifact type (and layer media type) of a minisign signature referring to a
/// component's manifest.
pub const MINISIG_ARTIFACT: &str = "application/vnd.minisign.signature";
/// Largest signature read.
const MAX_SIGNATURE_BYTES: u64 = 8 * 1024;
/// Most referrers looked at for a signature.
const MAX_REFERRERS: usize = 16;
/// Largest manifest read (the distribution specification's own limit).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// Largest component layer pulled.
pub const MAX_LAYER_BYTES: u64 = 64 << 20;
/// A stored component: no larger than a pull accepts.
const BLOB: hostfile::Limit = hostfile::Limit::new(MAX_LAYER_BYTES, "a stored OCI component");
/// How long one pull may take, every request included.
pub const PULL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Why a component could not be pulled or loaded from the store.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OciError {
    /// The reference is not an `oci://` reference the host can read.
    #[error("{0}")]
    Source(String),
    /// The egress guard refused the registry's address, or a plain-HTTP hop.
    #[error("{0}")]
    Refused(String),
    /// The registry could not be reached, or stopped answering.
    #[error("{0}")]
    Unreachable(String),
    /// The registry asked for credentials, or refused them.
    #[error("{0}")]
    Auth(String),
    /// The registry has no such manifest or blob.
    #[error("{0}")]
    NotFound(String),
    /// The registry answered with an error.
    #[error("{0}")]
    Registry(String),
    /// A manifest or layer is larger than its cap.
    #[error("{0}")]
    TooLarge(String),
    /// What the registry sent is not a component in the Wasm OCI layout, or not the
    /// bytes its digests name.
    #[error("{0}")]
    Invalid(String),
    /// The bytes are not those the entry's `sha256` pins.
    #[error("{0}")]
    Pin(String),
    /// The entry lists signing keys, and no signature by one of them over these bytes
    /// refers to the component's manifest.
    #[error("{0}")]
    Signature(String),
    /// The plugin was never pulled, or from another source than its entry names.
    #[error("{0}")]
    NotPulled(String),
    /// The state directory could not be read or written, or holds damaged content.
    #[error("{0}")]
    Store(String),
}

/// A parsed `oci://registry/repository[:tag][@sha256:<hex>]` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    reference: oci_spec::distribution::Reference,
    text: String,
}

impl OciRef {
    /// Read `source`, which must start with `oci://` and name a registry.
    pub fn parse(source: &str) -> Result<OciRef, OciError> {
        let bad = |why: &str| OciError::Source(format!("\"{source}\" is not an OCI reference: {why}"));
        let rest = source.strip_prefix("oci://").ok_or_else(|| bad("it must start with oci://"))?;
        let reference: oci_spec::distribution::Reference = rest.parse().map_err(|e| bad(&format!("{e}")))?;
        // A name with no registry ("name:tag") would silently mean Docker Hub.
        let first = rest.split('/').next().unwrap_or_default();
        if !rest.contains('/') || !(first.contains('.') || first.contains(':') || first == "localhost") {
            return Err(bad("name the registry (oci://registry.example.com/repository:tag)"));
        }
        if let Some(d) = reference.digest()
            && !d.starts_with("sha256:")
        {
            return Err(bad("only sha256 digests are checked"));
        }
        Ok(OciRef { reference, text: source.to_string() })
    }

    /// The registry's `host[:port]`.
    pub fn registry(&self) -> &str {
        self.reference.resolve_registry()
    }

    /// The repository.
    pub fn repository(&self) -> &str {
        self.reference.repository()
    }

    /// The digest the reference names, if any.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// What to ask the registry for: the digest when the reference has one, else the tag.
    fn target(&self) -> &str {
        self.reference.digest().or(self.reference.tag()).unwrap_or("latest")
    }

    /// Whether the registry is on this machine (loopback or `localhost`), and so reached
    /// over plain HTTP.
    pub fn plain_http(&self) -> bool {
        let Ok((host, _)) = crate::egress::split_port(self.registry()) else { return false };
        match crate::egress::parse_host(host) {
            Ok(crate::egress::Host::Ip(ip)) => ip.is_loopback(),
            Ok(crate::egress::Host::Name(n)) => n.eq_ignore_ascii_case("localhost"),
            Err(_) => false,
        }
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// One version of a pulled component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// SHA-256 of the component (what `sha256` pins; the blob's name in the store).
    pub sha256: String,
    /// Digest of the manifest it came from (`sha256:<hex>`).
    pub manifest: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was pulled (Unix milliseconds).
    pub pulled_ms: u64,
}

/// What the store records of one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pulled {
    /// The source it was pulled from.
    pub source: String,
    /// The version the host loads.
    pub accepted: Version,
    /// A newer version the source now names, waiting for `cheng plugin accept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Version>,
}

/// The state directory's component store (`<state>/oci`).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    #[serde(default)]
    plugins: BTreeMap<String, Pulled>,
}

impl Store {
    /// The store in `state_dir`.
    pub fn new(state_dir: &Path) -> Store {
        Store { root: state_dir.join("oci") }
    }

    /// Where the component with SHA-256 `hex` is kept.
    pub fn blob_path(&self, hex: &str) -> PathBuf {
        self.root.join("blobs").join("sha256").join(hex)
    }

    fn index_path(&self) -> PathBuf {
        self.root.join("plugins.json")
    }

    fn index(&self) -> Result<Index, OciError> {
        let path = self.index_path();
        match hostfile::read(&path, hostfile::OCI_INDEX) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| OciError::Store(format!("{} is unreadable: {e}", path.display()))),
            Err(e) if e.is_not_found() => Ok(Index::default()),
            // The message names the file, what is wrong with it and the limit.
            Err(e) => Err(OciError::Store(e.to_string())),
        }
    }

    /// Read the index, change it with `f`, and write it back, holding an exclusive
    /// `flock` on `oci/plugins.lock` throughout, so that pulls and accepts in several
    /// processes never lose each other's entries.
    fn update<T>(&self, f: impl FnOnce(&mut Index) -> Result<T, OciError>) -> Result<T, OciError> {
        let path = self.root.join("plugins.lock");
        let store_error = |e: std::io::Error| OciError::Store(format!("cannot lock {}: {e}", path.display()));
        std::fs::create_dir_all(&self.root).map_err(store_error)?;
        let lock =
            hostfile::open_lock(&path, "the OCI store's lock file").map_err(|e| OciError::Store(e.to_string()))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).map_err(|e| store_error(e.into()))?;
        let mut index = self.index()?;
        let out = f(&mut index)?;
        self.save(&index)?;
        // Closing the file releases the lock.
        drop(lock);
        Ok(out)
    }

    fn save(&self, index: &Index) -> Result<(), OciError> {
        let path = self.index_path();
        // Strings and numbers only: serializing cannot fail.
        let text = serde_json::to_vec_pretty(index).unwrap_or_default();
        crate::atomic::write_atomic(&path, &text)
            .map_err(|e| OciError::Store(format!("cannot write {}: {e}", path.display())))
    }

    /// What the store records of plugin `id`.
    pub fn pulled(&self, id: &str) -> Result<Option<Pulled>, OciError> {
        Ok(self.index()?.plugins.remove(id))
    }

    /// The component with SHA-256 `hex`, checked against it.
    pub fn read(&self, hex: &str) -> Result<Vec<u8>, OciError> {
        let path = self.blob_path(hex);
        let bytes = hostfile::read(&path, BLOB).map_err(|e| OciError::Store(e.to_string()))?;
        let actual = hex::encode(sha2::Sha256::digest(&bytes));
        if actual != hex {
            return Err(OciError::Store(format!(
                "{} is damaged (its sha256 is {actual}); pull it again",
                path.display()
            )));
        }
        Ok(bytes)
    }

    fn put(&self, hex: &str, bytes: &[u8]) -> Result<(), OciError> {
        let path = self.blob_path(hex);
        crate::atomic::write_atomic(&path, bytes)
            .map_err(|e| OciError::Store(format!("cannot write {}: {e}", path.display())))
    }
}

/// The component plugin `id` loads from `source`: the accepted version, read from the
/// store and checked. Never touches the network.
pub fn load(store: &Store, id: &str, source: &str) -> Result<(Vec<u8>, PathBuf), OciError> {
    let pulled = store.pulled(id)?.ok_or_else(|| {
        OciError::NotPulled(format!("plugin \"{id}\": {source} has not been pulled; run `cheng plugin pull {id}`"))
    })?;
    if pulled.source != source {
        return Err(OciError::NotPulled(format!(
            "plugin \"{id}\": it was pulled from {}, but its entry now names {source}; run `cheng plugin pull {id}`",
            pulled.source
        )));
    }
    if let Some(p) = &pulled.pending {
        tracing::warn!(target: "cheng::plugins", plugin = %id, accepted = %pulled.accepted.sha256, pending = %p.sha256,
            "{source} now names other bytes; the accepted ones load until `cheng plugin accept {id}`");
    }
    let bytes = store.read(&pulled.accepted.sha256)?;
    Ok((bytes, store.blob_path(&pulled.accepted.sha256)))
}

/// What a pull did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The component is the accepted one now (a first pull, or the bytes the pin names).
    Accepted,
    /// The source still names the accepted component.
    Unchanged,
    /// The source names other bytes than the accepted ones: stored as pending.
    Moved,
}

/// The result of pulling one plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PullReport {
    /// The plugin.
    pub id: String,
    /// Its source.
    pub source: String,
    /// What happened.
    pub outcome: Outcome,
    /// The version the source names now.
    pub pulled: Version,
    /// The accepted version, when the pull did not change it to `pulled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<Version>,
}

/// A pull request: which plugin, from where, with what pin and credentials.
#[derive(Clone)]
pub struct PullRequest<'a> {
    /// The plugin's id (`None`: a reference pulled on its own, recorded nowhere).
    pub id: Option<&'a str>,
    /// The `oci://` reference.
    pub source: &'a str,
    /// The entry's `sha256` pin.
    pub sha256: Option<&'a str>,
    /// The credentials (`user:password` or `Bearer <token>`), from `auth_env`.
    pub auth: Option<String>,
    /// The entry's `signed_by` keys: a signature by one of them must refer to the
    /// manifest, and then stands in for the operator's acceptance.
    pub signed_by: &'a [String],
}

impl fmt::Debug for PullRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PullRequest")
            .field("id", &self.id)
            .field("source", &self.source)
            .field("sha256", &self.sha256)
            .field("auth", &self.auth.as_ref().map(|_| "…"))
            .field("signed_by", &self.signed_by)
            .finish()
    }
}

/// Pull `req.source` into `store`, through `egress`, and record it for `req.id`.
pub async fn pull(egress: &Arc<Egress>, store: &Store, req: &PullRequest<'_>) -> Result<PullReport, OciError> {
    let source = OciRef::parse(req.source)?;
    let credentials = match &req.auth {
        None => None,
        Some(v) => Some(registry::Credentials::parse(v).ok_or_else(|| {
            OciError::Auth(format!("{source}: the credentials must read user:password or \"Bearer <token>\""))
        })?),
    };
    let deadline = tokio::time::Instant::now() + PULL_TIMEOUT;
    let mut client = registry::Client::new(egress, &source, credentials, deadline);

    let manifest = client.manifest(source.target(), MAX_MANIFEST_BYTES).await?;
    let manifest_digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&manifest.body)));
    if let Some(d) = source.digest()
        && d != manifest_digest
    {
        return Err(OciError::Invalid(format!(
            "{source}: the registry sent a manifest whose digest is {manifest_digest}"
        )));
    }
    let media_type =
        manifest.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let parsed: oci_spec::image::ImageManifest = serde_json::from_slice(&manifest.body).map_err(|e| {
        OciError::Invalid(format!(
            "{source}: not an OCI image manifest ({}): {e}",
            if media_type.is_empty() { "no content type" } else { media_type.as_str() }
        ))
    })?;
    let layers: Vec<_> = parsed.layers().iter().filter(|l| l.media_type().to_string() == WASM_LAYER).collect();
    let layer = match layers.as_slice() {
        [one] => *one,
        [] => {
            return Err(OciError::Invalid(format!(
                "{source}: the manifest has no {WASM_LAYER} layer; it is not a component in the Wasm OCI layout"
            )));
        }
        _ => return Err(OciError::Invalid(format!("{source}: the manifest has {} {WASM_LAYER} layers", layers.len()))),
    };
    let digest = layer.digest().to_string();
    let Some(hex_digest) = digest.strip_prefix("sha256:").map(str::to_string) else {
        return Err(OciError::Invalid(format!("{source}: the layer's digest {digest} is not sha256")));
    };
    if layer.size() > MAX_LAYER_BYTES {
        return Err(OciError::TooLarge(format!(
            "{source}: the component layer is {} bytes, over the {MAX_LAYER_BYTES}-byte cap",
            layer.size()
        )));
    }
    if let Some(pin) = req.sha256
        && !pin.eq_ignore_ascii_case(&hex_digest)
    {
        return Err(OciError::Pin(format!(
            "plugin \"{}\": {source} names a component with sha256 {hex_digest}, but cheng.toml pins {pin}; not pulled",
            req.id.unwrap_or("-")
        )));
    }
    // Bytes the store already holds under this digest (and this size) are not fetched again.
    let (bytes, stored) = match store.read(&hex_digest) {
        Ok(b) if b.len() as u64 == layer.size() => (b, true),
        _ => (client.blob(&digest, layer.size()).await?, false),
    };
    // A signature by a listed key, from the registry, stored beside the component
    // (where loading checks it again, as for a file's `.minisig`); without one nothing
    // is stored.
    let signature = if req.signed_by.is_empty() {
        None
    } else {
        crate::signature::check_keys(req.signed_by).map_err(|e| OciError::Signature(format!("{source}: {e}")))?;
        Some(find_signature(&mut client, &source, &manifest_digest, &bytes, req.signed_by).await?)
    };
    if !stored {
        store.put(&hex_digest, &bytes)?;
    }
    if let Some(text) = &signature {
        let sig_path = crate::signature::detached_path(&store.blob_path(&hex_digest));
        crate::atomic::write_atomic(&sig_path, text.as_bytes())
            .map_err(|e| OciError::Store(format!("cannot write {}: {e}", sig_path.display())))?;
    }
    let signed = signature.is_some();
    let version =
        Version { sha256: hex_digest, manifest: manifest_digest, size: bytes.len() as u64, pulled_ms: now_ms() };
    let Some(id) = req.id else {
        return Ok(PullReport {
            id: String::new(),
            source: req.source.to_string(),
            outcome: Outcome::Accepted,
            pulled: version,
            accepted: None,
        });
    };
    let report = |outcome, accepted| PullReport {
        id: id.to_string(),
        source: req.source.to_string(),
        outcome,
        pulled: version.clone(),
        accepted,
    };
    store.update(|index| {
        let (entry, report) = match index.plugins.get(id) {
            // A first pull, a new source in the entry, or bytes the pin names: accepted.
            None => (
                Pulled { source: req.source.into(), accepted: version.clone(), pending: None },
                report(Outcome::Accepted, None),
            ),
            // A signature by a listed key accepts new bytes as the pin does.
            Some(p)
                if p.source != req.source
                    || ((req.sha256.is_some() || signed) && p.accepted.sha256 != version.sha256) =>
            {
                (
                    Pulled { source: req.source.into(), accepted: version.clone(), pending: None },
                    report(Outcome::Accepted, None),
                )
            }
            Some(p) if p.accepted.sha256 == version.sha256 => {
                (Pulled { pending: None, ..p.clone() }, report(Outcome::Unchanged, None))
            }
            Some(p) => (
                Pulled { pending: Some(version.clone()), ..p.clone() },
                report(Outcome::Moved, Some(p.accepted.clone())),
            ),
        };
        index.plugins.insert(id.to_string(), entry);
        Ok(report)
    })
}

/// The signature by one of `keys` over `bytes` among the referrers of `manifest`.
async fn find_signature(
    client: &mut registry::Client<'_>,
    source: &OciRef,
    manifest: &str,
    bytes: &[u8],
    keys: &[String],
) -> Result<String, OciError> {
    let none = |why: String| {
        OciError::Signature(format!(
            "{source}: {why}; an entry with signed_by needs a {MINISIG_ARTIFACT} artifact whose subject is \
             manifest {manifest}, signed by a listed key; not pulled"
        ))
    };
    let Some(index) = client.referrers(manifest, MAX_MANIFEST_BYTES).await? else {
        return Err(none("the registry lists nothing referring to the manifest".into()));
    };
    let index: oci_spec::image::ImageIndex = serde_json::from_slice(&index)
        .map_err(|e| OciError::Invalid(format!("{source}: the referrers of {manifest} are not an image index: {e}")))?;
    let mut last = String::from("no signature refers to it");
    for entry in index.manifests().iter().take(MAX_REFERRERS) {
        if entry.artifact_type().as_ref().is_some_and(|t| t.to_string() != MINISIG_ARTIFACT) {
            continue;
        }
        let digest = entry.digest().to_string();
        let fetched = client.manifest(&digest, MAX_MANIFEST_BYTES).await?;
        if format!("sha256:{}", hex::encode(sha2::Sha256::digest(&fetched.body))) != digest {
            return Err(OciError::Invalid(format!("{source}: the referrer {digest} is not the bytes of its digest")));
        }
        let Ok(artifact) = serde_json::from_slice::<oci_spec::image::ImageManifest>(&fetched.body) else { continue };
        if artifact.subject().as_ref().map(|s| s.digest().to_string()).as_deref() != Some(manifest) {
            continue;
        }
        for layer in artifact.layers().iter().filter(|l| l.media_type().to_string() == MINISIG_ARTIFACT) {
            if layer.size() > MAX_SIGNATURE_BYTES {
                continue;
            }
            let sig = client.blob(layer.digest().as_ref(), layer.size()).await?;
            let Ok(text) = String::from_utf8(sig) else { continue };
            match crate::signature::verify(bytes, &text, &format!("the signature {digest}"), keys) {
                Ok(info) => {
                    tracing::info!(target: "cheng::plugins", source = %source, key = %info.key_id,
                        comment = %cheng_contract::text::escape_line(&info.trusted_comment), "signature verified");
                    return Ok(text);
                }
                Err(e) => last = e.to_string(),
            }
        }
    }
    Err(none(last))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Accept plugin `id`'s pending version: the host loads it from the next start.
/// `Ok(None)` when nothing is pending.
pub fn accept(store: &Store, id: &str) -> Result<Option<Version>, OciError> {
    store.update(|index| {
        let Some(p) = index.plugins.get_mut(id) else {
            return Err(OciError::NotPulled(format!(
                "plugin \"{id}\" has not been pulled; run `cheng plugin pull {id}`"
            )));
        };
        let Some(pending) = p.pending.take() else { return Ok(None) };
        store.read(&pending.sha256)?;
        p.accepted = pending.clone();
        Ok(Some(pending))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_a_registry_and_check_only_sha256() {
        let r = OciRef::parse("oci://127.0.0.1:5000/tools/noop:1.0").unwrap();
        assert_eq!((r.registry(), r.repository(), r.target()), ("127.0.0.1:5000", "tools/noop", "1.0"));
        assert!(r.plain_http());
        let d = format!("sha256:{}", "a".repeat(64));
        let r = OciRef::parse(&format!("oci://ghcr.io/acme/tool@{d}")).unwrap();
        assert_eq!((r.registry(), r.target()), ("ghcr.io", d.as_str()));
        assert!(!r.plain_http());
        assert!(OciRef::parse("oci://localhost/x:1").unwrap().plain_http());
        for bad in ["ghcr.io/acme/tool:1", "oci://tool:1", "oci://acme/tool:1", "oci://ghcr.io/Acme:1", "oci://"] {
            assert!(matches!(OciRef::parse(bad), Err(OciError::Source(_))), "{bad}");
        }
        let sha512 = format!("oci://ghcr.io/acme/tool@sha512:{}", "a".repeat(128));
        assert!(OciRef::parse(&sha512).is_err());
    }

    #[test]
    fn the_store_checks_what_it_reads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let hex = hex::encode(sha2::Sha256::digest(b"component"));
        store.put(&hex, b"component").unwrap();
        assert_eq!(store.read(&hex).unwrap(), b"component");
        std::fs::write(store.blob_path(&hex), b"tampered").unwrap();
        assert!(matches!(store.read(&hex), Err(OciError::Store(m)) if m.contains("damaged")));
        // A plugin never pulled is refused with the command that pulls it.
        let e = load(&store, "x", "oci://localhost/x:1").unwrap_err();
        assert!(e.to_string().contains("cheng plugin pull x"), "{e}");
    }
}
