//! Minisign signatures on plugin components (`signed_by` in a `[[plugins]]` entry).
//!
//! A plugin whose entry lists keys loads only if `<file>.minisig` beside it is a
//! signature, by one of those keys, of exactly the file's bytes: checked here with
//! `minisign-verify`, no external program. The trusted comment is covered by the
//! signature too, so an edited comment fails like edited bytes. Only prehashed
//! signatures (what minisign has made by default since 0.8) are accepted; a legacy one
//! is refused with a note on how to sign again.

use minisign_verify::{PublicKey, Signature};

/// What a signature says about itself (before any key is checked).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SignatureInfo {
    /// The signing key's id, as minisign prints it (16 upper-case hex digits).
    pub key_id: String,
    /// The trusted comment (signed along with the file).
    pub trusted_comment: String,
    /// True for a legacy (not prehashed) signature.
    pub legacy: bool,
}

/// Why a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// No signature file.
    #[error("signed_by is set, but there is no signature file {0} beside it")]
    Missing(String),
    /// The signature file is not a minisign signature.
    #[error("{0} is not a minisign signature")]
    Malformed(String),
    /// A key in `signed_by` is not a minisign public key.
    #[error("signed_by key {0:?} is not a minisign public key (the base64 line of a minisign .pub file)")]
    BadKey(String),
    /// The same key twice in `signed_by`.
    #[error("signed_by lists key {0} twice")]
    DuplicateKey(String),
    /// A legacy signature.
    #[error("the signature is a legacy (not prehashed) one; sign again with minisign 0.8 or later, without -l")]
    Legacy,
    /// Signed by a key the entry does not list.
    #[error("it is signed by key {0}, which signed_by does not list")]
    UnlistedKey(String),
    /// The signature does not verify: other bytes, or an edited trusted comment.
    #[error(
        "the signature by key {0} does not match: the file is not the one signed, or the signature's trusted comment was edited"
    )]
    Mismatch(String),
}

/// The key id and algorithm of a base64 minisign blob (a key or a signature line):
/// two bytes of algorithm, then eight of key id.
fn id_of(b64: &str) -> Option<([u8; 2], String)> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim()).ok()?;
    let alg: [u8; 2] = bytes.get(0..2)?.try_into().ok()?;
    let id = bytes.get(2..10)?;
    // minisign prints the id as a little-endian number.
    Some((alg, id.iter().rev().map(|b| format!("{b:02X}")).collect()))
}

/// Where the detached signature of `file` is: `<file>.minisig`.
pub fn detached_path(file: &std::path::Path) -> std::path::PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".minisig");
    name.into()
}

/// Read what `text` (a `.minisig` file) says about itself; `name` names it in errors.
pub fn describe(text: &str, name: &str) -> Result<SignatureInfo, SignatureError> {
    decode(text, name).map(|(_, info)| info)
}

fn decode(text: &str, name: &str) -> Result<(Signature, SignatureInfo), SignatureError> {
    let malformed = || SignatureError::Malformed(name.to_string());
    let sig = Signature::decode(text).map_err(|_| malformed())?;
    let line = text.lines().nth(1).ok_or_else(malformed)?;
    let (alg, key_id) = id_of(line).ok_or_else(malformed)?;
    let info = SignatureInfo { key_id, trusted_comment: sig.trusted_comment().to_string(), legacy: &alg == b"Ed" };
    Ok((sig, info))
}

/// Check `keys` (a `signed_by` list) on their own: each a minisign public key, none twice.
pub fn check_keys(keys: &[String]) -> Result<(), SignatureError> {
    let mut seen = std::collections::BTreeSet::new();
    for k in keys {
        PublicKey::from_base64(k.trim()).map_err(|_| SignatureError::BadKey(k.clone()))?;
        let (_, id) = id_of(k).ok_or_else(|| SignatureError::BadKey(k.clone()))?;
        if !seen.insert(id.clone()) {
            return Err(SignatureError::DuplicateKey(id));
        }
    }
    Ok(())
}

/// Verify `text` (a `.minisig` file, named `name`) as a signature of `bytes` by one of
/// `keys` (checked first with [`check_keys`]); what it says about itself when it holds.
pub fn verify(bytes: &[u8], text: &str, name: &str, keys: &[String]) -> Result<SignatureInfo, SignatureError> {
    let (sig, info) = decode(text, name)?;
    if info.legacy {
        return Err(SignatureError::Legacy);
    }
    let key = keys
        .iter()
        .find(|k| id_of(k).is_some_and(|(_, id)| id == info.key_id))
        .ok_or_else(|| SignatureError::UnlistedKey(info.key_id.clone()))?;
    let key = PublicKey::from_base64(key.trim()).map_err(|_| SignatureError::BadKey(key.clone()))?;
    key.verify(bytes, &sig, false).map_err(|_| SignatureError::Mismatch(info.key_id.clone()))?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for text in ["", "untrusted comment: x\n", "untrusted comment: x\nnot base64!\ntrusted comment: t\nAAAA\n"] {
            assert_eq!(describe(text, "f.minisig"), Err(SignatureError::Malformed("f.minisig".into())));
        }
        assert!(matches!(check_keys(&["RWQnot-a-key".into()]), Err(SignatureError::BadKey(_))));
    }
}
