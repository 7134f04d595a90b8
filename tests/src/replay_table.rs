//! Reading what `kreplay replay` prints on stdout: the program's own lines, then the per-kernel
//! table (up to a blank line), then the restore table and the closing `kreplay:` lines. Columns
//! are found by their header names.
use std::collections::HashMap;

/// One row of the per-kernel table, with the totals over the kernel's dispatches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Dispatches (launches) seen.
    pub dispatches: u64,
    /// Passes run over all dispatches (replayed dispatches × passes per dispatch).
    pub passes: u64,
    /// Bytes per snapshot (the mean over the kernel's snapshots, as the table shows it).
    pub snapshot_bytes: u64,
    /// Dispatches found nondeterministic.
    pub nondet: u64,
    /// The declines column (`-` when none).
    pub declines: String,
}

/// The per-kernel table's rows by kernel name, each a map from column name to its text (the
/// declines column keeps its spaces).
pub fn columns(stdout: &str) -> HashMap<String, HashMap<String, String>> {
    let mut rows = HashMap::new();
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("kernel "));
    let Some(header) = lines.next() else {
        return rows;
    };
    let names: Vec<&str> = header.split_whitespace().collect();
    for l in lines.take_while(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < names.len() {
            continue;
        }
        let mut row: HashMap<String, String> = names
            .iter()
            .zip(&f)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        row.insert("declines".into(), f[names.len() - 1..].join(" "));
        rows.insert(f[0].to_owned(), row);
    }
    rows
}

/// The per-kernel table's rows by kernel name.
pub fn table(stdout: &str) -> HashMap<String, Row> {
    columns(stdout)
        .into_iter()
        .map(|(k, c)| {
            let n = |name: &str| -> u64 {
                c[name]
                    .parse()
                    .unwrap_or_else(|_| panic!("{k}: {name} {:?}", c[name]))
            };
            let replayed = n("replayed");
            let per_dispatch = match c["passes"].as_str() {
                "-" => 0,
                p => p
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("{k}: passes per dispatch vary: {p}")),
            };
            let row = Row {
                dispatches: n("dispatches"),
                passes: replayed * per_dispatch,
                snapshot_bytes: n("snapshot_bytes"),
                nondet: n("nondet"),
                declines: c["declines"].clone(),
            };
            (k, row)
        })
        .collect()
}

/// The program's own output lines (everything before kreplay's table).
pub fn app_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .take_while(|l| !l.starts_with("kernel ") && !l.starts_with("kreplay: wrote"))
        .map(str::to_owned)
        .collect()
}
