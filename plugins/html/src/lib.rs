//! HTML reduced to what a reader sees: the title, headings, links and the visible text
//! with a line per block, read with html5ever's tokenizer (the HTML standard's
//! tokenization, so entities, raw-text elements and broken markup are read as a
//! browser reads them) in one pass, without building a tree. Scripts, styles, templates, SVG and frames are
//! dropped; entities are decoded. Shared by `workspace_preview`'s `html` operation and
//! `web_fetch`, so both read a page the same way.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts};

/// What an HTML page says.
#[derive(Default)]
pub struct HtmlSummary {
    /// The first non-empty `<title>`.
    pub title: Option<String>,
    /// Headings in order, with their level (1–6).
    pub headings: Vec<(u8, String)>,
    /// Links in order: their text and `href`.
    pub links: Vec<(String, String)>,
    /// The visible text, one line per block element.
    pub text: String,
}

impl HtmlSummary {
    /// The summary as text: title, headings, links, then the body text.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Some(t) = &self.title {
            s.push_str(&format!("Title: {t}\n\n"));
        }
        if !self.headings.is_empty() {
            s.push_str("Headings:\n");
            for (l, h) in &self.headings {
                s.push_str(&format!("{} {h}\n", "#".repeat(*l as usize)));
            }
            s.push('\n');
        }
        if !self.links.is_empty() {
            s.push_str("Links:\n");
            for (text, href) in &self.links {
                s.push_str(&format!("- {text} <{href}>\n"));
            }
            s.push('\n');
        }
        s.push_str("Text:\n");
        s.push_str(&self.text);
        s
    }
}

/// Whitespace runs collapsed to one space, trimmed: text as a browser lays it out.
pub fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Elements whose content is not shown.
const SKIP: &[&str] =
    &["script", "style", "noscript", "template", "head", "svg", "iframe", "object", "noembed", "noframes"];
/// Elements that start and end a line.
const BLOCK: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "blockquote",
    "pre",
    "hr",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "form",
    "aside",
    "body",
    "td",
    "th",
];

/// Text-level elements: their boundaries are not word boundaries.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "i", "kbd", "mark", "q", "s", "samp", "small",
    "span", "strong", "sub", "sup", "time", "u", "var", "wbr", "font", "del", "ins",
];

/// The reader: html5ever's tokenizer (the HTML standard's tokenization: entities,
/// raw-text elements, broken markup) feeding one pass that keeps what a reader sees.
/// No tree is built, which makes it several times faster than parsing into a DOM.
#[derive(Default)]
struct Reader {
    out: RefCell<Out>,
}

#[derive(Default)]
struct Out {
    summary: HtmlSummary,
    /// Open elements whose content is hidden.
    hidden: u32,
    /// Inside `<title>`, collecting.
    title: Option<String>,
    /// An open heading: its level and text.
    heading: Option<(u8, String)>,
    /// An open link: its href and text.
    link: Option<(String, String)>,
    /// The visible line being collected.
    line: String,
}

impl Out {
    fn flush(&mut self) {
        let l = squash(&self.line);
        if !l.is_empty() {
            self.summary.text.push_str(&l);
            self.summary.text.push('\n');
        }
        self.line.clear();
    }
}

impl TokenSink for Reader {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut o = self.out.borrow_mut();
        match token {
            Token::CharacterTokens(t) => {
                if let Some(title) = o.title.as_mut() {
                    title.push_str(&t);
                } else if o.hidden == 0 {
                    o.line.push_str(&t);
                    if let Some((_, h)) = o.heading.as_mut() {
                        h.push_str(&t);
                    }
                    if let Some((_, a)) = o.link.as_mut() {
                        a.push_str(&t);
                    }
                }
            }
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                let start = tag.kind == TagKind::StartTag;
                if o.hidden == 0 {
                    if BLOCK.contains(&name) {
                        o.flush();
                    } else if !INLINE.contains(&name) {
                        // Other elements separate words; text formatting does not.
                        o.line.push(' ');
                    }
                }
                if start {
                    if name == "body" {
                        // A head left open ends where the body begins.
                        o.hidden = 0;
                    }
                    if SKIP.contains(&name) && !tag.self_closing {
                        o.hidden += 1;
                    }
                    if o.hidden == 0 || name == "title" {
                        match name {
                            "title" if o.summary.title.is_none() => o.title = Some(String::new()),
                            "a" => {
                                if let Some(href) = tag.attrs.iter().find(|a| &*a.name.local == "href") {
                                    o.link = Some((href.value.to_string(), String::new()));
                                }
                            }
                            _ => {
                                if let Some(level) = heading_level(name) {
                                    o.heading = Some((level, String::new()));
                                }
                            }
                        }
                    }
                    // The contents of these are text, not markup, as the standard says.
                    return match name {
                        "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                        "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
                            TokenSinkResult::RawData(RawKind::Rawtext)
                        }
                        "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
                        "plaintext" => TokenSinkResult::Plaintext,
                        _ => TokenSinkResult::Continue,
                    };
                }
                if SKIP.contains(&name) {
                    o.hidden = o.hidden.saturating_sub(1);
                }
                match name {
                    "title" => {
                        if let Some(t) = o.title.take().map(|t| squash(&t)).filter(|t| !t.is_empty()) {
                            o.summary.title = Some(t);
                        }
                    }
                    "a" => {
                        if let Some((href, text)) = o.link.take() {
                            o.summary.links.push((squash(&text), href));
                        }
                    }
                    _ if heading_level(name).is_some() => {
                        if let Some((level, text)) = o.heading.take() {
                            let text = squash(&text);
                            if !text.is_empty() {
                                o.summary.headings.push((level, text));
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

fn heading_level(name: &str) -> Option<u8> {
    match name.as_bytes() {
        [b'h', d @ b'1'..=b'6'] => Some(d - b'0'),
        _ => None,
    }
}

/// Summarize an HTML document.
pub fn summarize_html(src: &str) -> HtmlSummary {
    let tokenizer = Tokenizer::new(Reader::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(src));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let mut out = tokenizer.sink.out.into_inner();
    out.flush();
    if let Some((href, text)) = out.link.take() {
        out.summary.links.push((squash(&text), href));
    }
    if let Some((level, text)) = out.heading.take().filter(|(_, t)| !t.trim().is_empty()) {
        out.summary.headings.push((level, squash(&text)));
    }
    out.summary
}

/// The HTML parser, for components that need a document tree (CSS selectors).
pub use scraper;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_reader_sees() {
        let s = summarize_html(
            "<!DOCTYPE html><html><head><title>Rock &amp; Roll</title><style>p{color:red} a<b</style>\
             <script>if (a < b) { document.write('<p>SCRIPT</p>') }</script></head><body>\
             <h1>Main &lt;heading&gt;</h1><p>First &eacute;t&eacute; <b>bold</b> paragraph.<div>Nested</div>after\
             <p>See <a href=\"/x?a=1&amp;b=2\">the <i>docs</i></a>.<br>Next line\
             <noscript>NOSCRIPT</noscript><template><p>TEMPLATE</p></template><svg><text>SVG</text></svg>\
             <textarea>raw <b>text</b></textarea><h2>Unclosed",
        );
        assert_eq!(s.title.as_deref(), Some("Rock & Roll"));
        assert_eq!(s.headings, vec![(1, "Main <heading>".to_string()), (2, "Unclosed".to_string())]);
        assert_eq!(s.links, vec![("the docs".to_string(), "/x?a=1&b=2".to_string())]);
        let lines: Vec<&str> = s.text.lines().collect();
        assert_eq!(
            lines,
            [
                "Main <heading>",
                "First été bold paragraph.",
                "Nested",
                "after",
                "See the docs.",
                "Next line raw <b>text</b>",
                "Unclosed"
            ]
        );
        for hidden in ["SCRIPT", "color", "NOSCRIPT", "TEMPLATE", "SVG"] {
            assert!(!s.text.contains(hidden), "{hidden}: {}", s.text);
        }
        assert!(s.render().starts_with("Title: Rock & Roll\n\nHeadings:\n# Main <heading>\n"));
    }

    #[test]
    fn a_head_left_open_ends_at_the_body() {
        let s = summarize_html("<html><head><title>T</title><body><p>Shown</p>");
        assert_eq!(s.title.as_deref(), Some("T"));
        assert_eq!(s.text, "Shown\n");
        // Text with no markup at all is text.
        assert_eq!(summarize_html("just words").text, "just words\n");
    }
}
