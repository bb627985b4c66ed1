//! Programs that run another program named in their arguments — `env`, `nice`,
//! `nohup`, `timeout`, `stdbuf`, `setsid`, `xargs`, `time`, `command`, `exec`, `sudo`,
//! `doas`, `busybox`, `flock`, and shells given `-c` — looked through to the program
//! they start, so that a rule about `touch` also holds for `env touch`.
//!
//! [`chain`] turns a command's words into the programs it runs, launcher by launcher.
//! Where the program cannot be known from the words (a shell string with syntax in it,
//! a script file, an option this reader does not know), the chain says so and lists
//! every word that could name a program: the rules then apply the strictest decision of
//! any of them, and an allow rule covers none.

use super::resolve::basename;
use super::shellwords::{plain_words, rough_words};

/// One program a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// The program as written.
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// More arguments may follow that the words do not show (`xargs` adds its input).
    pub open_args: bool,
}

/// The programs a command runs, outermost first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Chain {
    /// Each program, the launchers first, the program they start last.
    pub steps: Vec<Step>,
    /// Why the last program cannot be known from the words, when it cannot.
    pub unknown: Option<String>,
    /// When unknown: every word that could name a program.
    pub named: Vec<String>,
}

impl Chain {
    /// Whether the command is one program with nothing launched through it.
    pub fn is_direct(&self) -> bool {
        self.steps.len() == 1 && self.unknown.is_none()
    }
}

/// How far launchers are followed (`env env env … x`).
const MAX_DEPTH: usize = 16;

/// The programs `words` runs. `name_of(word)` gives the real name of the program a
/// word resolves to (a link named `ls` pointing at `env` is `env`), when known.
pub(crate) fn chain(words: &[String], name_of: &dyn Fn(&str) -> Option<String>) -> Chain {
    let mut out = Chain::default();
    let mut cur: Vec<String> = words.to_vec();
    let mut open_args = false;
    for _ in 0..MAX_DEPTH {
        let Some(first) = cur.first().cloned() else { break };
        let args = cur[1..].to_vec();
        out.steps.push(Step { name: first.clone(), args: args.clone(), open_args });
        let real = name_of(&first);
        let through = [real.as_deref(), Some(basename(&first))]
            .into_iter()
            .flatten()
            .map(|n| look_through(n, &args))
            .find(|t| !matches!(t, Through::NotLauncher))
            .unwrap_or(Through::NotLauncher);
        match through {
            Through::NotLauncher | Through::Nothing => return out,
            Through::Program { words, open } => {
                open_args |= open;
                cur = words;
            }
            Through::Unknown(why) => {
                out.unknown = Some(format!("`{first}` {why}"));
                out.named = args.iter().flat_map(|a| rough_words(a)).collect();
                return out;
            }
        }
    }
    if !cur.is_empty() {
        out.unknown = Some(format!("launchers nest more than {MAX_DEPTH} deep"));
        out.named = cur;
    }
    out
}

/// What a launcher runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Through {
    /// Not a launcher: the program itself is what runs.
    NotLauncher,
    /// A launcher that, with these arguments, starts nothing.
    Nothing,
    /// It starts this command (`open`: with more arguments than shown).
    Program { words: Vec<String>, open: bool },
    /// It starts something the words do not tell.
    Unknown(String),
}

fn program(words: &[String]) -> Through {
    if words.is_empty() { Through::Nothing } else { Through::Program { words: words.to_vec(), open: false } }
}

fn unknown_option(opt: &str) -> Through {
    Through::Unknown(format!("is given an option this host does not read (`{opt}`), so what it starts is not known"))
}

/// Options a launcher takes, for skipping them: those followed by a value, and those
/// that stand alone. Long options may also carry their value after `=`.
struct Options<'a> {
    with_value: &'a [&'a str],
    flags: &'a [&'a str],
    /// Single-letter options whose value may be glued on (`-n5`).
    glued: &'a [char],
}

/// The index of the first word after the options, or the option it does not know.
fn skip_options(args: &[String], o: &Options<'_>) -> Result<usize, String> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return Ok(i + 1);
        }
        if !a.starts_with('-') || a == "-" {
            return Ok(i);
        }
        let key = a.split('=').next().unwrap_or(a);
        if o.flags.contains(&a) {
            i += 1;
        } else if o.with_value.contains(&key) {
            i += if a.contains('=') { 1 } else { 2 };
        } else if a.len() > 2 && !a.starts_with("--") && o.glued.contains(&a.as_bytes()[1].into()) {
            i += 1;
        } else if a.len() > 2
            && !a.starts_with("--")
            && a[1..].chars().all(|c| o.flags.contains(&format!("-{c}").as_str()))
        {
            // Bundled single-letter flags (`-cf`).
            i += 1;
        } else {
            return Err(a.to_string());
        }
    }
    Ok(i)
}

fn after_options(args: &[String], o: &Options<'_>) -> Through {
    match skip_options(args, o) {
        Ok(i) => program(&args[i..]),
        Err(opt) => unknown_option(&opt),
    }
}

/// Shells that take a command string with `-c`.
const SHELLS: &[&str] = &[
    "sh", "bash", "rbash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "ash", "yash", "posh", "fish", "csh", "tcsh",
];

/// What the launcher `name` (its real name) runs given `args`.
fn look_through(name: &str, args: &[String]) -> Through {
    match name {
        "env" => env(args),
        "nice" => {
            let o = Options { with_value: &["-n", "--adjustment"], flags: &[], glued: &['n'] };
            // The old spelling `nice -10 cmd`.
            let skip = usize::from(
                args.first()
                    .is_some_and(|a| a.len() > 1 && a[1..].chars().all(|c| c.is_ascii_digit()) && a.starts_with('-')),
            );
            after_options(&args[skip..], &o)
        }
        "nohup" => after_options(args, &Options { with_value: &[], flags: &[], glued: &[] }),
        "timeout" => {
            let o = Options {
                with_value: &["-s", "--signal", "-k", "--kill-after"],
                flags: &["--preserve-status", "--foreground", "-v", "--verbose", "-f", "-p"],
                glued: &['s', 'k'],
            };
            match skip_options(args, &o) {
                // The first word after the options is the duration.
                Ok(i) if i < args.len() => program(&args[i + 1..]),
                Ok(_) => Through::Nothing,
                Err(opt) => unknown_option(&opt),
            }
        }
        "stdbuf" => after_options(
            args,
            &Options {
                with_value: &["-i", "-o", "-e", "--input", "--output", "--error"],
                flags: &[],
                glued: &['i', 'o', 'e'],
            },
        ),
        "setsid" => after_options(
            args,
            &Options { with_value: &[], flags: &["-c", "--ctty", "-f", "--fork", "-w", "--wait"], glued: &[] },
        ),
        "xargs" => xargs(args),
        "time" => after_options(
            args,
            &Options {
                with_value: &["-f", "--format", "-o", "--output"],
                flags: &["-p", "--portability", "-v", "--verbose", "-a", "--append", "-q", "--quiet"],
                glued: &[],
            },
        ),
        "command" => {
            if args.iter().take_while(|a| a.starts_with('-')).any(|a| a.contains('v') || a.contains('V')) {
                return Through::Nothing;
            }
            after_options(args, &Options { with_value: &[], flags: &["-p"], glued: &[] })
        }
        "exec" => {
            if args.iter().take_while(|a| a.starts_with('-')).any(|a| a.contains('a')) {
                return Through::Unknown("renames the program it starts (`-a`)".into());
            }
            after_options(args, &Options { with_value: &[], flags: &["-c", "-l", "-cl", "-lc"], glued: &[] })
        }
        "sudo" => sudo(args),
        "doas" => {
            if args.iter().any(|a| a == "-s") && args.iter().filter(|a| !a.starts_with('-')).count() == 0 {
                return Through::Unknown("starts a shell".into());
            }
            if args.iter().any(|a| a == "-C") {
                return Through::Nothing;
            }
            after_options(args, &Options { with_value: &["-u"], flags: &["-n", "-s", "-L"], glued: &[] })
        }
        "busybox" | "toybox" => match args.first() {
            Some(a) if a.starts_with('-') => Through::Nothing,
            _ => program(args),
        },
        "flock" => flock(args),
        s if SHELLS.contains(&s) => shell(args),
        _ => Through::NotLauncher,
    }
}

fn env(args: &[String]) -> Through {
    let o = Options {
        with_value: &["-u", "--unset", "-C", "--chdir", "--block-signal", "--default-signal", "--ignore-signal"],
        flags: &["-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "--list-signal-handling"],
        glued: &['u', 'C'],
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        // `-S STRING` / `--split-string=STRING`: the string's words come next.
        let split = match a {
            "-S" | "--split-string" => args.get(i + 1).map(|s| (s.clone(), i + 2)),
            _ if a.starts_with("--split-string=") => Some((a["--split-string=".len()..].to_string(), i + 1)),
            _ if a.starts_with("-S") && a.len() > 2 => Some((a[2..].to_string(), i + 1)),
            _ => None,
        };
        if let Some((s, next)) = split {
            let Some(mut words) = plain_words(&s).filter(|_| !s.contains('$')) else {
                return Through::Unknown("splits a string with expansions in it (`-S`)".into());
            };
            words.extend(args[next..].iter().cloned());
            return env(&words);
        }
        if a == "--" {
            return program(&args[i + 1..]);
        }
        if a == "-" || o.flags.contains(&a) {
            i += 1;
            continue;
        }
        if a.starts_with('-') {
            let key = a.split('=').next().unwrap_or(a);
            if o.with_value.contains(&key) {
                i += if a.contains('=') { 1 } else { 2 };
            } else if a.len() > 2 && !a.starts_with("--") && o.glued.contains(&a.as_bytes()[1].into()) {
                i += 1;
            } else {
                return unknown_option(a);
            }
            continue;
        }
        // NAME=VALUE assignments; one that changes where programs are looked up, or
        // what the loader does, makes the program unknowable.
        if let Some((name, _)) = a.split_once('=') {
            if name == "PATH" || crate::policy::process::env_never_passed(name) {
                return Through::Unknown(format!("sets `{name}` for the program it starts"));
            }
            i += 1;
            continue;
        }
        return program(&args[i..]);
    }
    Through::Nothing
}

fn xargs(args: &[String]) -> Through {
    let o = Options {
        with_value: &[
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            "-E",
            "-I",
            "-L",
            "--max-lines",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
            "--eof",
            "--replace",
        ],
        flags: &[
            "-0",
            "--null",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-p",
            "--interactive",
            "-x",
            "--exit",
            "-o",
            "--open-tty",
            "-e",
            "-i",
            "-l",
        ],
        glued: &['a', 'd', 'E', 'I', 'L', 'n', 'P', 's', 'e', 'i', 'l'],
    };
    match skip_options(args, &o) {
        // With no command, xargs runs `echo`.
        Ok(i) if i == args.len() => Through::Program { words: vec!["echo".into()], open: true },
        Ok(i) => Through::Program { words: args[i..].to_vec(), open: true },
        Err(opt) => unknown_option(&opt),
    }
}

fn sudo(args: &[String]) -> Through {
    let o = Options {
        with_value: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-C",
            "--close-from",
            "-D",
            "--chdir",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-r",
            "--role",
            "-t",
            "--type",
            "-T",
            "--command-timeout",
            "-U",
            "--other-user",
        ],
        flags: &[
            "-A",
            "--askpass",
            "-b",
            "--background",
            "-E",
            "--preserve-env",
            "-H",
            "--set-home",
            "-n",
            "--non-interactive",
            "-P",
            "--preserve-groups",
            "-S",
            "--stdin",
            "-B",
            "--bell",
            "-N",
            "--no-update",
        ],
        glued: &['u', 'g', 'C', 'D', 'h', 'p', 'r', 't', 'T', 'U'],
    };
    for a in args.iter().take_while(|a| a.starts_with('-') && *a != "--") {
        match a.as_str() {
            "-l" | "--list" | "-v" | "--validate" | "-k" | "--reset-timestamp" | "-K" | "--remove-timestamp" | "-V"
            | "--version" => return Through::Nothing,
            "-s" | "--shell" | "-i" | "--login" => return Through::Unknown("runs its command through a shell".into()),
            "-e" | "--edit" => return Through::Unknown("edits files with an editor of its choosing".into()),
            _ => {}
        }
    }
    match skip_options(args, &o) {
        Ok(i) => {
            let rest: Vec<String> =
                args[i..].iter().skip_while(|a| a.contains('=') && !a.starts_with('=')).cloned().collect();
            program(&rest)
        }
        Err(opt) => unknown_option(&opt),
    }
}

fn flock(args: &[String]) -> Through {
    let o = Options {
        with_value: &["-w", "--timeout", "-E", "--conflict-exit-code"],
        flags: &[
            "-s",
            "--shared",
            "-x",
            "-e",
            "--exclusive",
            "-u",
            "--unlock",
            "-n",
            "--nb",
            "--nonblock",
            "-o",
            "--close",
            "-F",
            "--no-fork",
            "--verbose",
        ],
        glued: &['w', 'E'],
    };
    let i = match skip_options(args, &o) {
        Ok(i) => i,
        Err(opt) => return unknown_option(&opt),
    };
    // `flock FD` locks and starts nothing; otherwise the lock file comes first.
    let Some(rest) = args.get(i + 1..) else { return Through::Nothing };
    match rest.first().map(String::as_str) {
        Some("-c") | Some("--command") => shell_string(rest.get(1).map(String::as_str).unwrap_or("")),
        _ => program(rest),
    }
}

/// A shell: `-c STRING` runs the string; a file argument runs a script; nothing else
/// reads the (closed) standard input and runs nothing.
fn shell(args: &[String]) -> Through {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-c" || (a.starts_with('-') && !a.starts_with("--") && a.contains('c')) {
            return shell_string(args.get(i + 1).map(String::as_str).unwrap_or(""));
        }
        if matches!(a, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
        } else if a.starts_with('-') || a.starts_with('+') {
            i += 1;
        } else {
            return Through::Unknown(format!("runs the script `{a}`, whose commands are not known"));
        }
    }
    Through::Nothing
}

fn shell_string(s: &str) -> Through {
    match plain_words(s) {
        Some(words) => program(&words),
        None => Through::Unknown("runs a shell string whose commands cannot be told from its words".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(words: &[&str]) -> (Vec<String>, Option<String>, Vec<String>) {
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let c = chain(&words, &|_| None);
        (c.steps.iter().map(|s| s.name.clone()).collect(), c.unknown, c.named)
    }

    #[test]
    fn launchers_are_looked_through() {
        // Each launcher, with its options, reaches `touch`.
        for cmd in [
            &["env", "touch", "c"][..],
            &["env", "-i", "A=1", "-u", "B", "touch", "c"],
            &["env", "-S", "touch c"],
            &["nice", "-n", "5", "touch", "c"],
            &["nice", "-10", "touch", "c"],
            &["nohup", "touch", "c"],
            &["timeout", "-k", "1", "5s", "touch", "c"],
            &["stdbuf", "-oL", "touch", "c"],
            &["setsid", "-f", "touch", "c"],
            &["xargs", "-0", "touch"],
            &["time", "-p", "touch", "c"],
            &["command", "touch", "c"],
            &["exec", "touch", "c"],
            &["sudo", "-u", "root", "touch", "c"],
            &["doas", "-u", "root", "touch", "c"],
            &["busybox", "touch", "c"],
            &["flock", "/tmp/l", "touch", "c"],
            &["flock", "-n", "/tmp/l", "-c", "touch c"],
            &["sh", "-c", "touch c"],
            &["bash", "-ec", "touch c"],
            &["env", "nice", "timeout", "1", "sh", "-c", "exec touch c"],
        ] {
            let (steps, unknown, _) = names(cmd);
            assert_eq!(steps.last().map(String::as_str), Some("touch"), "{cmd:?}: {steps:?} {unknown:?}");
            assert_eq!(unknown, None, "{cmd:?}");
        }
    }

    #[test]
    fn what_cannot_be_known_is_said_with_every_candidate() {
        // A shell string with syntax: unknown, and `touch` is among the candidates.
        let (_, unknown, named) = names(&["sh", "-c", "true && touch c"]);
        assert!(unknown.is_some() && named.iter().any(|w| w == "touch"), "{named:?}");
        // A script file.
        assert!(names(&["bash", "script.sh"]).1.is_some());
        // An option the reader does not know.
        assert!(names(&["env", "--frobnicate", "touch"]).1.is_some());
        // A PATH set for the program.
        assert!(names(&["env", "PATH=/tmp/x", "touch"]).1.is_some());
        // A renamed argv[0].
        assert!(names(&["exec", "-a", "ls", "touch"]).1.is_some());
    }

    #[test]
    fn launchers_that_start_nothing_and_programs_that_are_not_launchers() {
        // `env` alone prints the environment; `command -v` looks a name up.
        assert_eq!(names(&["env"]).0, ["env"]);
        assert_eq!(names(&["command", "-v", "touch"]).0, ["command"]);
        // An ordinary program is one step, whatever its arguments say.
        assert_eq!(names(&["ls", "touch"]).0, ["ls"]);
        // A link whose real name is `env` is a launcher.
        let words: Vec<String> = ["./myls", "touch", "c"].iter().map(|s| s.to_string()).collect();
        let c = chain(&words, &|w| (w == "./myls").then(|| "env".to_string()));
        assert_eq!(c.steps.len(), 2);
        // xargs adds arguments of its own.
        let words: Vec<String> = ["xargs", "git", "push"].iter().map(|s| s.to_string()).collect();
        assert!(chain(&words, &|_| None).steps[1].open_args);
    }
}
