//! No crate of the workspace has a cycle among its files: a module that another module imports
//! must not import it back, directly or through others. Paths are read from the sources
//! (`use crate::…`, `use super::…`, and `crate::`/`super::` paths in code; test modules and
//! comments left out) and resolved to the longest prefix that names a file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`engine::replay`) → file, for every `.rs` file under `src`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<String, PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, src, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if parts.last().is_some_and(|l| l == "mod") {
                    parts.pop();
                }
                if parts == ["lib"] || parts == ["main"] {
                    parts.clear();
                }
                out.insert(parts.join("::"), p);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The source without comments and without a trailing `#[cfg(test)] mod tests` block.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path (as segments) the code names through `crate`, `super` or `self`, with `use`
/// groups (`use super::a::{b, c::d}`) expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes[i..bytes.len().min(i + 7)].iter().collect();
        let starts = ["crate", "super", "self"]
            .iter()
            .any(|k| rest.starts_with(k) && rest[k.len()..].starts_with("::"));
        let boundary = i == 0 || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_');
        if !(starts && boundary) {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut depth = 0;
        while j < bytes.len() {
            let c = bytes[j];
            if c == '{' {
                depth += 1;
            } else if c == '}' {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            } else if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':') {
                break;
            }
            j += 1;
        }
        let text: String = bytes[i..j].iter().collect();
        expand(&text, &mut out);
        i = j.max(i + 1);
    }
    out
}

/// `a::b::{c, d::{e}}` → `[a,b,c]`, `[a,b,d,e]`.
fn expand(text: &str, out: &mut Vec<Vec<String>>) {
    let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    match text.find('{') {
        None => out.push(
            text.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        Some(b) => {
            let prefix = text[..b].trim_end_matches("::");
            let inner = &text[b + 1..text.rfind('}').unwrap_or(text.len())];
            let mut items = Vec::new();
            let (mut depth, mut start) = (0, 0);
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&inner[start..k]);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            items.push(&inner[start..]);
            for item in items.into_iter().filter(|s| !s.is_empty()) {
                let item = item.split(" as ").next().unwrap_or(item);
                if item == "self" {
                    expand(prefix, out);
                } else {
                    expand(&format!("{prefix}::{item}"), out);
                }
            }
        }
    }
}

/// The module a path from module `cur` names: the longest prefix that is a file's module.
fn resolve(cur: &[String], path: &[String], files: &BTreeMap<String, PathBuf>) -> Option<String> {
    let (mut base, mut segs): (Vec<String>, &[String]) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (cur.to_vec(), &path[1..]),
        "super" => (cur[..cur.len().saturating_sub(1)].to_vec(), &path[1..]),
        _ => return None,
    };
    while segs.first().is_some_and(|s| s == "super") {
        base.pop();
        segs = &segs[1..];
    }
    (0..=segs.len()).rev().find_map(|n| {
        let m: Vec<String> = base.iter().chain(&segs[..n]).cloned().collect();
        let m = m.join("::");
        files.contains_key(&m).then_some(m)
    })
}

/// The cycles (strongly connected components of two or more files) among `src`'s modules.
fn cycles(src: &Path) -> Vec<Vec<String>> {
    let files = modules(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, p) in &files {
        let cur: Vec<String> = if m.is_empty() {
            Vec::new()
        } else {
            m.split("::").map(str::to_owned).collect()
        };
        let text = std::fs::read_to_string(p).unwrap();
        let targets = edges.entry(m.clone()).or_default();
        for path in paths(&code(&text)) {
            if let Some(t) = resolve(&cur, &path, &files)
                && &t != m
                && !t.is_empty()
            {
                targets.insert(t);
            }
        }
    }
    // Tarjan's strongly connected components.
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        out: Vec<Vec<String>>,
    }
    fn visit(s: &mut State<'_>, v: &str) {
        let n = s.index.len();
        s.index.insert(v.to_owned(), n);
        s.low.insert(v.to_owned(), n);
        s.stack.push(v.to_owned());
        s.on.insert(v.to_owned());
        let next: Vec<String> = s.edges.get(v).into_iter().flatten().cloned().collect();
        for w in next {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn no_crate_has_a_cycle_among_its_files() {
    for krate in ["kreplay-tool", "kreplay-cli", "kreplay-common", "xtask"] {
        let found = cycles(&root().join(krate).join("src"));
        assert!(found.is_empty(), "{krate}: module cycles {found:?}");
    }
}

#[test]
fn the_reader_finds_a_cycle_through_a_use_group_and_a_path_in_code() {
    let dir = std::env::temp_dir().join(format!("kreplay-modgraph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod c;\nuse crate::b::{x, y as z};\n").unwrap();
    // c reaches b through a path in code, b reaches a's child c through `super`.
    std::fs::write(dir.join("a/c.rs"), "fn f() { super::super::b::g(); }\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "// use crate::a; (a comment: not an edge)\nuse super::a::c::f;\n",
    )
    .unwrap();
    std::fs::write(dir.join("d.rs"), "use crate::b;\n").unwrap();
    let found = cycles(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found, vec![vec!["a::c".to_string(), "b".to_string()]]);
}
