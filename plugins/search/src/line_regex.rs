//! The pattern search_files looks for: a regular expression (or literal text) that can
//! only ever match within one line, as a `grep_matcher::Matcher` over regex-automata's
//! meta engine.
//!
//! Built here rather than with grep-regex's matcher because that one always asks the meta
//! engine for a full DFA of up to 1,000 states. A fresh component instance runs every
//! call, so nothing built is ever reused, and determinizing a Unicode class such as `\w`
//! is most of what a regex search costs on a source tree (measured in BENCHMARKS.md).
//! The lazy DFA finds the same matches and builds only the states a search visits.
//!
//! What makes it line-oriented: the pattern is parsed in multi-line mode (`^` and `$`
//! match at line boundaries), a line break is removed from every class (so `\s`, `[^a]`
//! or `(?s).` never cross a line), and a pattern that spells out a line break is refused.
//! grep-searcher can then search a whole buffer at once and report the lines that hold a
//! match, unless the pattern uses `\A` or `\z`, which only hold per line in its line-by-
//! line mode.

use grep_matcher::{LineTerminator, Match, Matcher, NoCaptures, NoError};
use regex_automata::{Input, meta};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind};

/// How to read the pattern and what its compiled form may cost.
pub struct Options {
    /// Match letters regardless of case (Unicode simple case folding).
    pub case_insensitive: bool,
    /// The pattern is plain text, not a regular expression.
    pub literal: bool,
    /// The most memory the compiled pattern (its NFA) may take.
    pub size_limit: usize,
    /// The most memory the lazy DFA's state cache may take while searching.
    pub cache_limit: usize,
}

/// Why a pattern could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// Not a valid regular expression; the text says where and why.
    Syntax(String),
    /// Compiled, it would take more than `Options::size_limit`.
    TooLarge,
    /// It contains a line break, which no single line holds.
    LineBreak,
}

/// A compiled pattern that matches within single lines.
#[derive(Clone, Debug)]
pub struct LineRegex {
    regex: meta::Regex,
    line_terminator: Option<LineTerminator>,
}

impl LineRegex {
    /// Compiles `pattern` as `options` say.
    pub fn new(pattern: &str, options: &Options) -> Result<Self, BuildError> {
        let escaped;
        let pattern = if options.literal {
            escaped = regex_syntax::escape(pattern);
            &escaped
        } else {
            pattern
        };
        let hir = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .multi_line(true)
            .case_insensitive(options.case_insensitive)
            .build()
            .parse(pattern)
            .map_err(|e| BuildError::Syntax(e.to_string()))?;
        let hir = within_a_line(hir)?;
        // `\A` and `\z` mean "start/end of the line" only when each line is searched on its
        // own, which grep-searcher does when the matcher names no line terminator.
        let line_terminator =
            (!hir.properties().look_set().contains_anchor_haystack()).then(|| LineTerminator::byte(b'\n'));
        let config = meta::Config::new()
            .dfa(false)
            .utf8_empty(false)
            .nfa_size_limit(Some(options.size_limit))
            .hybrid_cache_capacity(options.cache_limit);
        let regex = meta::Builder::new().configure(config).build_from_hir(&hir).map_err(|e| {
            if e.size_limit().is_some() { BuildError::TooLarge } else { BuildError::Syntax(e.to_string()) }
        })?;
        Ok(LineRegex { regex, line_terminator })
    }
}

/// `hir` with a line break taken out of every class; an error if a literal holds one.
/// Recursion depth is bounded by the parser's nesting limit.
fn within_a_line(hir: Hir) -> Result<Hir, BuildError> {
    Ok(match hir.into_kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Look(look) => Hir::look(look),
        HirKind::Literal(literal) => {
            if literal.0.contains(&b'\n') {
                return Err(BuildError::LineBreak);
            }
            Hir::literal(literal.0)
        }
        HirKind::Class(Class::Unicode(mut class)) => {
            class.difference(&ClassUnicode::new([ClassUnicodeRange::new('\n', '\n')]));
            Hir::class(Class::Unicode(class))
        }
        HirKind::Class(Class::Bytes(mut class)) => {
            class.difference(&ClassBytes::new([ClassBytesRange::new(b'\n', b'\n')]));
            Hir::class(Class::Bytes(class))
        }
        HirKind::Repetition(mut repetition) => {
            repetition.sub = Box::new(within_a_line(*repetition.sub)?);
            Hir::repetition(repetition)
        }
        HirKind::Capture(mut capture) => {
            capture.sub = Box::new(within_a_line(*capture.sub)?);
            Hir::capture(capture)
        }
        HirKind::Concat(subs) => Hir::concat(subs.into_iter().map(within_a_line).collect::<Result<_, _>>()?),
        HirKind::Alternation(subs) => Hir::alternation(subs.into_iter().map(within_a_line).collect::<Result<_, _>>()?),
    })
}

impl Matcher for LineRegex {
    type Captures = NoCaptures;
    type Error = NoError;

    fn find_at(&self, haystack: &[u8], at: usize) -> Result<Option<Match>, NoError> {
        let input = Input::new(haystack).span(at..haystack.len());
        Ok(self.regex.find(input).map(|m| Match::new(m.start(), m.end())))
    }

    fn new_captures(&self) -> Result<NoCaptures, NoError> {
        Ok(NoCaptures::new())
    }

    fn shortest_match_at(&self, haystack: &[u8], at: usize) -> Result<Option<usize>, NoError> {
        let input = Input::new(haystack).span(at..haystack.len()).earliest(true);
        Ok(self.regex.search_half(&input).map(|end| end.offset()))
    }

    fn line_terminator(&self) -> Option<LineTerminator> {
        self.line_terminator
    }
}
