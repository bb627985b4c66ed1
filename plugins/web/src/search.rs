//! `web_search`'s providers: a search engine's HTML results page (DuckDuckGo's HTML
//! endpoint by default) read with a real HTML parser, a SearXNG instance's JSON API,
//! and the Brave Search API (its key added by the host). Each turns an answer into
//! results, or into a plain statement of why there are none.

use cheng_html::scraper::{Html, Selector};
use cheng_html::squash;
use cheng_sdk::{ErrorKind, Failure};
use url::Url;

use crate::Settings;
use crate::http::{self, Response};

/// Default number of results.
pub const DEFAULT_RESULTS: u64 = 8;
/// Most results returned.
pub const MAX_RESULTS: u64 = 20;

/// What the parser says when a results page is not what it knows: a parser problem,
/// not a query problem.
pub const UNREADABLE: &str = "the results page could not be read; rewording the query will not help";

#[cheng_sdk::schema]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    #[schemars(length(min = 1, max = 500))]
    query: String,
    /// Default 8.
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    max_results: Option<u64>,
}

/// One result.
#[cheng_sdk::schema]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    /// The result's title.
    pub title: String,
    /// Where it points.
    pub url: String,
    /// The provider's snippet of the page.
    pub snippet: String,
}

#[cheng_sdk::schema]
#[derive(Default)]
pub struct SearchOutput {
    // True when the provider answered and its answer was read (even with no results).
    success: bool,
    summary: String,
    query: String,
    // duckduckgo, searxng or brave.
    provider: String,
    results: Vec<SearchResult>,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

/// Run a search with the configured provider.
pub fn run(input: SearchInput, settings: &Settings) -> Result<SearchOutput, Failure> {
    let query = input.query.trim().to_string();
    if query.is_empty() {
        return Err(Failure::invalid_argument("query is empty: say what to search for"));
    }
    if query.chars().count() > 500 {
        return Err(Failure::invalid_argument("query is longer than 500 characters: shorten it"));
    }
    let max = match input.max_results {
        None => DEFAULT_RESULTS,
        Some(n) if (1..=MAX_RESULTS).contains(&n) => n,
        Some(n) => {
            return Err(Failure::invalid_argument(format!("max_results {n} is out of range: use 1 to {MAX_RESULTS}")));
        }
    } as usize;
    let provider = settings.provider.as_str();
    let mut endpoint = Url::parse(&settings.search_url)
        .map_err(|e| Failure::new(ErrorKind::Io, format!("the configured search URL is invalid: {e}")))?;
    let accept_json = ("accept", "application/json".to_string());
    let (headers, parse): (Vec<(&str, String)>, Parser) = match provider {
        "searxng" => {
            if !endpoint.path().ends_with("/search") {
                let path = format!("{}/search", endpoint.path().trim_end_matches('/'));
                endpoint.set_path(&path);
            }
            endpoint.query_pairs_mut().append_pair("q", &query).append_pair("format", "json");
            (vec![accept_json], parse_searxng)
        }
        "brave" => {
            if !settings.key_present {
                return Err(Failure::new(
                    ErrorKind::NotGranted,
                    format!(
                        "web_search is set to use the Brave Search API, but the host has no key for it: the \
                         operator must set the environment variable {} where cheng runs. Tell the user; do not \
                         invent results.",
                        settings.key_env
                    ),
                ));
            }
            endpoint.query_pairs_mut().append_pair("q", &query).append_pair("count", &max.to_string());
            (vec![accept_json], parse_brave)
        }
        _ => {
            endpoint.query_pairs_mut().append_pair("q", &query);
            (vec![("accept", "text/html".to_string())], parse_html_page)
        }
    };
    let response = http::get(&endpoint, &headers, settings.max_bytes, settings.timeout_ms)
        .map_err(|e| crate::net_failure(&format!("the search provider ({provider})"), e))?;
    if !(200..300).contains(&response.status) {
        return Err(Failure::new(
            ErrorKind::Io,
            format!(
                "the search provider ({provider}) answered HTTP {}: the request reached it and was refused or \
                 failed{}. Tell the user the search did not work; do not invent results.",
                crate::status_line(response.status),
                if matches!(response.status, 403 | 429) { " (it may be limiting automated searches)" } else { "" }
            ),
        )
        .with_terminal(true));
    }
    let mut results = match parse(&response) {
        Parsed::Results(r) => r,
        Parsed::NoResults => Vec::new(),
        Parsed::Unreadable(why) => {
            return Err(Failure::new(ErrorKind::Io, format!("{UNREADABLE} ({provider}: {why})")).with_terminal(true));
        }
    };
    results.truncate(max);
    let summary = match results.len() {
        0 => format!("no results for \"{query}\" from {provider}"),
        1 => format!("1 result for \"{query}\" from {provider}"),
        n => format!("{n} results for \"{query}\" from {provider}"),
    };
    Ok(SearchOutput {
        success: true,
        summary,
        query,
        provider: provider.to_string(),
        results,
        error_kind: None,
        terminal: false,
        error: None,
    })
}

/// Reads a provider's answer.
type Parser = fn(&Response) -> Parsed;

/// A provider's answer, read.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Results.
    Results(Vec<SearchResult>),
    /// The provider says there are none.
    NoResults,
    /// The answer is not in a shape the parser knows.
    Unreadable(String),
}

fn text_of_fragment(html: &str) -> String {
    squash(&Html::parse_fragment(html).root_element().text().collect::<String>())
}

/// The target of a result link: the engine's redirect (`/l/?uddg=…`) undone, relative
/// links resolved against the page.
fn result_url(href: &str, base: &Url) -> Option<String> {
    let u = base.join(href).ok()?;
    let target = match u.query_pairs().find(|(k, _)| k == "uddg") {
        Some((_, t)) => Url::parse(&t).ok()?,
        None => u,
    };
    matches!(target.scheme(), "http" | "https").then(|| target.to_string())
}

/// A search engine's HTML results page: blocks of class `result` with a `result__a`
/// title link and a `result__snippet`; ads (`result--ad`) skipped. A page with a
/// `no-results` block has none; a page with neither is unreadable.
pub fn parse_html(page: &str, base: &Url) -> Parsed {
    let sel = |s: &str| Selector::parse(s).expect("a valid selector");
    let doc = Html::parse_document(page);
    let (block, link, snippet) = (sel(".result"), sel("a.result__a"), sel(".result__snippet"));
    let mut out = Vec::new();
    let mut blocks = 0;
    for b in doc.select(&block) {
        if b.value().classes().any(|c| c == "result--ad") {
            continue;
        }
        blocks += 1;
        let Some(a) = b.select(&link).next() else { continue };
        let Some(url) = a.value().attr("href").and_then(|h| result_url(h, base)) else { continue };
        let title = squash(&a.text().collect::<String>());
        let snippet = b.select(&snippet).next().map(|s| squash(&s.text().collect::<String>())).unwrap_or_default();
        if !title.is_empty() {
            out.push(SearchResult { title, url, snippet });
        }
    }
    if !out.is_empty() {
        return Parsed::Results(out);
    }
    if doc.select(&sel(".no-results")).next().is_some() {
        return Parsed::NoResults;
    }
    Parsed::Unreadable(if blocks > 0 {
        format!("{blocks} result blocks, none with a title link")
    } else {
        "no result blocks".to_string()
    })
}

fn parse_html_page(r: &Response) -> Parsed {
    parse_html(&String::from_utf8_lossy(&r.body), &r.final_url)
}

fn json_of(r: &Response) -> Result<serde_json::Value, Parsed> {
    serde_json::from_slice(&r.body).map_err(|e| Parsed::Unreadable(format!("the answer is not JSON: {e}")))
}

/// SearXNG's JSON: `results[]` of `title`, `url`, `content`.
pub fn parse_searxng(r: &Response) -> Parsed {
    let v = match json_of(r) {
        Ok(v) => v,
        Err(p) => return p,
    };
    let Some(list) = v.get("results").and_then(|r| r.as_array()) else {
        return Parsed::Unreadable("the answer has no results list".into());
    };
    collect(list, "content")
}

/// Brave's JSON: `web.results[]` of `title`, `url`, `description` (with markup).
pub fn parse_brave(r: &Response) -> Parsed {
    let v = match json_of(r) {
        Ok(v) => v,
        Err(p) => return p,
    };
    match v.pointer("/web/results").and_then(|r| r.as_array()) {
        Some(list) => collect(list, "description"),
        // Brave leaves `web` out when nothing matched.
        None if v.get("type").is_some() => Parsed::NoResults,
        None => Parsed::Unreadable("the answer has no web results".into()),
    }
}

fn collect(list: &[serde_json::Value], snippet_key: &str) -> Parsed {
    let field = |item: &serde_json::Value, k: &str| item.get(k).and_then(|v| v.as_str()).map(text_of_fragment);
    let out: Vec<SearchResult> = list
        .iter()
        .filter_map(|item| {
            Some(SearchResult {
                title: field(item, "title")?,
                url: item.get("url")?.as_str()?.to_string(),
                snippet: field(item, snippet_key).unwrap_or_default(),
            })
        })
        .collect();
    match (out.is_empty(), list.is_empty()) {
        (false, _) => Parsed::Results(out),
        (true, true) => Parsed::NoResults,
        (true, false) => Parsed::Unreadable("results without titles or URLs".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://html.duckduckgo.com/html/?q=x").unwrap()
    }

    #[test]
    fn results_pages() {
        let page = r#"<html><body>
            <div class="result result--ad"><a class="result__a" href="https://ads.example/">Ad</a></div>
            <div class="result"><h2><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F&amp;rut=1">Rust <b>Programming</b> Language</a></h2>
              <a class="result__snippet">A language empowering everyone.</a></div>
            <div class="result"><a class="result__a" href="https://doc.rust-lang.org/book/">The Book</a></div>
            </body></html>"#;
        let Parsed::Results(r) = parse_html(page, &base()) else { panic!() };
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].url, "https://www.rust-lang.org/");
        assert_eq!(r[0].title, "Rust Programming Language");
        assert_eq!(r[0].snippet, "A language empowering everyone.");
        assert_eq!(r[1].snippet, "");
        assert_eq!(parse_html("<div class='no-results'>No results.</div>", &base()), Parsed::NoResults);
        assert!(matches!(parse_html("<div class='serp'><a>new markup</a></div>", &base()), Parsed::Unreadable(_)));
    }
}
