//! Bearer tokens for `cheng serve` over HTTP: the only way a request gets a role.
//!
//! An operator creates a token (`cheng token add --role R`); it is printed once and
//! only its SHA-256 is kept, in `<state dir>/tokens.json` (mode 0600). A request's token
//! is hashed and compared with every stored hash in constant time; a revoked token
//! (`cheng token revoke NAME`) is gone from the file. An agent token holds a role and
//! can call tools; an operator token (issue-level: the console's) holds none and cannot.
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

use std::path::{Path, PathBuf};

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
    /// The file is not a token store.
    #[error("token store {0} is damaged: {1}")]
    Damaged(String, String),
    /// A name is taken, unknown, or not usable.
    #[error("{0}")]
    Name(String),
}

/// The tokens of one state directory.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
}

impl TokenStore {
    /// The store in `state_dir` (`tokens.json`).
    pub fn new(state_dir: &Path) -> TokenStore {
        TokenStore { path: state_dir.join("tokens.json") }
    }

    /// Every stored token (hashes only).
    pub fn list(&self) -> Result<Vec<Stored>, TokenError> {
        match std::fs::read(&self.path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| TokenError::Damaged(self.path.display().to_string(), e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(TokenError::Io { path: self.path.display().to_string(), source }),
        }
    }

    /// Held across a read-modify-write, so two `cheng token` commands at once cannot lose
    /// each other's change (a revoked token coming back).
    fn lock(&self) -> Result<std::fs::File, TokenError> {
        let path = self.path.with_extension("json.lock");
        let io = |source| TokenError::Io { path: path.display().to_string(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io)?;
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
        for t in self.list()? {
            let Ok(stored) = hex::decode(&t.sha256) else { continue };
            if bool::from(stored.as_slice().ct_eq(digest.as_slice())) {
                found = Some(Principal { name: t.name, kind: t.kind, role: t.role, workspace: t.workspace });
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
}
