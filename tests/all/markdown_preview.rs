//! workspace_markdown and workspace_preview on real documents: this repository's README,
//! a fixture with every diagnostic, GitHub anchors for tricky headings, fixes applied
//! with edit_file, local link checks, an XSS corpus through the sanitizer (each output
//! parsed as HTML and checked against allow-lists), HTML with scripts, styles and
//! entities, binary and huge inputs, and file metadata.

use std::path::Path;

use cheng_host::policy::Config;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::util;

async fn host() -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str("", "test.toml").unwrap());
    b.state_dir(util::shared_state());
    b.build().await.unwrap()
}

async fn md(h: &Host, ws: &Path, op: &str, path: &str) -> Value {
    // Given: one workspace here is this repository, which holds the tests' state directory.
    let r = h.call(&Context::new(ws).given(true), "workspace_markdown", json!({"operation": op, "path": path})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    r.output
}

async fn preview(h: &Host, ws: &Path, input: Value) -> Value {
    let r = h.call(&Context::new(ws), "workspace_preview", input).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    r.output
}

/// ATX headings of a Markdown text outside fenced code, by a plain line scan.
fn atx_headings(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            let f: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
            match &fence {
                None => fence = Some(f),
                Some(open)
                    if t.trim() == open.as_str()
                        || (t.chars().all(|c| c == open.chars().next().unwrap()) && f.len() >= open.len()) =>
                {
                    fence = None
                }
                _ => {}
            }
            continue;
        }
        if fence.is_some() {
            continue;
        }
        let hashes = l.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && l[hashes..].starts_with(' ') {
            out.push((i + 1, hashes, l[hashes..].trim().to_string()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn outline_and_links_of_this_readme() {
    let h = host().await;
    let repo = util::repo();
    let o = md(&h, &repo, "outline", "README.md").await;
    let outline = o["outline"].as_array().unwrap();
    let text = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let expected = atx_headings(&text);
    assert_eq!(outline.len(), expected.len(), "{o}");
    for (h, (line, level, _)) in outline.iter().zip(&expected) {
        assert_eq!(
            (h["line"].as_u64().unwrap() as usize, h["level"].as_u64().unwrap() as usize),
            (*line, *level),
            "{h}"
        );
    }
    let quick = outline.iter().find(|h| h["text"] == "Quickstart").unwrap();
    assert_eq!(quick["anchor"], "quickstart");
    let cfg = outline.iter().find(|h| h["text"].as_str().unwrap().starts_with("Configuration")).unwrap();
    assert_eq!(cfg["anchor"], "configuration-chengtoml");
    // Every relative link in the README resolves.
    let l = md(&h, &repo, "link_check_local", "README.md").await;
    assert_eq!(l["diagnostics"], json!([]), "{l}");
    assert!(
        l["links"].as_array().unwrap().iter().any(|x| x["target"] == "docs/tools/read_file.md" && x["ok"] == true),
        "{l}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anchors_match_github() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    let cases = [
        ("Hello, World!", "hello-world"),
        ("C++ & Rust", "c--rust"),
        ("What's new?", "whats-new"),
        ("🚀 Launch", "-launch"),
        ("Émigré café", "émigré-café"),
        ("日本語の見出し", "日本語の見出し"),
        ("Привет мир", "привет-мир"),
        ("foo_bar-baz", "foo_bar-baz"),
        ("`code` span", "code-span"),
        ("[link](http://example.com) text", "link-text"),
        ("Numbers 1.2.3", "numbers-123"),
        ("Intro", "intro"),
        ("Intro", "intro-1"),
        ("Intro", "intro-2"),
        ("Intro-1", "intro-1-1"),
    ];
    let mut text = String::new();
    for (h, _) in &cases {
        text.push_str(&format!("## {h}\n\n"));
    }
    text.push_str("Setext title\n============\n\n```\n# not a heading\n```\n");
    std::fs::write(ws.path().join("a.md"), &text).unwrap();
    let o = md(&h, ws.path(), "outline", "a.md").await;
    let outline = o["outline"].as_array().unwrap();
    for (i, (heading, anchor)) in cases.iter().enumerate() {
        assert_eq!(outline[i]["anchor"], *anchor, "{heading}");
        assert_eq!(outline[i]["line"], 2 * i + 1);
    }
    let last = outline.last().unwrap();
    assert_eq!(
        (last["text"].as_str(), last["level"].as_u64(), last["anchor"].as_str()),
        (Some("Setext title"), Some(1), Some("setext-title"))
    );
    assert_eq!(outline.len(), cases.len() + 1, "a heading inside code is not a heading");
}

const EVERY_DIAGNOSTIC: &str = "# Title\n\
\n\
Some text with trailing spaces   \n\
\n\
\n\
\n\
## Section\n\
\n\
#### Too deep\n\
\n\
## Section\n\
\n\
[empty]() and [missing](nope.md) and [bad anchor](#no-such) and [ok](#title)\n\
\n\
![](picture.png)\n\
\n\
#Not a heading\n\
\n\
# Second title\n\
\n\
```rust\n\
let trailing = 1;   \n\
";

#[tokio::test(flavor = "multi_thread")]
async fn diagnostics_cover_every_code() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("doc.md"), EVERY_DIAGNOSTIC).unwrap();
    std::fs::write(ws.path().join("picture.png"), b"\x89PNG").unwrap();
    let o = md(&h, ws.path(), "diagnostics", "doc.md").await;
    let d = o["diagnostics"].as_array().unwrap();
    let at = |code: &str| -> Vec<u64> {
        d.iter().filter(|x| x["code"] == code).map(|x| x["line"].as_u64().unwrap()).collect()
    };
    assert_eq!(at("trailing-whitespace"), vec![3], "{o}");
    assert_eq!(at("multiple-blank-lines"), vec![5], "{o}");
    assert_eq!(at("heading-hierarchy-jump"), vec![9], "{o}");
    assert_eq!(at("duplicate-heading"), vec![11], "{o}");
    assert_eq!(at("empty-link-target"), vec![13], "{o}");
    assert_eq!(at("broken-local-link"), vec![13], "{o}");
    assert_eq!(at("broken-anchor"), vec![13], "{o}");
    assert_eq!(at("missing-alt-text"), vec![15], "{o}");
    assert_eq!(at("missing-space-atx-heading"), vec![17], "{o}");
    assert_eq!(at("multiple-top-level-headings"), vec![19], "{o}");
    assert_eq!(at("unclosed-code-fence"), vec![21], "{o}");
    // Trailing whitespace inside the code block is code, not a finding.
    let tw = d.iter().find(|x| x["code"] == "trailing-whitespace").unwrap();
    assert_eq!(tw["column"], 31);
    // A clean file has none.
    std::fs::write(ws.path().join("clean.md"), "# Title\n\nText with a [link](#title).\n\n## Part\n\nMore.\n").unwrap();
    let o = md(&h, ws.path(), "diagnostics", "clean.md").await;
    assert_eq!(o["diagnostics"], json!([]), "{o}");
}

#[tokio::test(flavor = "multi_thread")]
async fn suggestions_apply_with_edit_file_and_leave_nothing_to_fix() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    // Repeated lines make the replacements need context to be unique.
    let text = "# Doc\n\nsame line  \t\nsame line\n\n\n\nsame line  \t\n#Heading\n\nend   \n\n```\ncode\n";
    std::fs::write(ws.path().join("f.md"), text).unwrap();
    let o = md(&h, ws.path(), "format_suggestions", "f.md").await;
    // The tool itself wrote nothing.
    assert_eq!(std::fs::read_to_string(ws.path().join("f.md")).unwrap(), text);
    let edits = o["suggested_edits"].as_array().unwrap().clone();
    assert!(edits.len() >= 3, "{o}");
    let codes: Vec<&str> =
        edits.iter().flat_map(|e| e["codes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap())).collect();
    for c in ["trailing-whitespace", "missing-space-atx-heading", "multiple-blank-lines", "unclosed-code-fence"] {
        assert!(codes.contains(&c), "{c} missing: {codes:?}");
    }
    for e in &edits {
        let r = h
            .call(
                &Context::new(ws.path()),
                "edit_file",
                json!({"path": e["path"], "old_text": e["old_text"], "new_text": e["new_text"]}),
            )
            .await;
        assert_eq!(r.status, Status::Ok, "edit {e} failed: {}", r.output);
    }
    let o = md(&h, ws.path(), "format_suggestions", "f.md").await;
    assert_eq!(o["suggested_edits"], json!([]), "{o}");
    let d = md(&h, ws.path(), "diagnostics", "f.md").await;
    for fixed in ["trailing-whitespace", "missing-space-atx-heading", "multiple-blank-lines", "unclosed-code-fence"] {
        assert!(!d["diagnostics"].as_array().unwrap().iter().any(|x| x["code"] == fixed), "{fixed} remains: {d}");
    }
    let after = std::fs::read_to_string(ws.path().join("f.md")).unwrap();
    assert!(after.contains("# Heading\n") && after.ends_with("code\n```\n"), "{after:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn local_links_are_checked_external_ones_listed() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("docs/sub")).unwrap();
    std::fs::write(ws.path().join("docs/other.md"), "# Other\n\n## Part Two\n").unwrap();
    std::fs::write(ws.path().join("docs/my file.md"), "x\n").unwrap();
    std::fs::write(
        ws.path().join("docs/index.md"),
        "# Index\n\n\
         [a](other.md) [b](other.md#part-two) [c](other.md#part-three) [d](missing.md)\n\
         [e](sub/) [f](../docs/other.md) [g](../../etc/passwd) [h](#index) [i](#nope)\n\
         [j](https://example.com/x) [k](mailto:a@b.c) [l](my%20file.md) [m](/docs/other.md)\n",
    )
    .unwrap();
    let o = md(&h, ws.path(), "link_check_local", "docs/index.md").await;
    let links = o["links"].as_array().unwrap();
    let ok = |t: &str| links.iter().find(|l| l["target"] == t).unwrap_or_else(|| panic!("{t}: {o}"))["ok"].clone();
    for t in ["other.md", "other.md#part-two", "sub/", "../docs/other.md", "#index", "my%20file.md", "/docs/other.md"] {
        assert_eq!(ok(t), json!(true), "{t}");
    }
    for t in ["other.md#part-three", "missing.md", "../../etc/passwd", "#nope"] {
        assert_eq!(ok(t), json!(false), "{t}");
    }
    assert_eq!(ok("https://example.com/x"), Value::Null);
    assert_eq!(ok("mailto:a@b.c"), Value::Null);
    let codes: Vec<&str> = o["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert_eq!(codes.iter().filter(|c| **c == "broken-anchor").count(), 2, "{codes:?}");
    assert!(codes.contains(&"broken-local-link") && codes.contains(&"link-outside-workspace"), "{codes:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn markdown_refusals() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("bin.md"), b"\x00\x01\x02").unwrap();
    let r =
        h.call(&Context::new(ws.path()), "workspace_markdown", json!({"operation": "outline", "path": "bin.md"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::BinaryFile), "{}", r.output);
    let r = h
        .call(&Context::new(ws.path()), "workspace_markdown", json!({"operation": "outline", "path": "../x.md"}))
        .await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused));
    let r = h
        .call(&Context::new(ws.path()), "workspace_markdown", json!({"operation": "outline", "path": "none.md"}))
        .await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound));
    let r =
        h.call(&Context::new(ws.path()), "workspace_markdown", json!({"operation": "lint", "path": "none.md"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
}

/// Elements the sanitized HTML may hold, and their attributes.
fn allowed(el: &str, attr: &str) -> bool {
    const ELEMENTS: &[&str] = &[
        "a",
        "abbr",
        "acronym",
        "area",
        "article",
        "aside",
        "b",
        "bdi",
        "bdo",
        "blockquote",
        "br",
        "caption",
        "center",
        "cite",
        "code",
        "col",
        "colgroup",
        "data",
        "dd",
        "del",
        "details",
        "dfn",
        "div",
        "dl",
        "dt",
        "em",
        "figcaption",
        "figure",
        "footer",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "i",
        "img",
        "input",
        "ins",
        "kbd",
        "li",
        "map",
        "mark",
        "nav",
        "ol",
        "p",
        "pre",
        "q",
        "rp",
        "rt",
        "rtc",
        "ruby",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "time",
        "tr",
        "tt",
        "u",
        "ul",
        "var",
        "wbr",
        "html",
        "head",
        "body",
    ];
    const GENERIC: &[&str] = &["lang", "title", "id"];
    const PER: &[(&str, &[&str])] = &[
        ("a", &["href", "hreflang", "rel"]),
        ("img", &["src", "alt", "width", "height", "align"]),
        ("input", &["type", "checked", "disabled"]),
        ("sup", &["class"]),
        ("div", &["class"]),
        ("th", &["align", "colspan", "rowspan", "scope"]),
        ("td", &["align", "colspan", "rowspan"]),
        ("ol", &["start"]),
        ("li", &["value"]),
        ("code", &[]),
        ("span", &[]),
    ];
    if !ELEMENTS.contains(&el) {
        return false;
    }
    if attr.is_empty() {
        return true;
    }
    GENERIC.contains(&attr)
        || PER.iter().any(|(e, a)| *e == el && a.contains(&attr))
        || ["cite", "datetime", "span", "open", "abbr", "dir"].contains(&attr)
}

fn safe_url(u: &str) -> bool {
    let t = u.trim().to_ascii_lowercase();
    match t.split_once(':') {
        Some((scheme, _)) if !scheme.contains('/') && !scheme.contains('?') && !scheme.contains('#') => {
            ["http", "https", "mailto"].contains(&scheme)
        }
        _ => true, // relative or fragment
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn xss_corpus_is_sanitized() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    let corpus = [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "<IMG SRC=\"javascript:alert('XSS');\">",
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        "[click](  javascript:alert(1))",
        "<a href=\"jav&#x09;ascript:alert(1)\">x</a>",
        "<a href=\"&#106;avascript:alert(1)\">x</a>",
        "![x](javascript:alert(1))",
        "<javascript:alert(1)>",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "<svg onload=alert(1)><script>alert(1)</script></svg>",
        "<iframe src=\"https://evil.example\"></iframe>",
        "<style>body{background:url(javascript:alert(1))}</style>",
        "<div style=\"background:url(javascript:alert(1))\">x</div>",
        "<a href=\"https://ok.example\" onclick=\"alert(1)\" ONMOUSEOVER=\"alert(2)\">ok</a>",
        "<form action=\"javascript:alert(1)\"><button>go</button></form>",
        "<object data=\"javascript:alert(1)\"></object><embed src=\"x.swf\">",
        "<base href=\"javascript:alert(1)//\"><meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(1)\">",
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
        "<details open ontoggle=alert(1)>",
        "<input type=\"text\" onfocus=\"alert(1)\" autofocus>",
        "<p>nested <b onmouseover=alert(1)>bold</b></p>",
        "<!--<img src=x onerror=alert(1)>-->",
        "<a href=\"vbscript:msgbox(1)\">v</a>",
        "[ref]\n\n[ref]: javascript:alert(1)",
    ];
    for src in corpus {
        let o = preview(&h, ws.path(), json!({"operation": "markdown", "content": src})).await;
        let html = o["preview"].as_str().unwrap();
        let doc = scraper::Html::parse_fragment(html);
        for node in doc.tree.root().descendants() {
            if let Some(el) = node.value().as_element() {
                assert!(allowed(el.name(), ""), "{src:?} → <{}> in {html:?}", el.name());
                for (attr, value) in el.attrs() {
                    assert!(allowed(el.name(), attr), "{src:?} → {}[{attr}] in {html:?}", el.name());
                    assert!(!attr.starts_with("on"), "{src:?} → handler {attr} in {html:?}");
                    if ["href", "src", "action", "data", "formaction", "xlink:href"].contains(&attr) {
                        assert!(safe_url(value), "{src:?} → {attr}={value:?} in {html:?}");
                    }
                    if attr == "type" {
                        assert_eq!(value, "checkbox", "{src:?}");
                    }
                }
            }
        }
    }
    // Positive control: the same checker rejects the raw payload.
    let raw = scraper::Html::parse_fragment("<img src=x onerror=alert(1)><a href=\"javascript:x\">y</a>");
    let bad = raw
        .tree
        .root()
        .descendants()
        .filter_map(|n| n.value().as_element().cloned())
        .any(|e| e.attrs().any(|(a, v)| a.starts_with("on") || (a == "href" && !safe_url(v))));
    assert!(bad);
}

#[tokio::test(flavor = "multi_thread")]
async fn markdown_features_render() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    let src = "# T\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo\n\nNote[^1].\n\n[^1]: The footnote.\n\n~~gone~~\n";
    std::fs::write(ws.path().join("f.md"), src).unwrap();
    // path wins over content.
    let o = preview(&h, ws.path(), json!({"operation": "markdown", "path": "f.md", "content": "# ignored"})).await;
    let html = o["preview"].as_str().unwrap();
    assert_eq!(o["source_path"], "f.md");
    assert_eq!(o["source_bytes"], src.len());
    assert_eq!(o["format"], "html");
    for needle in [
        "<table>",
        "<td>1</td>",
        "type=\"checkbox\"",
        "checked",
        "footnote",
        "The footnote.",
        "<del>gone</del>",
        "<h1>T</h1>",
    ] {
        assert!(html.contains(needle), "{needle} missing in {html}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn html_to_text() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    let page = "<!DOCTYPE html><html><head><title>Rock &amp; Roll</title><style>p{color:red}</style>\
                <script>var secret = 'SCRIPT-TEXT';</script></head><body>\
                <h1>Main &lt;heading&gt;</h1><p>First &eacute;t&eacute; paragraph.</p>\
                <h2>Second</h2><p>See <a href=\"https://example.com/a?x=1&amp;y=2\">the docs</a>.</p>\
                <noscript>NOSCRIPT-TEXT</noscript><template>TEMPLATE-TEXT</template>\
                <script type=\"module\">SCRIPT2</script></body></html>";
    std::fs::write(ws.path().join("p.html"), page).unwrap();
    let o = preview(&h, ws.path(), json!({"operation": "html", "path": "p.html"})).await;
    let text = o["preview"].as_str().unwrap();
    assert_eq!(o["format"], "text");
    assert!(text.starts_with("Title: Rock & Roll\n"), "{text}");
    assert!(text.contains("# Main <heading>") && text.contains("## Second"), "{text}");
    assert!(text.contains("- the docs <https://example.com/a?x=1&y=2>"), "{text}");
    assert!(text.contains("First été paragraph."), "{text}");
    for hidden in ["SCRIPT-TEXT", "SCRIPT2", "color:red", "NOSCRIPT-TEXT", "TEMPLATE-TEXT"] {
        assert!(!text.contains(hidden), "{hidden} leaked: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn caps_binary_and_huge_inputs() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    let big: String = (0..60_000).map(|i| format!("Line {i} of a long document.\n\n")).collect();
    std::fs::write(ws.path().join("big.md"), &big).unwrap();
    let o = preview(&h, ws.path(), json!({"operation": "markdown", "path": "big.md"})).await;
    assert_eq!(o["preview_truncated"], true);
    let p = o["preview"].as_str().unwrap();
    assert!(p.len() <= 524_288 + 200, "{}", p.len());
    assert!(
        p.starts_with("<p>Line 0 of") && p.trim_end().ends_with("Line 59999 of a long document.</p>"),
        "{}",
        &p[p.len() - 100..]
    );
    let o = preview(&h, ws.path(), json!({"operation": "markdown", "path": "big.md", "max_bytes": 1000})).await;
    assert!(o["preview"].as_str().unwrap().len() <= 1100 && o["preview_truncated"] == true);
    let r = h
        .call(
            &Context::new(ws.path()),
            "workspace_preview",
            json!({"operation": "markdown", "path": "big.md", "max_bytes": 600000}),
        )
        .await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument), "{}", r.output);
    std::fs::write(ws.path().join("bin.md"), b"\x89PNG\r\n\x1a\n\x00\x00").unwrap();
    let r =
        h.call(&Context::new(ws.path()), "workspace_preview", json!({"operation": "markdown", "path": "bin.md"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::BinaryFile), "{}", r.output);
    let r = h.call(&Context::new(ws.path()), "workspace_preview", json!({"operation": "html"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
}

fn png(w: u32, h: u32) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    v.extend(w.to_be_bytes());
    v.extend(h.to_be_bytes());
    v.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
    v
}

fn gif(w: u16, h: u16) -> Vec<u8> {
    let mut v = b"GIF89a".to_vec();
    v.extend(w.to_le_bytes());
    v.extend(h.to_le_bytes());
    v.extend([0, 0, 0, 0x3B]);
    v
}

fn jpeg(w: u16, h: u16) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
    v.extend(b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00");
    v.extend([0xFF, 0xC0, 0x00, 0x11, 0x08]);
    v.extend(h.to_be_bytes());
    v.extend(w.to_be_bytes());
    v.extend([3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1, 0xFF, 0xD9]);
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn artifact_summaries() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    let pdf = b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 3 >> endobj\n\
3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n4 0 obj << /Type/Page /Parent 2 0 R >> endobj\n5 0 obj << /Type /Page /Parent 2 0 R >> endobj\n%%EOF\n";
    /// (name, bytes, media type, dimensions).
    type File<'a> = (&'a str, Vec<u8>, &'a str, Option<(u64, u64)>);
    let files: Vec<File> = vec![
        ("a.png", png(640, 480), "image/png", Some((640, 480))),
        ("b.gif", gif(32, 16), "image/gif", Some((32, 16))),
        ("c.jpg", jpeg(300, 200), "image/jpeg", Some((300, 200))),
        (
            "d.svg",
            b"<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 120 60\"></svg>\n"
                .to_vec(),
            "image/svg+xml",
            Some((120, 60)),
        ),
        ("e.pdf", pdf.to_vec(), "application/pdf", None),
        ("f.txt", b"one\ntwo\nthree".to_vec(), "text/plain", None),
    ];
    for (name, bytes, kind, dims) in &files {
        std::fs::write(ws.path().join(name), bytes).unwrap();
        let o = preview(&h, ws.path(), json!({"operation": "artifact_summary", "path": name})).await;
        let m = &o["metadata"];
        assert_eq!(o["format"], "metadata");
        assert_eq!(m["kind"], *kind, "{name}: {o}");
        assert_eq!(m["size"], bytes.len(), "{name}");
        assert_eq!(o["source_bytes"], bytes.len(), "{name}");
        let digest: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(m["sha256"], digest, "{name}");
        if let Some((w, hh)) = dims {
            assert_eq!(
                (m["width"].as_f64().unwrap() as u64, m["height"].as_f64().unwrap() as u64),
                (*w, *hh),
                "{name}: {m}"
            );
        }
        assert!(serde_json::from_str::<Value>(o["preview"].as_str().unwrap()).is_ok());
    }
    let o = preview(&h, ws.path(), json!({"operation": "artifact_summary", "path": "e.pdf"})).await;
    assert_eq!(o["metadata"]["page_count"], 3, "{o}");
    let o = preview(&h, ws.path(), json!({"operation": "artifact_summary", "path": "f.txt"})).await;
    assert_eq!(o["metadata"]["line_count"], 3);
    // A large file is streamed: size, hash and lines without loading it whole.
    let big = vec![b'x'; 40 << 20];
    std::fs::write(ws.path().join("big.bin"), &big).unwrap();
    let o = preview(&h, ws.path(), json!({"operation": "artifact_summary", "path": "big.bin"})).await;
    assert_eq!(o["metadata"]["size"], 40 << 20);
    let digest: String = Sha256::digest(&big).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(o["metadata"]["sha256"], digest);
    // Inline content.
    let o = preview(&h, ws.path(), json!({"operation": "artifact_summary", "content": "a\nb\n"})).await;
    assert_eq!((o["metadata"]["line_count"].as_u64(), o["source_path"].is_null()), (Some(2), true));
}
