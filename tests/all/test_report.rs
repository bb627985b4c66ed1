//! The test-output parsers on recorded output of real runs (tests/fixtures/runners):
//! counts, and the name, file, line and message of failures; absent counts where the
//! output does not say them.

use cheng_test_report::{Runner, parse, runner_hint};

use crate::util;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(util::repo().join("tests/fixtures/runners").join(name)).unwrap()
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn cargo_test() {
    let r = parse(runner_hint("cargo", &args(&["test"])), &fixture("cargo_pass.txt"), "");
    assert_eq!(
        (r.runner, r.passed, r.failed),
        (Some(Runner::CargoTest), Some(3), Some(0)),
        "unit + integration + doctest"
    );
    assert!(r.failures.is_empty());

    let r = parse(runner_hint("cargo", &args(&["test"])), &fixture("cargo_fail.txt"), "");
    assert_eq!((r.passed, r.failed), (Some(1), Some(2)));
    let f = &r.failures[0];
    assert_eq!((f.name.as_str(), f.file.as_deref(), f.line), ("tests::fails", Some("src/lib.rs"), Some(8)));
    assert!(f.message.contains("two and two"), "{}", f.message);
    let p = r.failures.iter().find(|f| f.name == "tests::panics").unwrap();
    assert_eq!((p.line, p.message.as_str()), (Some(10), "boom here"));
}

#[test]
fn cargo_compile_error_has_no_counts() {
    let r = parse(Some(Runner::CargoTest), "", &fixture("cargo_compile_error.txt"));
    assert_eq!((r.passed, r.failed), (None, None));
    let f = &r.failures[0];
    assert_eq!((f.name.as_str(), f.file.as_deref(), f.line), ("compile error", Some("src/lib.rs"), Some(1)));
    assert!(f.message.contains("cannot add"), "{}", f.message);
    assert!(r.note.unwrap().contains("build failed"));
}

#[test]
fn a_run_cut_short_has_no_counts() {
    let r = parse(Some(Runner::CargoTest), &fixture("cargo_timeout.txt"), "");
    assert_eq!((r.passed, r.failed), (None, None));
    assert!(r.note.is_some());
}

#[test]
fn nextest_is_not_confused_with_cargo_test() {
    // Its per-test output holds "test result: … 0 passed; 1 failed" lines; only the
    // Summary line counts.
    let text = fixture("nextest_fail.txt");
    for hint in [runner_hint("cargo", &args(&["nextest", "run"])), None] {
        let r = parse(hint, &text, "");
        assert_eq!((r.runner, r.passed, r.failed), (Some(Runner::Nextest), Some(1), Some(2)), "{hint:?}");
        let f = r.failures.iter().find(|f| f.name == "tests::fails").unwrap();
        assert_eq!((f.file.as_deref(), f.line), (Some("src/lib.rs"), Some(8)));
    }
}

#[test]
fn pytest() {
    let r = parse(runner_hint("python3", &args(&["-m", "pytest"])), &fixture("pytest_pass.txt"), "");
    assert_eq!((r.passed, r.failed), (Some(3), Some(0)));
    let r = parse(None, &fixture("pytest_fail.txt"), "");
    assert_eq!((r.runner, r.passed, r.failed), (Some(Runner::Pytest), Some(1), Some(2)));
    let f = &r.failures[0];
    assert_eq!(
        (f.name.as_str(), f.file.as_deref(), f.line, f.message.as_str()),
        ("test_calc.py::test_fails", Some("test_calc.py"), Some(8), "assert 4 == 5")
    );
    assert_eq!(r.failures[1].line, Some(11));
    assert!(r.failures[1].message.contains("ValueError: bad value"));
    // A module that does not import is an error, counted as a failure.
    let r = parse(Some(Runner::Pytest), &fixture("pytest_collect_error.txt"), "");
    assert_eq!((r.passed, r.failed), (Some(0), Some(1)));
    assert_eq!(r.failures[0].file.as_deref(), Some("test_broken.py"));
    assert!(r.failures[0].message.contains("SyntaxError"), "{}", r.failures[0].message);
}

#[test]
fn jest() {
    let r = parse(runner_hint("npx", &args(&["jest"])), &fixture("jest_pass.txt"), "");
    assert_eq!((r.passed, r.failed), (Some(2), Some(0)));
    // npm test hides the runner; its output names it.
    let r = parse(runner_hint("npm", &args(&["test"])), "", &fixture("jest_fail.txt"));
    assert_eq!((r.runner, r.passed, r.failed), (Some(Runner::Jest), Some(1), Some(1)));
    let f = &r.failures[0];
    assert_eq!((f.name.as_str(), f.file.as_deref(), f.line), ("math › fails", Some("sum.test.js"), Some(4)));
    assert!(f.message.contains("toBe"), "{}", f.message);
}

#[test]
fn vitest() {
    let r = parse(runner_hint("npx", &args(&["vitest", "run"])), &fixture("vitest_pass.txt"), "");
    assert_eq!((r.passed, r.failed), (Some(2), Some(0)));
    let r = parse(None, &fixture("vitest_fail.txt"), "");
    assert_eq!((r.runner, r.passed, r.failed), (Some(Runner::Vitest), Some(1), Some(1)));
    let f = &r.failures[0];
    assert_eq!(
        (f.name.as_str(), f.file.as_deref(), f.line),
        ("sum.test.mjs > math > fails", Some("sum.test.mjs"), Some(5))
    );
    assert!(f.message.contains("expected 4 to be 5"));
    // A suite that fails to load: no counts, the file and the reason.
    let r = parse(Some(Runner::Vitest), &fixture("vitest_suite_error.txt"), "");
    assert_eq!((r.passed, r.failed), (None, None));
    assert_eq!(r.failures[0].file.as_deref(), Some("sum.test.js"));
    assert!(r.failures[0].message.contains("cannot be imported"), "{}", r.failures[0].message);
}

#[test]
fn go_test() {
    let r = parse(runner_hint("go", &args(&["test", "-v", "./..."])), &fixture("go_fail.txt"), "");
    assert_eq!((r.passed, r.failed), (Some(2), Some(1)));
    let f = &r.failures[0];
    assert_eq!((f.name.as_str(), f.file.as_deref(), f.line), ("TestSub", Some("calc_test.go"), Some(14)));
    assert!(f.message.contains("want 2"));
}

#[test]
fn unknown_output_has_no_counts() {
    let r = parse(None, "hello\nworld\n", "");
    assert_eq!((r.runner, r.passed, r.failed), (None, None, None));
    assert!(r.note.unwrap().contains("not from a test runner"));
}
