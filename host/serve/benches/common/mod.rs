//! Helpers shared by the benchmarks.

use std::time::Duration;

/// The median of `v`.
pub fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One line comparing `a` (the measured path) with `b` (its baseline): both medians, the
/// overhead and the ratio.
#[allow(dead_code)]
pub fn report(what: &str, base: &str, a: Vec<Duration>, b: Vec<Duration>) {
    let (a, b) = (p50(a), p50(b));
    println!(
        "{what}: p50 {:.3} ms; {base} p50 {:.3} ms; overhead {:.3} ms ({:.2}x)",
        ms(a),
        ms(b),
        ms(a) - ms(b),
        ms(a) / ms(b)
    );
}
