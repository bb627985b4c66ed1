//! Paths as git prints them: quoted with C escapes where git quotes them.

use super::*;

/// A path as git prints it in porcelain v1: quoted with C escapes when needed (names
/// that are not UTF-8 keep their bytes, octal-escaped).
pub(crate) fn quote_bytes(p: &[u8]) -> String {
    // As `git status` quotes: also when the path holds a space.
    let needs = p.iter().any(|&b| b == b'"' || b == b'\\' || b == b' ' || !(0x20..0x7f).contains(&b));
    if !needs {
        return String::from_utf8_lossy(p).into_owned();
    }
    let mut s = String::from("\"");
    for &b in p {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s.push('"');
    s
}

pub(crate) fn lossy(b: &gix::bstr::BStr, stderr: &mut String) -> String {
    match b.to_str() {
        Ok(s) => s.to_string(),
        Err(_) => {
            let s = b.to_str_lossy().into_owned();
            stderr.push_str(&format!("warning: a path is not UTF-8 and is shown with replacement characters: {s}\n"));
            s
        }
    }
}

/// `prefix` + `path` as git's diff headers show it: quoted with C escapes (octal for
/// bytes that are not ASCII) when the name needs it; spaces alone do not.
pub(crate) fn diff_name(prefix: &str, path: &[u8]) -> String {
    let plain = format!("{prefix}{}", String::from_utf8_lossy(path));
    let needs = path.iter().any(|&b| b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b));
    if !needs {
        return plain;
    }
    quote_bytes(&[prefix.as_bytes(), path].concat())
}
