//! Reading figures out of a program's output and summarizing them, for the benches.

/// The number after `key` on the first line that starts with it.
pub(crate) fn field(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

/// The middle value (the upper one of an even count).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
