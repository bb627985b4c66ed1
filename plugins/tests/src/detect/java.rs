//! Java: Maven (`pom.xml`, its wrapper and modules) and Gradle (its build files and
//! wrapper).

use super::line_of;
use super::{Dir, suggestion};
use crate::*;

/// Look for this ecosystem in `dir` (at `rel`) and add what is found to `d`.
pub(super) fn detect(dir: &Dir, rel: &str, d: &mut Detected) {
    if dir.has("pom.xml") {
        d.add_type("java", "maven");
        let (cmd, ev2) =
            if dir.has("mvnw") { ("./mvnw", Some(dir.ev("mvnw", "Maven wrapper", None))) } else { ("mvn", None) };
        let mut ev = vec![dir.ev("pom.xml", "Maven project", None)];
        ev.extend(ev2);
        d.suggested_commands.push(suggestion("maven", cmd, &["test"], rel, "high", ev));
        if let Some(t) = dir.read("pom.xml")
            && let Some(l) = line_of(&t, "<modules>")
        {
            let members = t
                .lines()
                .filter_map(|l| l.trim().strip_prefix("<module>"))
                .map(|m| m.trim_end_matches("</module>").to_string())
                .collect();
            d.monorepo.get_or_insert(Monorepo {
                kind: "maven".into(),
                members,
                evidence: Evidence { file: dir.path("pom.xml"), line: Some(l), text: "<modules>".into() },
            });
        }
    }
    let gradle_file =
        ["build.gradle.kts", "build.gradle", "settings.gradle.kts", "settings.gradle"].into_iter().find(|f| dir.has(f));
    if let Some(f) = gradle_file {
        d.add_type("java", "gradle");
        let (cmd, ev2) = if dir.has("gradlew") {
            ("./gradlew", Some(dir.ev("gradlew", "Gradle wrapper", None)))
        } else {
            ("gradle", None)
        };
        let mut ev = vec![dir.ev(f, "Gradle build", None)];
        ev.extend(ev2);
        d.suggested_commands.push(suggestion("gradle", cmd, &["test"], rel, "high", ev));
    }
}
