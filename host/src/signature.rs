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
    /// The signing key's id, as minisign prints it: upper-case hex without leading
    /// zeros (`882A9B965100048`, as in its `.pub` file's comment), so it can be found
    /// there as written.
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
/// two bytes of algorithm, then eight of key id, a little-endian number. Ids are
/// compared as that number, never as text.
fn id_of(b64: &str) -> Option<([u8; 2], u64)> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim()).ok()?;
    let alg: [u8; 2] = bytes.get(0..2)?.try_into().ok()?;
    let id: [u8; 8] = bytes.get(2..10)?.try_into().ok()?;
    Some((alg, u64::from_le_bytes(id)))
}

/// A key id as minisign prints it (`%" PRIX64`: upper-case hex, no leading zeros).
fn shown(id: u64) -> String {
    format!("{id:X}")
}

/// Where the detached signature of `file` is: `<file>.minisig`.
pub fn detached_path(file: &std::path::Path) -> std::path::PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".minisig");
    name.into()
}

/// Read what `text` (a `.minisig` file) says about itself; `name` names it in errors.
pub fn describe(text: &str, name: &str) -> Result<SignatureInfo, SignatureError> {
    decode(text, name).map(|(_, _, info)| info)
}

fn decode(text: &str, name: &str) -> Result<(Signature, u64, SignatureInfo), SignatureError> {
    let malformed = || SignatureError::Malformed(name.to_string());
    let sig = Signature::decode(text).map_err(|_| malformed())?;
    let line = text.lines().nth(1).ok_or_else(malformed)?;
    let (alg, id) = id_of(line).ok_or_else(malformed)?;
    let info =
        SignatureInfo { key_id: shown(id), trusted_comment: sig.trusted_comment().to_string(), legacy: &alg == b"Ed" };
    Ok((sig, id, info))
}

/// Check `keys` (a `signed_by` list) on their own: each a minisign public key, none twice.
pub fn check_keys(keys: &[String]) -> Result<(), SignatureError> {
    let mut seen = std::collections::BTreeSet::new();
    for k in keys {
        PublicKey::from_base64(k.trim()).map_err(|_| SignatureError::BadKey(k.clone()))?;
        let (_, id) = id_of(k).ok_or_else(|| SignatureError::BadKey(k.clone()))?;
        if !seen.insert(id) {
            return Err(SignatureError::DuplicateKey(shown(id)));
        }
    }
    Ok(())
}

/// Verify `text` (a `.minisig` file, named `name`) as a signature of `bytes` by one of
/// `keys` (checked first with [`check_keys`]); what it says about itself when it holds.
pub fn verify(bytes: &[u8], text: &str, name: &str, keys: &[String]) -> Result<SignatureInfo, SignatureError> {
    let (sig, id, info) = decode(text, name)?;
    if info.legacy {
        return Err(SignatureError::Legacy);
    }
    let key = keys
        .iter()
        .find(|k| id_of(k).is_some_and(|(_, listed)| listed == id))
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

    // Made with minisign 0.11 (`minisign -G -W`, then `minisign -S` of the five bytes
    // `test\n`): a key whose id starts with a zero nibble, which minisign prints without
    // it — `untrusted comment: minisign public key 882A9B965100048` — and says the same
    // way when a signature's key is not the one given ("Signature key id in f.minisig is
    // 882A9B965100048").
    const ZERO_LED_KEY: &str = "RWRIABBluamCCJsxebW5hpB6hX66q8bZp8M2rZp7ABlBZT8RHgTl1CJg";
    const ZERO_LED_SIG: &str = "untrusted comment: signature from minisign secret key\n\
        RURIABBluamCCAbqif3TO7eZS0AxEbLiXFTtYXAYll1Q7uKS5/8htM7pWtFOYR75lydF+MPzL495TOwKtZkjX0WxRjmuHrbRfgI=\n\
        trusted comment: timestamp:1796604019\tfile:f\thashed\n\
        qak/Spd3+nr2Ma8GoWA6oqFSq0D9ZvnVEKeqhMBaYvK1pExgQf7sVYDXYt4OaU7RCEFe0haO3AfDpv1av6w2Aw==\n";
    /// Another minisign key (`C596AEFCBF7CB5F9`).
    const OTHER_KEY: &str = "RWT5tXy//K6WxUGnyfv8Na0JQ83KjwTctnDQmJJm9u2jj3udio9xgOHW";

    #[test]
    fn a_key_id_with_a_leading_zero_is_shown_as_minisign_shows_it() {
        let info = describe(ZERO_LED_SIG, "f.minisig").unwrap();
        assert_eq!(info.key_id, "882A9B965100048");
        assert!(!info.legacy);
        // The signature holds for its bytes and key, and names the key the same way in
        // every refusal.
        assert_eq!(verify(b"test\n", ZERO_LED_SIG, "f.minisig", &[ZERO_LED_KEY.into()]), Ok(info));
        assert_eq!(
            verify(b"test\n", ZERO_LED_SIG, "f.minisig", &[OTHER_KEY.into()]),
            Err(SignatureError::UnlistedKey("882A9B965100048".into()))
        );
        assert_eq!(
            verify(b"tset\n", ZERO_LED_SIG, "f.minisig", &[OTHER_KEY.into(), ZERO_LED_KEY.into()]),
            Err(SignatureError::Mismatch("882A9B965100048".into()))
        );
        assert_eq!(
            check_keys(&[ZERO_LED_KEY.into(), format!(" {ZERO_LED_KEY}")]),
            Err(SignatureError::DuplicateKey("882A9B965100048".into()))
        );
        // A full-width id keeps all sixteen digits.
        assert_eq!(
            check_keys(&[OTHER_KEY.into(), OTHER_KEY.into()]),
            Err(SignatureError::DuplicateKey("C596AEFCBF7CB5F9".into()))
        );
    }
}
