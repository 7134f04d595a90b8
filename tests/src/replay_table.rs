//! Reading what `kreplay replay` prints on stdout: the program's own lines, then the per-kernel
//! table (up to a blank line), then the restore table.
use std::collections::HashMap;

/// One row of the per-kernel table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Dispatches (launches) seen.
    pub dispatches: u64,
    /// Passes run.
    pub passes: u64,
    /// Snapshot bytes (sum).
    pub snapshot_bytes: u64,
    /// Dispatches found nondeterministic.
    pub nondet: u64,
    /// The declines column (`-` when none).
    pub declines: String,
}

/// The per-kernel table's rows by kernel name.
pub fn table(stdout: &str) -> HashMap<String, Row> {
    let mut rows = HashMap::new();
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("kernel "));
    lines.next();
    for l in lines.take_while(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        rows.insert(
            f[0].to_owned(),
            Row {
                dispatches: f[1].parse().unwrap(),
                passes: f[2].parse().unwrap(),
                snapshot_bytes: f[6].parse().unwrap(),
                nondet: f[8].parse().unwrap(),
                declines: f[9..].join(" "),
            },
        );
    }
    rows
}

/// The program's own output lines (everything before kreplay's table).
pub fn app_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .take_while(|l| !l.starts_with("kernel ") && !l.starts_with("kreplay: wrote"))
        .map(str::to_owned)
        .collect()
}
