//! Reading a test run's output: which runner produced it, how many tests passed and
//! failed, and where the failures are (name, file, line, message).
//!
//! Pure text processing, shared by the `workspace_tests` component and the host's tests.
//! A count is `None` when the output does not say it (a run killed before its summary, a
//! build that failed before any test ran): absent, never a guessed zero.
//!
//! ```
//! use cheng_test_report::{parse, Runner};
//!
//! let out = "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
//! let r = parse(Some(Runner::CargoTest), out, "");
//! assert_eq!((r.passed, r.failed), (Some(1), Some(2)));
//! ```

use serde::Serialize;

/// Most failures reported.
pub const MAX_FAILURES: usize = 50;
/// Longest failure message kept, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// A test runner whose output is understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Runner {
    /// `cargo test`.
    CargoTest,
    /// `cargo nextest run`.
    Nextest,
    /// pytest (also `python -m pytest`).
    Pytest,
    /// Jest.
    Jest,
    /// Vitest.
    Vitest,
    /// `go test`.
    GoTest,
}

/// One failure, as precisely as the output allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The test (or `compile error`, or the module that failed to load).
    pub name: String,
    /// Source file, as the runner printed it.
    pub file: Option<String>,
    /// 1-based line.
    pub line: Option<u32>,
    /// The first lines of the message.
    pub message: String,
}

/// What a run's output says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The runner recognised.
    pub runner: Option<Runner>,
    /// Tests that passed, when the output says.
    pub passed: Option<u64>,
    /// Tests that failed, when the output says.
    pub failed: Option<u64>,
    /// Failures found, at most [`MAX_FAILURES`].
    pub failures: Vec<Failure>,
    /// Why counts are missing, when they are.
    pub note: Option<String>,
}

/// The runner a command line points at, if it names one.
pub fn runner_hint(command: &str, args: &[String]) -> Option<Runner> {
    let prog = command.rsplit('/').next().unwrap_or(command);
    let words: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    match prog {
        "cargo" => match words.first() {
            Some(&"nextest") => Some(Runner::Nextest),
            Some(&"test") | Some(&"t") => Some(Runner::CargoTest),
            _ => None,
        },
        "cargo-nextest" => Some(Runner::Nextest),
        "pytest" | "py.test" => Some(Runner::Pytest),
        p if p.starts_with("python") && args.windows(2).any(|w| w[0] == "-m" && w[1] == "pytest") => {
            Some(Runner::Pytest)
        }
        "jest" => Some(Runner::Jest),
        "vitest" => Some(Runner::Vitest),
        "npx" | "pnpm" | "yarn" | "bunx" | "pnpx" => {
            if words.contains(&"vitest") {
                Some(Runner::Vitest)
            } else if words.contains(&"jest") {
                Some(Runner::Jest)
            } else {
                None
            }
        }
        "go" if words.first() == Some(&"test") => Some(Runner::GoTest),
        _ => None,
    }
}

/// Remove ANSI escape sequences (colours, cursor moves).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Parse a run's output; `hint` (from the command line) is tried first, then each
/// runner whose signature appears.
pub fn parse(hint: Option<Runner>, stdout: &str, stderr: &str) -> Report {
    let text = strip_ansi(&format!("{stdout}\n{stderr}"));
    let lines: Vec<&str> = text.lines().collect();
    let mut order: Vec<Runner> = hint.into_iter().collect();
    for r in detect(&lines) {
        if !order.contains(&r) {
            order.push(r);
        }
    }
    let mut fallback: Option<Report> = None;
    for r in order {
        let mut rep = match r {
            Runner::CargoTest => cargo(&lines),
            Runner::Nextest => nextest(&lines),
            Runner::Pytest => pytest(&lines),
            Runner::Jest => jest(&lines),
            Runner::Vitest => vitest(&lines),
            Runner::GoTest => go(&lines),
        };
        rep.runner = Some(r);
        rep.failures.truncate(MAX_FAILURES);
        if rep.passed.is_some() || rep.failed.is_some() {
            return rep;
        }
        if fallback.as_ref().is_none_or(|f| f.failures.is_empty() && !rep.failures.is_empty()) {
            fallback = Some(rep);
        }
    }
    let mut rep = fallback.unwrap_or_default();
    if rep.note.is_none() {
        rep.note = Some(match rep.runner {
            Some(_) => "the output has no test summary (the run may have stopped early), so the counts are unknown".into(),
            None => "the output is not from a test runner this tool reads (cargo test, nextest, pytest, jest, vitest, go test), so the counts are unknown".into(),
        });
    }
    rep
}

fn detect(lines: &[&str]) -> Vec<Runner> {
    let mut found = Vec::new();
    let any = |f: &dyn Fn(&str) -> bool| lines.iter().any(|l| f(l));
    if any(&|l| l.contains("Nextest run ID") || l.trim_start().starts_with("Summary [")) {
        found.push(Runner::Nextest);
    }
    if any(&|l| l.starts_with("test result: ") || l.starts_with("running ") && l.ends_with(" tests"))
        || any(&|l| l.starts_with("error[E") || l.starts_with("error: could not compile"))
    {
        found.push(Runner::CargoTest);
    }
    if any(&|l| l.starts_with("====") && l.contains(" in ") && l.trim_end().ends_with('='))
        || any(&|l| l.starts_with("platform ") && l.contains("pytest"))
    {
        found.push(Runner::Pytest);
    }
    if any(&|l| l.starts_with("Tests:") || l.starts_with("Test Suites:")) {
        found.push(Runner::Jest);
    }
    if any(&|l| l.trim_start().starts_with("Test Files ") || l.trim_start().starts_with("RUN  v")) {
        found.push(Runner::Vitest);
    }
    if any(&|l| {
        l.starts_with("--- FAIL: ") || l.starts_with("--- PASS: ") || l.starts_with("ok  \t") || l.starts_with("FAIL\t")
    }) {
        found.push(Runner::GoTest);
    }
    found
}

/// `"12 passed"` style pairs in `s`, as (number, word).
fn counts(s: &str) -> Vec<(u64, String)> {
    let words: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '|' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = Vec::new();
    for w in words.windows(2) {
        if let Ok(n) = w[0].parse::<u64>() {
            out.push((n, w[1].trim_end_matches('.').to_string()));
        }
    }
    out
}

fn count_of(pairs: &[(u64, String)], word: &str) -> Option<u64> {
    pairs.iter().filter(|(_, w)| w == word).map(|(n, _)| *n).reduce(|a, b| a + b)
}

fn cut(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > MAX_MESSAGE_CHARS {
        let mut t: String = s.chars().take(MAX_MESSAGE_CHARS).collect();
        t.push('…');
        t
    } else {
        s.to_string()
    }
}

/// `file:line` or `file:line:col` at the end of `s`.
fn file_line(s: &str) -> Option<(String, u32)> {
    let s = s.trim().trim_end_matches(':').trim_end_matches(')');
    let mut parts: Vec<&str> = s.rsplitn(3, ':').collect();
    parts.reverse();
    match parts.as_slice() {
        [file, line, col] if col.parse::<u32>().is_ok() => line.parse().ok().map(|l| (file.to_string(), l)),
        [a, b, line] => line.parse().ok().map(|l| (format!("{a}:{b}"), l)),
        [file, line] => line.parse().ok().map(|l| (file.to_string(), l)),
        _ => None,
    }
}

/// The panic line of a Rust test: `thread 'name' (tid) panicked at file:line:col:`.
fn rust_panic(line: &str) -> Option<(String, String, u32)> {
    let rest = line.trim_start().strip_prefix("thread '")?;
    let (name, rest) = rest.split_once('\'')?;
    let at = rest.split_once("panicked at ")?.1;
    let (file, l) = file_line(at)?;
    Some((name.to_string(), file, l))
}

/// The message lines after a panic line: up to three, until a blank or a `note:`.
fn following_message(lines: &[&str], from: usize) -> String {
    lines[from..]
        .iter()
        .map(|l| l.trim())
        .take_while(|l| !l.is_empty() && !l.starts_with("note:") && !l.starts_with("stack backtrace:"))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_panics(lines: &[&str], rep: &mut Report) {
    for (i, l) in lines.iter().enumerate() {
        if let Some((name, file, line)) = rust_panic(l) {
            if rep.failures.iter().any(|f| f.name == name) {
                continue;
            }
            rep.failures.push(Failure {
                name,
                file: Some(file),
                line: Some(line),
                message: cut(&following_message(lines, i + 1)),
            });
        }
    }
}

fn compile_errors(lines: &[&str], rep: &mut Report) {
    for (i, l) in lines.iter().enumerate() {
        let is_error = l.starts_with("error[E")
            || (l.starts_with("error: ")
                && !l.starts_with("error: could not compile")
                && !l.starts_with("error: test failed")
                && !l.starts_with("error: aborting"));
        if !is_error {
            continue;
        }
        let message = l.split_once(": ").map(|x| x.1).unwrap_or(l).to_string();
        let loc = lines[i + 1..].iter().take(3).find_map(|n| n.trim_start().strip_prefix("--> ").and_then(file_line));
        rep.failures.push(Failure {
            name: "compile error".into(),
            file: loc.as_ref().map(|(f, _)| f.clone()),
            line: loc.map(|(_, l)| l),
            message: cut(&message),
        });
    }
}

fn cargo(lines: &[&str]) -> Report {
    let mut rep = Report::default();
    for l in lines {
        if let Some(rest) = l.strip_prefix("test result: ") {
            let c = counts(rest);
            rep.passed = Some(rep.passed.unwrap_or(0) + count_of(&c, "passed").unwrap_or(0));
            rep.failed = Some(rep.failed.unwrap_or(0) + count_of(&c, "failed").unwrap_or(0));
        }
    }
    rust_panics(lines, &mut rep);
    // A test that failed without a panic line (e.g. returned Err) is still listed.
    let mut in_list = false;
    for l in lines {
        if *l == "failures:" {
            in_list = true;
            continue;
        }
        if in_list {
            let name = l.trim();
            if name.starts_with("test result") {
                in_list = false;
                continue;
            }
            if name.is_empty() {
                continue;
            }
            if l.starts_with("    ") && !name.contains(' ') && !rep.failures.iter().any(|f| f.name == name) {
                rep.failures.push(Failure { name: name.to_string(), file: None, line: None, message: String::new() });
            }
        }
    }
    compile_errors(lines, &mut rep);
    if rep.passed.is_none() && rep.failures.iter().any(|f| f.name == "compile error") {
        rep.note = Some("the build failed, so no test ran; the counts are unknown".into());
    }
    rep
}

fn nextest(lines: &[&str]) -> Report {
    let mut rep = Report::default();
    for l in lines {
        let t = l.trim_start();
        if t.starts_with("Summary [")
            && let Some(rest) = t.split_once(']').map(|x| x.1)
        {
            let c = counts(rest);
            rep.passed = count_of(&c, "passed");
            rep.failed = Some(count_of(&c, "failed").unwrap_or(0) + count_of(&c, "timed").unwrap_or(0));
        }
    }
    // FAIL [ 0.005s] (2/3) crate tests::name
    let mut names = Vec::new();
    for l in lines {
        let t = l.trim_start();
        if let Some(rest) = t.strip_prefix("FAIL [").or_else(|| t.strip_prefix("TIMEOUT ["))
            && let Some(name) = rest.split_whitespace().last()
            && !names.iter().any(|n: &String| n == name)
        {
            names.push(name.to_string());
        }
    }
    rust_panics(lines, &mut rep);
    for n in names {
        if !rep.failures.iter().any(|f| f.name == n) {
            rep.failures.push(Failure { name: n, file: None, line: None, message: String::new() });
        }
    }
    compile_errors(lines, &mut rep);
    rep
}

fn pytest(lines: &[&str]) -> Report {
    let mut rep = Report::default();
    // The last "==== 2 failed, 1 passed in 0.02s ====" line.
    if let Some(l) =
        lines.iter().rev().find(|l| l.starts_with('=') && l.contains(" in ") && l.trim_end().ends_with('='))
    {
        let inner = l.trim_matches('=').trim();
        let c = counts(inner);
        if !c.is_empty() {
            rep.passed = Some(count_of(&c, "passed").unwrap_or(0));
            let errors = count_of(&c, "error").unwrap_or(0) + count_of(&c, "errors").unwrap_or(0);
            rep.failed = Some(count_of(&c, "failed").unwrap_or(0) + errors);
        }
    }
    // Locations: each "____ test_name ____" block's "file.py:LINE: ExcType" line.
    let mut locs: Vec<(String, String, u32)> = Vec::new();
    let mut current: Option<String> = None;
    for l in lines {
        let t = l.trim();
        if t.starts_with("___") && t.ends_with("___") {
            current = Some(t.trim_matches('_').trim().to_string());
            continue;
        }
        if let Some(name) = &current
            && let Some((loc, _)) = t.split_once(": ")
            && let Some((file, line)) = file_line(loc)
            && file.ends_with(".py")
            && !file.starts_with('/')
            && !file.starts_with('<')
        {
            locs.push((name.clone(), file, line));
            current = None;
        }
    }
    for l in lines {
        let (kind, rest) = if let Some(r) = l.strip_prefix("FAILED ") {
            ("failed", r)
        } else if let Some(r) = l.strip_prefix("ERROR ") {
            ("error", r)
        } else {
            continue;
        };
        let (node, msg) = rest.split_once(" - ").unwrap_or((rest, ""));
        let node = node.trim();
        let file = node.split("::").next().unwrap_or(node).to_string();
        let short = node.rsplit("::").next().unwrap_or(node);
        let line = locs.iter().find(|(n, f, _)| (n == short || n.ends_with(short)) && *f == file).map(|(_, _, l)| *l);
        let message = if msg.is_empty() && kind == "error" {
            lines
                .iter()
                .filter_map(|l| l.trim_start().strip_prefix("E "))
                .map(str::trim)
                .rfind(|m| m.contains("Error"))
                .unwrap_or("error while collecting")
                .to_string()
        } else {
            msg.to_string()
        };
        rep.failures.push(Failure { name: node.to_string(), file: Some(file), line, message: cut(&message) });
    }
    rep
}

/// `(file:line:col)` or `file:line:col` inside a stack line.
fn js_location(l: &str) -> Option<(String, u32)> {
    let t = l.trim();
    let inner = match (t.rfind('('), t.ends_with(')')) {
        (Some(i), true) => &t[i + 1..t.len() - 1],
        _ => t.rsplit(' ').next()?,
    };
    let (file, line) = file_line(inner)?;
    (!file.contains("node_modules") && !file.starts_with("node:")).then_some((file, line))
}

fn jest(lines: &[&str]) -> Report {
    let mut rep = Report::default();
    if let Some(l) = lines.iter().find(|l| l.starts_with("Tests:")) {
        let c = counts(&l["Tests:".len()..]);
        rep.passed = Some(count_of(&c, "passed").unwrap_or(0));
        rep.failed = Some(count_of(&c, "failed").unwrap_or(0));
    }
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = l.trim_start().strip_prefix("● ") else { continue };
        if name.starts_with("Test suite failed to run") && rep.failures.iter().any(|f| f.name == name) {
            continue;
        }
        let message = lines[i + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty()).unwrap_or("").to_string();
        let loc = lines[i + 1..].iter().take_while(|l| !l.trim_start().starts_with("● ")).find_map(|l| {
            let t = l.trim_start();
            if t.starts_with("at ") { js_location(t) } else { None }
        });
        rep.failures.push(Failure {
            name: name.trim().to_string(),
            file: loc.as_ref().map(|x| x.0.clone()),
            line: loc.map(|x| x.1),
            message: cut(&message),
        });
    }
    rep
}

fn vitest(lines: &[&str]) -> Report {
    let mut rep = Report::default();
    if let Some(l) = lines.iter().find(|l| l.trim_start().starts_with("Tests ")) {
        let c = counts(l.trim_start()["Tests ".len()..].trim());
        if !c.is_empty() {
            rep.passed = Some(count_of(&c, "passed").unwrap_or(0));
            rep.failed = Some(count_of(&c, "failed").unwrap_or(0));
        }
    }
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.trim_start().strip_prefix("FAIL ") else { continue };
        let name = rest.trim();
        let message = lines[i + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty()).unwrap_or("").to_string();
        let loc = lines[i + 1..]
            .iter()
            .take_while(|l| !l.trim_start().starts_with("FAIL ") && !l.contains("⎯⎯⎯"))
            .filter_map(|l| l.trim_start().strip_prefix("❯ "))
            .find_map(js_location);
        let file = loc
            .as_ref()
            .map(|x| x.0.clone())
            .or_else(|| name.split(" > ").next().map(|f| f.split(" [").next().unwrap_or(f).to_string()));
        rep.failures.push(Failure { name: name.to_string(), file, line: loc.map(|x| x.1), message: cut(&message) });
    }
    if rep.passed.is_none() && !rep.failures.is_empty() {
        rep.note = Some("a test file failed to load, so no test ran; the counts are unknown".into());
    }
    rep
}

fn go(lines: &[&str]) -> Report {
    let mut rep = Report::default();
    let pass = lines.iter().filter(|l| l.trim_start().starts_with("--- PASS: ")).count() as u64;
    let fail = lines.iter().filter(|l| l.trim_start().starts_with("--- FAIL: ")).count() as u64;
    let verbose = lines.iter().any(|l| l.starts_with("=== RUN"));
    if verbose || pass > 0 {
        rep.passed = Some(pass);
        rep.failed = Some(fail);
    } else if fail > 0 {
        rep.failed = Some(fail);
        rep.note = Some("without -v, go test does not list passing tests; run `go test -v` for counts".into());
    }
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.trim_start().strip_prefix("--- FAIL: ") else { continue };
        let name = rest.split_whitespace().next().unwrap_or(rest).to_string();
        // The test's log lines come before its --- FAIL line (with -v) or right after it.
        let around = lines[..i]
            .iter()
            .rev()
            .take_while(|l| !l.starts_with("=== RUN") && !l.starts_with("---"))
            .chain(lines[i + 1..].iter().take_while(|l| l.starts_with("    ")));
        let mut loc = None;
        for l in around {
            if let Some((pos, msg)) = l.trim().split_once(": ")
                && let Some((file, line)) = file_line(pos)
                && file.ends_with(".go")
            {
                loc = Some((file, line, msg.to_string()));
                break;
            }
        }
        rep.failures.push(Failure {
            name,
            file: loc.as_ref().map(|x| x.0.clone()),
            line: loc.as_ref().map(|x| x.1),
            message: cut(&loc.map(|x| x.2).unwrap_or_default()),
        });
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(runner_hint("cargo", &a(&["test", "--no-fail-fast"])), Some(Runner::CargoTest));
        assert_eq!(runner_hint("cargo", &a(&["nextest", "run"])), Some(Runner::Nextest));
        assert_eq!(runner_hint("python3", &a(&["-m", "pytest", "-q"])), Some(Runner::Pytest));
        assert_eq!(runner_hint("npx", &a(&["vitest", "run"])), Some(Runner::Vitest));
        assert_eq!(runner_hint("go", &a(&["test", "./..."])), Some(Runner::GoTest));
        assert_eq!(runner_hint("npm", &a(&["test"])), None);
    }

    #[test]
    fn ansi_is_stripped() {
        assert_eq!(strip_ansi("\u{1b}[32m- Expected\u{1b}[39m"), "- Expected");
    }

    #[test]
    fn file_lines() {
        assert_eq!(file_line("src/lib.rs:8:18:"), Some(("src/lib.rs".into(), 8)));
        assert_eq!(file_line("test_calc.py:8"), Some(("test_calc.py".into(), 8)));
        assert_eq!(file_line("nothing here"), None);
    }
}
