//! Bearer tokens for `cheng serve` over HTTP: the only way a request gets a role.
//!
//! An operator creates a token (`cheng token add --role R`); it is printed once and
//! only its SHA-256 is kept, in `<state dir>/tokens.json` (mode 0600). A request's token
//! is hashed and compared with every stored hash in constant time; a revoked token
//! (`cheng token revoke NAME`) is gone from the file. An agent token holds a role and
//! can call tools; an operator token (issue-level: the console's) holds none and cannot.
//!
//! A server verifies a token on every request, so the parsed file is kept and read again
//! only when the file is not the one it was parsed from: one `stat` per request. Every
//! change replaces the file whole (a new file renamed into place) and changes its size,
//! so a revocation is seen by the next request.
//!
//! # Example
//!
//! ```
//! use cheng_serve::tokens::{Kind, TokenStore};
//!
//! let dir = std::env::temp_dir().join(format!("tokens-doc-{}", std::process::id()));
//! let store = TokenStore::new(&dir);
//! let secret = store.add("ci-agent", Kind::Agent, Some("developer")).unwrap();
//! let who = store.verify(&secret).unwrap().unwrap();
//! assert_eq!(who.role.as_deref(), Some("developer"));
//! assert!(store.verify("cheng_wrong").unwrap().is_none());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What a token lets its holder do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An MCP client: calls the tools its role holds, nothing else.
    Agent,
    /// A person operating the host: reads health, runs and records and answers
    /// approvals; calls no tool.
    Operator,
}

/// One stored token (its hash, never the token).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stored {
    /// The operator's name for it (unique).
    pub name: String,
    /// Agent or operator.
    pub kind: Kind,
    /// The role an agent token calls tools as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The one workspace an agent token's sessions work in, whatever their roots say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// SHA-256 of the token, hex.
    pub sha256: String,
    /// When it was made (Unix ms).
    pub created_ms: u64,
}

/// Who a verified token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's name.
    pub name: String,
    /// Agent or operator.
    pub kind: Kind,
    /// The role (agents only).
    pub role: Option<String>,
    /// The workspace the token is pinned to, if it is.
    pub workspace: Option<PathBuf>,
}

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Reading or writing the file failed.
    #[error("token store {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file (or its lock file) is not a regular file, or is over its cap.
    #[error(transparent)]
    File(#[from] cheng_host::policy::hostfile::HostFileError),
    /// The file is not a token store.
    #[error("token store {0} is damaged: {1}")]
    Damaged(String, String),
    /// A name is taken, unknown, or not usable.
    #[error("{0}")]
    Name(String),
}

/// The tokens of one state directory. Clones share the parsed file.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
    parsed: Arc<Mutex<Option<Parsed>>>,
}

/// The file's tokens and the identity of the file they were read from.
#[derive(Debug)]
struct Parsed {
    identity: Identity,
    list: Arc<Vec<Stored>>,
}

/// What tells one version of the file from another: the file (device, inode) and its
/// size and change times (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity([i64; 7]);

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity([
            m.dev() as i64,
            m.ino() as i64,
            m.size() as i64,
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ])
    }
}

impl TokenStore {
    /// The store in `state_dir` (`tokens.json`).
    pub fn new(state_dir: &Path) -> TokenStore {
        TokenStore { path: state_dir.join("tokens.json"), parsed: Arc::default() }
    }

    /// Every stored token (hashes only).
    pub fn list(&self) -> Result<Vec<Stored>, TokenError> {
        Ok(self.current()?.as_ref().clone())
    }

    /// The file's tokens, parsed again only when the file changed since the last time.
    fn current(&self) -> Result<Arc<Vec<Stored>>, TokenError> {
        // No file (yet, or any more) is no tokens.
        let absent = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(Arc::default()),
            _ => Err(TokenError::Io { path: self.path.display().to_string(), source: e }),
        };
        let identity = match std::fs::metadata(&self.path) {
            Ok(m) => Identity::of(&m),
            Err(e) => return absent(e),
        };
        let mut parsed = self.parsed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = parsed.as_ref().filter(|p| p.identity == identity) {
            return Ok(p.list.clone());
        }
        // Read after the `stat`: what is read is that version of the file or a later one,
        // and a later one has another identity, so it is read again next time.
        let bytes = match cheng_host::policy::hostfile::read(&self.path, cheng_host::policy::hostfile::TOKENS) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Ok(Arc::default()),
            Err(e) => return Err(e.into()),
        };
        let list: Arc<Vec<Stored>> = Arc::new(
            serde_json::from_slice(&bytes)
                .map_err(|e| TokenError::Damaged(self.path.display().to_string(), e.to_string()))?,
        );
        *parsed = Some(Parsed { identity, list: list.clone() });
        Ok(list)
    }

    /// Held across a read-modify-write, so two `cheng token` commands at once cannot lose
    /// each other's change (a revoked token coming back).
    fn lock(&self) -> Result<std::fs::File, TokenError> {
        let path = self.path.with_extension("json.lock");
        let io = |source| TokenError::Io { path: path.display().to_string(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let f = cheng_host::policy::hostfile::open_lock(&path, "a tokens lock file")?;
        f.lock().map_err(io)?;
        Ok(f)
    }

    fn save(&self, list: &[Stored]) -> Result<(), TokenError> {
        let io = |source| TokenError::Io { path: self.path.display().to_string(), source };
        let data = serde_json::to_vec_pretty(list).unwrap_or_default();
        cheng_host::atomic::write_atomic(&self.path, &data).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600)).map_err(io)
    }

    /// Make a token named `name`; returns the token itself (shown once, never stored).
    pub fn add(&self, name: &str, kind: Kind, role: Option<&str>) -> Result<String, TokenError> {
        self.add_pinned(name, kind, role, None)
    }

    /// [`TokenStore::add`], pinned to one workspace (an absolute directory) when given.
    pub fn add_pinned(
        &self,
        name: &str,
        kind: Kind,
        role: Option<&str>,
        workspace: Option<&Path>,
    ) -> Result<String, TokenError> {
        let workspace = match workspace {
            None => None,
            Some(w) => Some(std::fs::canonicalize(w).ok().filter(|w| w.is_dir()).ok_or_else(|| {
                TokenError::Name(format!("the workspace {} is not a directory that can be opened", w.display()))
            })?),
        };
        let valid = !name.is_empty()
            && name.len() <= 64
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(TokenError::Name(format!(
                "token name \"{name}\" must be 1-64 letters, digits, '-', '_' or '.'"
            )));
        }
        let _lock = self.lock()?;
        let mut list = self.list()?;
        if list.iter().any(|t| t.name == name) {
            return Err(TokenError::Name(format!(
                "a token named \"{name}\" exists; revoke it first or pick another name"
            )));
        }
        let secret = format!("cheng_{}{}", cheng_host::new_id(), cheng_host::new_id());
        let created_ms = cheng_host::unix_ms();
        list.push(Stored {
            name: name.to_string(),
            kind,
            role: role.map(str::to_string),
            workspace,
            sha256: hex::encode(Sha256::digest(secret.as_bytes())),
            created_ms,
        });
        self.save(&list)?;
        Ok(secret)
    }

    /// Remove the token named `name`.
    pub fn revoke(&self, name: &str) -> Result<(), TokenError> {
        let _lock = self.lock()?;
        let mut list = self.list()?;
        let before = list.len();
        list.retain(|t| t.name != name);
        if list.len() == before {
            return Err(TokenError::Name(format!("no token named \"{name}\"")));
        }
        self.save(&list)
    }

    /// Who `presented` belongs to, if anyone. Every stored hash is compared, each in
    /// constant time, so neither the answer's timing nor its order tells which matched.
    pub fn verify(&self, presented: &str) -> Result<Option<Principal>, TokenError> {
        let digest = Sha256::digest(presented.as_bytes());
        let mut found = None;
        for t in self.current()?.iter() {
            let Ok(stored) = hex::decode(&t.sha256) else { continue };
            if bool::from(stored.as_slice().ct_eq(digest.as_slice())) {
                found = Some(Principal {
                    name: t.name.clone(),
                    kind: t.kind,
                    role: t.role.clone(),
                    workspace: t.workspace.clone(),
                });
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_stored_hashed_and_revocable() {
        let dir = std::env::temp_dir().join(format!("cheng-tokens-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = TokenStore::new(&dir);
        let a = store.add("a", Kind::Agent, Some("recon")).unwrap();
        let o = store.add("o", Kind::Operator, None).unwrap();
        // The file holds hashes, never a token, and only its owner may read it.
        let text = std::fs::read_to_string(dir.join("tokens.json")).unwrap();
        assert!(!text.contains(&a) && !text.contains(&o));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(dir.join("tokens.json")).unwrap().permissions().mode() & 0o777, 0o600);
        // Each token names its holder; a wrong one names nobody.
        assert_eq!(store.verify(&a).unwrap().unwrap().role.as_deref(), Some("recon"));
        assert_eq!(store.verify(&o).unwrap().unwrap().kind, Kind::Operator);
        assert!(store.verify(&format!("{a}x")).unwrap().is_none());
        // Names are unique; a revoked token stops working.
        assert!(store.add("a", Kind::Agent, Some("recon")).is_err());
        store.revoke("a").unwrap();
        assert!(store.verify(&a).unwrap().is_none());
        assert!(store.revoke("a").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_change_made_elsewhere_is_seen_by_the_next_verify() {
        let dir = tempfile::tempdir().unwrap();
        // The server's store, which keeps the parsed file, and the command line's.
        let server = TokenStore::new(dir.path());
        let cli = TokenStore::new(dir.path());
        assert!(server.verify("cheng_none").unwrap().is_none());
        // Made, used, revoked and replaced in quick succession (within one tick of the
        // file system's clock): each change is seen at once.
        for round in 0..20 {
            let name = format!("t{round}");
            let secret = cli.add(&name, Kind::Agent, Some("developer")).unwrap();
            assert_eq!(server.verify(&secret).unwrap().unwrap().name, name);
            cli.revoke(&name).unwrap();
            assert!(server.verify(&secret).unwrap().is_none(), "round {round}: a revoked token still works");
        }
        // The file gone: nobody.
        let kept = cli.add("kept", Kind::Agent, None).unwrap();
        assert!(server.verify(&kept).unwrap().is_some());
        std::fs::remove_file(dir.path().join("tokens.json")).unwrap();
        assert!(server.verify(&kept).unwrap().is_none());
        // A damaged file is an error, not an empty store and not the old list.
        std::fs::write(dir.path().join("tokens.json"), b"[{").unwrap();
        assert!(matches!(server.verify(&kept), Err(TokenError::Damaged(..))));
    }
}
