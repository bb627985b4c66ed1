//! HTML reduced to what a reader sees: the title, headings, links and the visible text
//! with a line per block, read with html5gum's tokenizer (the HTML standard's
//! tokenization, so entities, raw-text elements and broken markup are read as a
//! browser reads them) in one pass, without building a tree. Scripts, styles, templates,
//! SVG and frames are dropped; entities are decoded. Shared by `workspace_preview`'s `html`
//! operation and `web_fetch`, so both read a page the same way.

use std::borrow::Cow;

use html5gum::emitters::callback::{CallbackEmitter, CallbackEvent};
use html5gum::{Emitter, ForwardingEmitter, Span, State, Tokenizer};

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
        // The rendered length (each part's text and its markers), so the string grows once.
        let size = self.title.as_ref().map_or(0, |t| t.len() + 9)
            + self.headings.iter().map(|(l, h)| *l as usize + h.len() + 2).sum::<usize>()
            + self.links.iter().map(|(t, h)| t.len() + h.len() + 6).sum::<usize>()
            + self.text.len()
            + "Headings:\n\nLinks:\n\nText:\n".len();
        let mut s = String::with_capacity(size);
        if let Some(t) = &self.title {
            s.push_str("Title: ");
            s.push_str(t);
            s.push_str("\n\n");
        }
        if !self.headings.is_empty() {
            s.push_str("Headings:\n");
            for (level, h) in &self.headings {
                s.extend(std::iter::repeat_n('#', *level as usize));
                s.push(' ');
                s.push_str(h);
                s.push('\n');
            }
            s.push('\n');
        }
        if !self.links.is_empty() {
            s.push_str("Links:\n");
            for (text, href) in &self.links {
                s.push_str("- ");
                s.push_str(text);
                s.push_str(" <");
                s.push_str(href);
                s.push_str(">\n");
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
    let mut w = Words::default();
    w.push(s);
    w.text
}

/// Text collected with its whitespace collapsed as it arrives (what `squash` gives for the
/// whole), so no text is held twice: the page's lines are written straight into one string.
#[derive(Default)]
struct Words {
    text: String,
    /// Where the current line starts in `text`.
    line: usize,
    /// Whitespace or a word boundary was seen since the last word.
    gap: bool,
}

impl Words {
    fn push(&mut self, t: &str) {
        let b = t.as_bytes();
        // The start of the run being scanned: words with single spaces between them,
        // copied as one piece.
        let (mut run, mut i) = (0, 0);
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_graphic() {
                i += 1;
                continue;
            }
            if c == b' ' && i > run && b.get(i + 1).is_some_and(u8::is_ascii_graphic) {
                i += 2;
                continue;
            }
            let (space, len) = if c.is_ascii() {
                (matches!(c, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' '), 1)
            } else {
                t[i..].chars().next().map_or((false, 1), |c| (c.is_whitespace(), c.len_utf8()))
            };
            if space {
                self.word(&t[run..i]);
                self.gap = true;
                run = i + len;
            }
            i += len;
        }
        self.word(&t[run..]);
    }

    fn word(&mut self, w: &str) {
        if w.is_empty() {
            return;
        }
        if self.gap && self.text.len() > self.line {
            self.text.push(' ');
        }
        self.gap = false;
        self.text.push_str(w);
    }

    /// A word boundary that is not in the text (between two elements).
    fn gap(&mut self) {
        self.gap = true;
    }

    /// Ends the line: a newline after it unless it is empty.
    fn end_line(&mut self) {
        if self.text.len() > self.line {
            self.text.push('\n');
            self.line = self.text.len();
        }
        self.gap = false;
    }

    fn take(&mut self) -> String {
        self.gap = false;
        self.line = 0;
        std::mem::take(&mut self.text)
    }
}

/// What an element does to the text around it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Its content is not shown.
    Hidden,
    /// It starts and ends a line.
    Block,
    /// A block heading of this level.
    Heading(u8),
    /// The body: a block, and the end of a head left open.
    Body,
    /// Text-level: its boundaries are not word boundaries.
    Inline,
    /// `<a>`: inline, and a link when it has an `href`.
    Link,
    Title,
    /// Anything else separates words.
    Other,
}

fn kind(name: &[u8]) -> Kind {
    match name {
        b"script" | b"style" | b"noscript" | b"template" | b"head" | b"svg" | b"iframe" | b"object" | b"noembed"
        | b"noframes" => Kind::Hidden,
        [b'h', d @ b'1'..=b'6'] => Kind::Heading(d - b'0'),
        b"body" => Kind::Body,
        b"p" | b"div" | b"br" | b"li" | b"ul" | b"ol" | b"tr" | b"table" | b"section" | b"article" | b"header"
        | b"footer" | b"nav" | b"main" | b"blockquote" | b"pre" | b"hr" | b"dt" | b"dd" | b"figure" | b"figcaption"
        | b"form" | b"aside" | b"td" | b"th" => Kind::Block,
        b"a" => Kind::Link,
        b"abbr" | b"b" | b"bdi" | b"bdo" | b"cite" | b"code" | b"data" | b"dfn" | b"em" | b"i" | b"kbd" | b"mark"
        | b"q" | b"s" | b"samp" | b"small" | b"span" | b"strong" | b"sub" | b"sup" | b"time" | b"u" | b"var"
        | b"wbr" | b"font" | b"del" | b"ins" => Kind::Inline,
        b"title" => Kind::Title,
        _ => Kind::Other,
    }
}

/// The tokenizer's bytes as text. The input is a `str` and the tokenizer splits it only at
/// ASCII, so this borrows; anything else would be replaced, never a panic.
fn utf8(b: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// The one pass over the tokens: keeps what a reader sees.
#[derive(Default)]
struct Out {
    summary: HtmlSummary,
    /// Open elements whose content is hidden.
    hidden: u32,
    /// Inside `<title>`, collecting.
    title: Option<Words>,
    /// An open heading: its level and text.
    heading: Option<(u8, Words)>,
    /// An open link: its href and text.
    link: Option<(String, Words)>,
    /// The visible text: the lines so far and the one being collected.
    line: Words,
    /// The start tag being read: its name, whether its last attribute is its first `href`,
    /// and that `href`.
    tag: Vec<u8>,
    in_start_tag: bool,
    href_value: bool,
    href: Option<String>,
}

impl Out {
    /// Takes one token; at a start tag whose content is text, not markup, returns the
    /// tokenizer state the standard switches to.
    fn event(&mut self, event: CallbackEvent<'_>) -> Option<State> {
        match event {
            CallbackEvent::OpenStartTag { name } => {
                self.tag.clear();
                self.tag.extend_from_slice(name);
                self.in_start_tag = true;
                self.href = None;
            }
            // Attributes of an end tag are a parse error and mean nothing.
            CallbackEvent::AttributeName { name } if self.in_start_tag => {
                // The first of duplicate attributes wins, as the standard says.
                self.href_value = name == b"href" && self.href.is_none();
                if self.href_value {
                    self.href = Some(String::new());
                }
            }
            CallbackEvent::AttributeValue { value } if self.href_value => {
                self.href = Some(utf8(value).into_owned());
                self.href_value = false;
            }
            CallbackEvent::CloseStartTag { self_closing } => {
                self.in_start_tag = false;
                self.href_value = false;
                self.start(kind(&self.tag), self_closing);
                // The contents of these are text, not markup, as the standard says.
                return match &self.tag[..] {
                    b"script" => Some(State::ScriptData),
                    b"style" | b"xmp" | b"iframe" | b"noembed" | b"noframes" => Some(State::RawText),
                    b"title" | b"textarea" => Some(State::RcData),
                    b"plaintext" => Some(State::PlainText),
                    _ => None,
                };
            }
            CallbackEvent::EndTag { name } => self.end(kind(name)),
            CallbackEvent::String { value } => {
                let t = utf8(value);
                // A NUL in text is an error the tree builder drops, as browsers do.
                if t.contains('\0') { self.text(&t.replace('\0', "")) } else { self.text(&t) }
            }
            _ => {}
        }
        None
    }

    /// What any tag does to the line: a block ends it, other elements separate words.
    fn boundary(&mut self, k: Kind) {
        if self.hidden == 0 {
            match k {
                Kind::Block | Kind::Heading(_) | Kind::Body => self.line.end_line(),
                Kind::Inline | Kind::Link => {}
                _ => self.line.gap(),
            }
        }
    }

    fn start(&mut self, k: Kind, self_closing: bool) {
        self.boundary(k);
        if k == Kind::Body {
            // A head left open ends where the body begins.
            self.hidden = 0;
        }
        if k == Kind::Hidden && !self_closing {
            self.hidden += 1;
        }
        if self.hidden == 0 || k == Kind::Title {
            match k {
                Kind::Title if self.summary.title.is_none() => self.title = Some(Words::default()),
                Kind::Link => {
                    if let Some(href) = self.href.take() {
                        self.link = Some((href, Words::default()));
                    }
                }
                Kind::Heading(level) => self.heading = Some((level, Words::default())),
                _ => {}
            }
        }
    }

    fn end(&mut self, k: Kind) {
        self.boundary(k);
        match k {
            Kind::Hidden => self.hidden = self.hidden.saturating_sub(1),
            Kind::Title => {
                if let Some(t) = self.title.take().map(|mut t| t.take()).filter(|t| !t.is_empty()) {
                    self.summary.title = Some(t);
                }
            }
            Kind::Link => self.close_link(),
            Kind::Heading(_) => self.close_heading(),
            _ => {}
        }
    }

    fn text(&mut self, t: &str) {
        if let Some(title) = self.title.as_mut() {
            title.push(t);
        } else if self.hidden == 0 {
            self.line.push(t);
            if let Some((_, h)) = self.heading.as_mut() {
                h.push(t);
            }
            if let Some((_, a)) = self.link.as_mut() {
                a.push(t);
            }
        }
    }

    fn close_link(&mut self) {
        if let Some((href, mut text)) = self.link.take() {
            self.summary.links.push((text.take(), href));
        }
    }

    fn close_heading(&mut self) {
        if let Some((level, mut text)) = self.heading.take() {
            let text = text.take();
            if !text.is_empty() {
                self.summary.headings.push((level, text));
            }
        }
    }
}

/// An emitter that asks for no parse errors: they would mean nothing here, and checking
/// every character for them took over a quarter of this reader's time (natively, on a
/// 100 KB page: 0.76 ms with the checks, 0.55 ms without).
struct Quiet<E>(E);

impl<E: Emitter> ForwardingEmitter for Quiet<E> {
    type Token = E::Token;

    fn inner(&mut self) -> &mut impl Emitter<Token = Self::Token> {
        &mut self.0
    }

    fn should_emit_errors(&mut self) -> bool {
        false
    }
}

/// Summarize an HTML document.
pub fn summarize_html(src: &str) -> HtmlSummary {
    let mut out = Out::default();
    let emitter = CallbackEmitter::new(|event: CallbackEvent<'_>, _: Span<()>| out.event(event));
    let mut tokens = Tokenizer::new_with_emitter(src, Quiet(emitter));
    // Script, style, title, textarea and the like hold text, not markup: after such a start
    // tag the tokenizer reads on in the state the standard gives it.
    while let Some(Ok(state)) = tokens.next() {
        tokens.set_state(state);
    }
    drop(tokens);
    out.line.end_line();
    out.summary.text = out.line.take();
    out.close_link();
    out.close_heading();
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

    #[test]
    fn whitespace_collapses_as_split_whitespace_has_it() {
        for s in [
            "",
            "   ",
            "one",
            "  two  words ",
            "a\t\n\x0B\x0C\rb",
            "non\u{a0}breaking\u{3000}ideographic\u{2028}line",
            "été  naïve\u{1F600} ok",
            "\x1Cfile separator is not a space",
        ] {
            let want = s.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(squash(s), want, "{s:?}");
            // The same when the text arrives in pieces cut at any character.
            for (cut, _) in s.char_indices() {
                let mut w = Words::default();
                w.push(&s[..cut]);
                w.push(&s[cut..]);
                assert_eq!(w.take(), want, "{s:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn broken_markup_is_read_as_the_standard_reads_it() {
        let s = summarize_html(
            "<P CLASS=x>Upper<A HREF='/one' href='/two'>case</A></p>\
             <a href>empty</a><a name=x>no href</a>\
             <p>a &lt; b &amp c &notanentity; &#x41;&#66;</p>\
             <script>document.write('</p><p>not text')</script>\
             <style>a > b { }</style>\
             </div attr=1><p>after</p id=2>\
             <title>late <b>title</b></title>\
             <p>nul\0s dropped</p><p>cut <a href=\"/cut",
        );
        assert_eq!(s.title.as_deref(), Some("late <b>title</b>"));
        assert_eq!(s.links, vec![("case".to_string(), "/one".to_string()), ("empty".to_string(), String::new())]);
        assert_eq!(
            s.text.lines().collect::<Vec<_>>(),
            ["Uppercase", "emptyno href", "a < b & c ¬anentity; AB", "after", "nuls dropped", "cut"]
        );
    }

    #[test]
    fn cut_and_garbled_markup_still_gives_clean_lines() {
        let page = "<!DOCTYPE html><html><head><title>T &amp; t</title><script>a<b</script></head>\
                    <body><h1>Head\u{a0}ing</h1><p>One <a href='/x'>link</a> été<br>two\t lines</p>\
                    <noscript>n</noscript><textarea>t<p>x</textarea><table><tr><td>c1<td>c2</table>";
        let pieces = ["<", ">", "&", "\"", "'", "</", "=", "<!--", "<script>", "</p>", "\0", " \n ", "é", "<a href="];
        // A fixed sequence (xorshift), so every run checks the same documents.
        let mut x: u32 = 0x9e37_79b9;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as usize % n
        };
        for _ in 0..2000 {
            let mut doc: String = page.chars().take(next(page.chars().count() + 1)).collect();
            for _ in 0..next(6) {
                let at = doc.char_indices().nth(next(doc.chars().count() + 1)).map_or(doc.len(), |(i, _)| i);
                doc.insert_str(at, pieces[next(pieces.len())]);
            }
            let s = summarize_html(&doc);
            for line in s.text.lines() {
                assert!(!line.is_empty() && line == squash(line), "{line:?} in {doc:?}");
            }
            assert!(s.text.is_empty() || s.text.ends_with('\n'));
            for (_, h) in &s.headings {
                assert!(!h.is_empty() && *h == squash(h));
            }
            assert!(!s.text.contains('\0'), "{doc:?}");
            assert!(s.render().ends_with(&s.text));
        }
    }
}
