//! The `web` component: `web_fetch` and `web_search`. No filesystem; the network only
//! through `wasi:http`, which the host guards (every address checked, the connection
//! made to the checked address, a deadline and a byte cap on every request).
//!
//! The operator's `[web]` settings reach the component as its environment
//! (`CHENG_WEB_*`: the byte cap, the time limit, the search provider and its endpoint,
//! whether the host holds a key) — never a secret: a search API key is added to the
//! request by the host.
//!
//! Both tools are the least robust in the box, and say so when they fail: a network
//! error is reported as one (and the model told not to invent what it could not
//! fetch), an HTTP status is shown before the body, and a results page the parser no
//! longer recognises is reported as a parser problem, not an empty result.

pub mod http;
pub mod search;

use cheng_sdk::prelude::*;
use cheng_sdk::{ErrorKind, FsAccess};
use url::Url;

use crate::http::NetError;

/// Default and largest `max_bytes` of `web_fetch`'s text.
pub const DEFAULT_TEXT_BYTES: u64 = 100_000;
/// Largest text `web_fetch` returns.
pub const MAX_TEXT_BYTES: u64 = 1_000_000;

/// The operator's settings, from the environment the host gives the component.
pub struct Settings {
    /// Bytes read from the wire per response.
    pub max_bytes: usize,
    /// A request's time limit (the host enforces it; this is for messages).
    pub timeout_ms: u64,
    /// `duckduckgo`, `searxng` or `brave`.
    pub provider: String,
    /// The provider's endpoint.
    pub search_url: String,
    /// Whether the host holds the provider's key.
    pub key_present: bool,
    /// The variable the key is read from.
    pub key_env: String,
}

impl Settings {
    /// Read them (defaults when run outside the host).
    pub fn from_env() -> Settings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Settings {
            max_bytes: var("CHENG_WEB_MAX_BYTES").and_then(|v| v.parse().ok()).unwrap_or(5 << 20),
            timeout_ms: var("CHENG_WEB_TIMEOUT_MS").and_then(|v| v.parse().ok()).unwrap_or(20_000),
            provider: var("CHENG_WEB_SEARCH_PROVIDER").unwrap_or_else(|| "duckduckgo".into()),
            search_url: var("CHENG_WEB_SEARCH_URL").unwrap_or_else(|| "https://html.duckduckgo.com/html/".into()),
            key_present: var("CHENG_WEB_SEARCH_KEY").as_deref() == Some("set"),
            key_env: var("CHENG_WEB_SEARCH_KEY_ENV").unwrap_or_else(|| "BRAVE_API_KEY".into()),
        }
    }
}

const NEEDS: Needs = Needs { fs: FsAccess::None, spawn: false, network: &["*"] };

/// A failure for a request that did not produce a response.
pub(crate) fn net_failure(what: &str, e: NetError) -> Failure {
    match e {
        NetError::Refused(m) => Failure::new(
            ErrorKind::NotGranted,
            format!("{m}. The host does not fetch this address; do not retry it or look for another way to reach it."),
        ),
        NetError::BadUrl(m) => Failure::invalid_argument(m),
        NetError::Unreachable(m) => Failure::new(
            ErrorKind::Io,
            format!(
                "could not reach {what}: {m}. This is a network error (the request did not reach the service). \
                 Tell the user it could not be reached; do not guess or invent its content or sources."
            ),
        )
        .with_terminal(false),
        NetError::TooManyRedirects(chain) => Failure::new(
            ErrorKind::TooLarge,
            format!(
                "stopped after {} redirects: {}. Fetch the last URL directly if it is the page you want.",
                http::MAX_REDIRECTS,
                chain.join(" -> ")
            ),
        ),
    }
}

/// A URL the model sent, checked: absolute, http or https.
pub(crate) fn parse_url(text: &str) -> Result<Url, Failure> {
    let url = Url::parse(text.trim()).map_err(|e| {
        Failure::invalid_argument(format!("\"{text}\" is not an absolute URL ({e}); write it as https://host/path"))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Failure::new(
            ErrorKind::NotGranted,
            format!("refused: {}: URLs are not fetched; only http and https are", url.scheme()),
        ));
    }
    Ok(url)
}

/// A status code with its reason phrase, for the common ones.
pub(crate) fn status_line(code: u16) -> String {
    let reason = match code {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    };
    if reason.is_empty() { code.to_string() } else { format!("{code} {reason}") }
}

#[cheng_sdk::schema]
#[serde(deny_unknown_fields)]
pub struct FetchInput {
    url: String,
    /// Text cap (default 100000); head and tail kept.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000000))]
    max_bytes: Option<u64>,
}

#[cheng_sdk::schema]
#[derive(Default)]
pub struct FetchOutput {
    // True when a response arrived, whatever its status.
    success: bool,
    summary: String,
    url: String,
    /// After redirects.
    final_url: String,
    redirects: Vec<String>,
    status: u16,
    content_type: Option<String>,
    title: Option<String>,
    text: String,
    /// Cut on the wire (size or time) or to max_bytes.
    truncated: bool,
    /// Body bytes read.
    bytes: u64,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

/// What a body is, from its declared type and its first bytes.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Other(String),
}

fn kind_of(content_type: Option<&str>, body: &[u8]) -> Kind {
    let ct = content_type.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase()).unwrap_or_default();
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let looks_html = head.trim_start().starts_with("<!doctype html") || head.contains("<html");
    match ct.as_str() {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "" | "application/octet-stream" if looks_html => Kind::Html,
        "" if !body.contains(&0) => Kind::Text,
        c if c.starts_with("text/")
            || c.ends_with("+json")
            || c.ends_with("+xml")
            || matches!(
                c,
                "application/json" | "application/xml" | "application/javascript" | "application/x-ndjson"
            ) =>
        {
            Kind::Text
        }
        c => Kind::Other(if c.is_empty() { "an unknown type".into() } else { c.to_string() }),
    }
}

/// The body as text: in the encoding its `Content-Type` names, else (HTML) the one a
/// `<meta>` in its first 1024 bytes names, else its byte-order mark, else UTF-8.
fn decode_text<'a>(content_type: Option<&str>, body: &'a [u8], html: bool) -> std::borrow::Cow<'a, str> {
    let label_in = |s: &str| -> Option<String> {
        let at = s.to_ascii_lowercase().find("charset=")? + "charset=".len();
        let rest = s[at..].trim_start_matches(['"', '\'', ' ']);
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || "-_:.".contains(c))).unwrap_or(rest.len());
        Some(rest[..end].to_string())
    };
    let declared = content_type
        .and_then(label_in)
        .or_else(|| html.then(|| label_in(&String::from_utf8_lossy(&body[..body.len().min(1024)]))).flatten());
    let encoding = declared.and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes())).unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = encoding.decode(body);
    text
}

/// `web_fetch`.
pub struct WebFetch;
impl Tool for WebFetch {
    const NAME: &'static str = "web_fetch";
    const DESCRIPTION: &'static str = "Fetch an absolute http(s) URL as text: HTML as title and readable text, JSON \
        and plain text as sent, other types described. Up to 5 redirects; a 404 is a response to read, not a \
        failure. Private, loopback and metadata addresses are refused. No JavaScript runs.";
    const NEEDS: Needs = NEEDS;
    type Input = FetchInput;
    type Output = FetchOutput;

    fn run(input: FetchInput, _cx: &Context) -> Result<FetchOutput, Failure> {
        let max_text = match input.max_bytes {
            None => DEFAULT_TEXT_BYTES,
            Some(n) if (1..=MAX_TEXT_BYTES).contains(&n) => n,
            Some(n) => {
                return Err(Failure::invalid_argument(format!(
                    "max_bytes {n} is out of range: use 1 to {MAX_TEXT_BYTES}"
                )));
            }
        } as usize;
        let settings = Settings::from_env();
        let url = parse_url(&input.url)?;
        let accept = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5".to_string();
        let r = http::get(&url, &[("accept", accept)], settings.max_bytes, settings.timeout_ms)
            .map_err(|e| net_failure(url.as_str(), e))?;
        let kind = kind_of(r.content_type.as_deref(), &r.body);
        let mut title = None;
        let full = match &kind {
            Kind::Html => {
                let s = cheng_html::summarize_html(&decode_text(r.content_type.as_deref(), &r.body, true));
                title = s.title;
                s.text
            }
            Kind::Text => decode_text(r.content_type.as_deref(), &r.body, false).into_owned(),
            Kind::Other(t) => format!(
                "({t}, {} bytes: not text, so not shown. Download it with a command if it is needed.)",
                r.body.len()
            ),
        };
        let (text, text_cut) = cheng_sdk::text::head_tail(&full, max_text);
        let mut summary = format!("HTTP {} from {}", status_line(r.status), r.final_url);
        let ct = r.content_type.clone().unwrap_or_else(|| "no content type".into());
        summary.push_str(&format!(" ({ct}, {} bytes", r.wire_bytes));
        if let Some(cut) = &r.cut {
            summary.push_str(&format!(", {cut}"));
        }
        summary.push(')');
        if let Some(t) = &title {
            summary.push_str(&format!(": \"{}\"", cheng_sdk::text::cut_chars(t, 120)));
        }
        if !r.redirects.is_empty() {
            summary.push_str(&format!(
                " after {} redirect{}",
                r.redirects.len(),
                if r.redirects.len() == 1 { "" } else { "s" }
            ));
        }
        if text.trim().is_empty() && kind == Kind::Html {
            summary.push_str("; the page has no readable text (it may be built by scripts, which do not run here)");
        }
        Ok(FetchOutput {
            success: true,
            summary,
            url: input.url,
            final_url: r.final_url.to_string(),
            redirects: r.redirects,
            status: r.status,
            content_type: r.content_type,
            title,
            text,
            truncated: r.truncated || text_cut,
            bytes: r.wire_bytes,
            error_kind: None,
            terminal: false,
            error: None,
        })
    }
}

/// `web_search`.
pub struct WebSearch;
impl Tool for WebSearch {
    const NAME: &'static str = "web_search";
    const DESCRIPTION: &'static str = "Search the web with the configured provider. If the page cannot be read or \
        the network fails, say so instead of inventing sources; rewording will not help. Read results with web_fetch.";
    const NEEDS: Needs = NEEDS;
    type Input = search::SearchInput;
    type Output = search::SearchOutput;

    fn run(input: search::SearchInput, _cx: &Context) -> Result<search::SearchOutput, Failure> {
        search::run(input, &Settings::from_env())
    }
}

cheng_sdk::export_tools!(WebFetch, WebSearch);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind_of(Some("text/html; charset=utf-8"), b"x"), Kind::Html);
        assert_eq!(kind_of(None, b"<!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(kind_of(Some("application/json"), b"{}"), Kind::Text);
        assert_eq!(kind_of(Some("application/ld+json"), b"{}"), Kind::Text);
        assert_eq!(kind_of(Some("image/png"), b"\x89PNG"), Kind::Other("image/png".into()));
        assert_eq!(kind_of(None, b"\0\x01"), Kind::Other("an unknown type".into()));
    }

    #[test]
    fn encodings() {
        // "café" in Latin-1, declared in the header; in Shift_JIS, declared in a <meta>.
        assert_eq!(decode_text(Some("text/plain; charset=ISO-8859-1"), b"caf\xe9", false), "café");
        let page = b"<html><head><meta charset=\"shift_jis\"></head><body>\x93\xfa\x96\x7b</body></html>";
        assert!(decode_text(Some("text/html"), page, true).contains("日本"));
        assert_eq!(decode_text(None, "plain ü".as_bytes(), false), "plain ü");
        assert_eq!(decode_text(Some("text/plain; charset=bogus"), "ü".as_bytes(), false), "ü");
    }

    #[test]
    fn urls() {
        assert!(parse_url("https://example.com/a?b").is_ok());
        assert!(parse_url("example.com").is_err());
        let f = parse_url("file:///etc/passwd").unwrap_err();
        assert!(f.message.contains("only http and https"), "{}", f.message);
        assert_eq!(status_line(404), "404 Not Found");
        assert_eq!(status_line(299), "299");
    }
}
