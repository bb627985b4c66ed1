//! Python: pytest's configuration in any of its homes, the package manager (uv,
//! poetry, pip), test files and whether they use unittest, and tox.

use super::line_of;
use super::{Dir, suggestion};
use crate::*;
use cheng_sdk::host;

/// Look for this ecosystem in `dir` (at `rel`) and add what is found to `d`.
pub(super) fn detect(dir: &Dir, rel: &str, d: &mut Detected) {
    let mut py_ev: Vec<Evidence> = Vec::new();
    let mut pytest_conf = None::<&str>;
    let mut py_pm = "pip";
    if let Some(text) = dir.read("pyproject.toml") {
        if text.contains("[tool.pytest.ini_options]") {
            py_ev.push(dir.ev(
                "pyproject.toml",
                "[tool.pytest.ini_options]: pytest configuration",
                Some("[tool.pytest.ini_options]"),
            ));
            pytest_conf = Some("high");
        } else if text.contains("pytest") {
            py_ev.push(dir.ev("pyproject.toml", "pytest is listed", Some("pytest")));
            pytest_conf.get_or_insert("medium");
        } else {
            py_ev.push(dir.ev("pyproject.toml", "a Python project", None));
        }
        if text.contains("[tool.poetry") {
            py_pm = "poetry";
        }
    }
    if dir.has("uv.lock") {
        py_pm = "uv";
        py_ev.push(dir.ev("uv.lock", "uv lock file", None));
    } else if dir.has("poetry.lock") {
        py_pm = "poetry";
        py_ev.push(dir.ev("poetry.lock", "poetry lock file", None));
    }
    if dir.has("pytest.ini") {
        py_ev.push(dir.ev("pytest.ini", "pytest configuration", None));
        pytest_conf = Some("high");
    }
    if let Some(text) = dir.read("setup.cfg")
        && text.contains("[tool:pytest]")
    {
        py_ev.push(dir.ev("setup.cfg", "[tool:pytest]: pytest configuration", Some("[tool:pytest]")));
        pytest_conf = Some("high");
    }
    let mut tox = None;
    if let Some(text) = dir.read("tox.ini") {
        if text.contains("[pytest]") {
            py_ev.push(dir.ev("tox.ini", "[pytest]: pytest configuration", Some("[pytest]")));
            pytest_conf = Some("high");
        }
        if text.contains("[tox]") {
            tox = Some(dir.ev("tox.ini", "[tox]: tox environments", Some("[tox]")));
        }
    }
    if dir.has("conftest.py") {
        py_ev.push(dir.ev("conftest.py", "pytest fixtures", None));
        pytest_conf.get_or_insert("medium");
    }
    // Test files: test_*.py here or in tests/.
    let mut test_files: Vec<String> =
        dir.names.iter().filter(|n| n.starts_with("test") && n.ends_with(".py")).map(|n| dir.path(n)).collect();
    if dir.has("tests")
        && let Ok(t) = Dir::open(&dir.path("tests"))
    {
        test_files.extend(t.names.iter().filter(|n| n.starts_with("test") && n.ends_with(".py")).map(|n| t.path(n)));
    }
    let is_python = !py_ev.is_empty() || !test_files.is_empty() || dir.has("setup.py") || dir.has("requirements.txt");
    if is_python {
        d.add_type("python", py_pm);
        let mut uses_unittest = None;
        let mut uses_pytest = false;
        for f in test_files.iter().take(20) {
            if let Ok(b) = host::read_file(f, MAX_MANIFEST) {
                let t = String::from_utf8_lossy(&b);
                if uses_unittest.is_none()
                    && let Some(l) = line_of(&t, "import unittest")
                {
                    uses_unittest = Some(Evidence { file: f.clone(), line: Some(l), text: "imports unittest".into() });
                }
                uses_pytest |= t.contains("import pytest") || t.contains("def test_");
            }
        }
        if let Some(f) = test_files.first() {
            py_ev.push(Evidence { file: f.clone(), line: None, text: format!("{} test file(s)", test_files.len()) });
        }
        let (cmd, pre): (&str, Vec<&str>) = match py_pm {
            "poetry" => ("poetry", vec!["run", "pytest"]),
            "uv" => ("uv", vec!["run", "pytest"]),
            _ => ("python3", vec!["-m", "pytest"]),
        };
        match (pytest_conf, &uses_unittest) {
            (Some(conf), _) => d.suggested_commands.push(suggestion("pytest", cmd, &pre, rel, conf, py_ev.clone())),
            (None, Some(u)) if !uses_pytest => {
                let mut ev = py_ev.clone();
                ev.push(u.clone());
                d.suggested_commands.push(suggestion("unittest", "python3", &["-m", "unittest"], rel, "medium", ev));
            }
            (None, _) if !test_files.is_empty() => {
                d.suggested_commands.push(suggestion("pytest", cmd, &pre, rel, "medium", py_ev.clone()));
            }
            _ => {}
        }
        if let Some(t) = tox {
            d.suggested_commands.push(suggestion("tox", "tox", &[], rel, "medium", vec![t]));
        }
    }
}
