//! The words of a shell string, and the shell syntax in it: how the host tells a plain
//! command line (split into words like a shell would, quotes honoured) from one that
//! needs a shell to mean what it says (pipes, redirections, expansions, sequences).

/// `Err` for an unclosed quote.
pub fn shell_syntax(s: &str) -> Result<Option<&'static str>, String> {
    #[derive(PartialEq)]
    enum Q {
        None,
        Single,
        Double,
    }
    let mut q = Q::None;
    let mut chars = s.chars().peekable();
    let mut at_word_start = true;
    while let Some(c) = chars.next() {
        match q {
            Q::Single => {
                if c == '\'' {
                    q = Q::None;
                }
            }
            Q::Double => match c {
                '"' => q = Q::None,
                '\\' => {
                    chars.next();
                }
                '$' => return Ok(Some("a `$` expansion")),
                '`' => return Ok(Some("a backtick substitution")),
                _ => {}
            },
            Q::None => {
                let construct = match c {
                    '\'' => {
                        q = Q::Single;
                        None
                    }
                    '"' => {
                        q = Q::Double;
                        None
                    }
                    '\\' => {
                        if chars.next() == Some('\n') {
                            Some("a line continuation")
                        } else {
                            None
                        }
                    }
                    '|' => Some("a pipe `|`"),
                    '&' => Some("`&` (background or `&&`)"),
                    ';' => Some("a `;` sequence"),
                    '<' | '>' => Some("a redirection"),
                    '(' | ')' => Some("a subshell"),
                    '$' => Some("a `$` expansion"),
                    '`' => Some("a backtick substitution"),
                    '\n' | '\r' => Some("a newline"),
                    '*' | '?' | '[' => Some("a glob"),
                    '{' | '}' => Some("a brace expansion"),
                    '~' if at_word_start => Some("a `~` expansion"),
                    '#' if at_word_start => Some("a `#` comment"),
                    '=' => None,
                    _ => None,
                };
                if construct.is_some() {
                    return Ok(construct);
                }
                at_word_start = c.is_whitespace();
                continue;
            }
        }
        at_word_start = false;
    }
    if q != Q::None {
        return Err("`shell_string` has an unclosed quote".into());
    }
    Ok(None)
}

/// The words of `s` as a POSIX shell splits them, when `s` has no shell syntax;
/// `None` when it has (or a quote is left open).
pub fn plain_words(s: &str) -> Option<Vec<String>> {
    match shell_syntax(s) {
        Ok(None) => shlex::split(s),
        _ => None,
    }
}

/// Every word-like token of `s`, splitting at whitespace and at shell operators, with
/// quotes removed: what a shell string could run, when it cannot be known exactly.
pub fn rough_words(s: &str) -> Vec<String> {
    s.split(|c: char| c.is_whitespace() || matches!(c, '|' | '&' | ';' | '(' | ')' | '<' | '>' | '`' | '$' | '{' | '}'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_syntax_is_found_outside_quotes_only() {
        for (s, found) in [
            ("ls -la", false),
            ("echo 'a | b'", false),
            ("echo \"a;b\"", false),
            ("grep -r foo src", false),
            ("ls | wc", true),
            ("a && b", true),
            ("a; b", true),
            ("cat < x", true),
            ("echo $HOME", true),
            ("echo \"$HOME\"", true),
            ("echo `id`", true),
            ("echo a\nrm x", true),
            ("ls *.rs", true),
            ("cd ~", true),
            ("echo a~b", false),
            ("echo hi # there", true),
            ("echo a#b", false),
        ] {
            assert_eq!(shell_syntax(s).unwrap().is_some(), found, "{s:?}");
        }
        assert!(shell_syntax("echo 'open").is_err());
    }

    #[test]
    fn words_plain_and_rough() {
        // A plain line splits like a shell would.
        assert_eq!(plain_words("touch 'a b' c").unwrap(), ["touch", "a b", "c"]);
        // A line with syntax has no exact words...
        assert_eq!(plain_words("true && touch x"), None);
        // ...but every program it could name is among its rough words.
        assert!(rough_words("true&&touch x;(rm -rf y)|`id`").iter().any(|w| w == "rm"));
        assert!(rough_words("$(touch z)").iter().any(|w| w == "touch"));
    }
}
