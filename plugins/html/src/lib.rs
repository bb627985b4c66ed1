//! HTML reduced to what a reader sees: the title, headings, links and the visible text
//! with a line per block, parsed with html5ever (through scraper) so that broken markup
//! is read as a browser reads it. Scripts, styles, templates, SVG and frames are
//! dropped; entities are decoded. Shared by `workspace_preview`'s `html` operation and
//! `web_fetch`, so both read a page the same way.

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

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Summarize an HTML document.
pub fn summarize_html(src: &str) -> HtmlSummary {
    use scraper::{Html, Node};
    const SKIP: &[&str] = &["script", "style", "noscript", "template", "head", "svg", "iframe", "object"];
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
    ];
    let doc = Html::parse_document(src);
    let mut s = HtmlSummary::default();
    let text_of = |n: scraper::ElementRef<'_>| squash(&n.text().collect::<String>());
    for node in doc.tree.root().descendants() {
        let Some(el) = scraper::ElementRef::wrap(node) else { continue };
        let name = el.value().name();
        if name == "title" && s.title.is_none() {
            let t = text_of(el);
            if !t.is_empty() {
                s.title = Some(t);
            }
        }
        if let Some(l) = name.strip_prefix('h').and_then(|d| d.parse::<u8>().ok()).filter(|l| (1..=6).contains(l)) {
            let t = text_of(el);
            if !t.is_empty() {
                s.headings.push((l, t));
            }
        }
        if name == "a"
            && let Some(href) = el.value().attr("href")
        {
            s.links.push((text_of(el), href.to_string()));
        }
    }
    // Body text, with line breaks at block boundaries.
    let mut text = String::new();
    let mut line = String::new();
    for edge in doc.tree.root().traverse() {
        match edge {
            ego_tree::iter::Edge::Open(n) => {
                if let Node::Text(t) = n.value() {
                    let hidden =
                        n.ancestors().any(|a| a.value().as_element().is_some_and(|e| SKIP.contains(&e.name())));
                    if !hidden {
                        line.push_str(t);
                        line.push(' ');
                    }
                }
            }
            ego_tree::iter::Edge::Close(n) => {
                if n.value().as_element().is_some_and(|e| BLOCK.contains(&e.name())) {
                    let l = squash(&line);
                    if !l.is_empty() {
                        text.push_str(&l);
                        text.push('\n');
                    }
                    line.clear();
                }
            }
        }
    }
    let l = squash(&line);
    if !l.is_empty() {
        text.push_str(&l);
        text.push('\n');
    }
    s.text = text;
    s
}
pub use scraper;
