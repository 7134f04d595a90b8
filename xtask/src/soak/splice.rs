//! Keeping the results of soaks not rerun: `--only` replaces its soaks' sections of
//! `docs/bench/soak.md` and keeps the others, each section naming the run it comes from.

/// The line each section carries after its heading: which run wrote it.
const RUN: &str = "Run: ";

/// A results file cut at its `## ` headings: the text before the first, then the sections.
fn sections(text: &str) -> (String, Vec<String>) {
    let mut pre = String::new();
    let mut out: Vec<String> = vec![];
    for line in text.split_inclusive('\n') {
        if line.starts_with("## ") {
            out.push(String::new());
        }
        out.last_mut().unwrap_or(&mut pre).push_str(line);
    }
    (pre, out)
}

/// What names a section across runs: its heading up to the command's closing backtick
/// (``## `kreplay trace --all` ``), whatever the minutes after it.
fn key(section: &str) -> &str {
    let heading = section.lines().next().unwrap_or("");
    match heading.match_indices('`').nth(1) {
        Some((i, _)) => &heading[..=i],
        None => heading,
    }
}

/// `section` with `run` as the line after its heading, unless it names a run already.
fn with_run(section: &str, run: &str) -> String {
    let (heading, rest) = section.split_once('\n').unwrap_or((section, ""));
    let rest = rest.trim();
    if rest.starts_with(RUN) {
        return format!("{heading}\n\n{rest}\n\n");
    }
    format!("{heading}\n\n{RUN}{run}\n\n{rest}\n\n")
}

/// The run `header` (a results file's opening) describes: its date and command.
fn header_run(header: &str) -> String {
    let date = header
        .lines()
        .find_map(|l| l.strip_prefix("Date: "))
        .unwrap_or("unknown date");
    let command = header
        .lines()
        .find_map(|l| l.strip_prefix("Produced by `")?.split('`').next())
        .unwrap_or("cargo xtask soak");
    format!("{date}, `{command}`.")
}

/// The results file after a run: `new`'s opening, then `old`'s sections in their order with
/// the ones `new` has replaced, then `new`'s other sections; every section keeps a line saying
/// which run wrote it.
pub fn splice(old: &str, new: &str) -> String {
    let (old_pre, old_sections) = sections(old);
    let (new_pre, new_sections) = sections(new);
    let (old_run, new_run) = (header_run(&old_pre), header_run(&new_pre));
    let mut out = new_pre;
    let mut used = vec![false; new_sections.len()];
    for s in &old_sections {
        match new_sections.iter().position(|n| key(n) == key(s)) {
            Some(i) => {
                used[i] = true;
                out.push_str(&with_run(&new_sections[i], &new_run));
            }
            None => out.push_str(&with_run(s, &old_run)),
        }
    }
    for (s, _) in new_sections.iter().zip(&used).filter(|(_, u)| !**u) {
        out.push_str(&with_run(s, &new_run));
    }
    format!("{}\n", out.trim_end())
}

#[cfg(test)]
mod tests {
    use super::splice;

    const OLD: &str = "# kreplay soak\n\nDate: 2026-12-01 10:00 UTC\n\n\
        Produced by `cargo xtask soak --minutes 30` (as root).\n\n\
        ## `kreplay trace --all`, 17.1 min\n\nold trace\n\n\
        ## `kreplay audit`, 30 min\n\nold audit\n\n\
        ## `kreplay replay --probes` over 10000 dispatches\n\nold replay\n\nLoad at the end.\n";

    const NEW: &str = "# kreplay soak\n\nDate: 2026-12-02 05:00 UTC\n\n\
        Produced by `cargo xtask soak --minutes 30 --only trace` (as root).\n\n\
        ## `kreplay trace --all`, 30.0 min\n\nnew trace\n\nLoad now.\n";

    #[test]
    fn a_rerun_soak_replaces_its_section_and_the_others_keep_theirs_with_their_run() {
        assert_eq!(
            splice(OLD, NEW),
            "# kreplay soak\n\nDate: 2026-12-02 05:00 UTC\n\n\
             Produced by `cargo xtask soak --minutes 30 --only trace` (as root).\n\n\
             ## `kreplay trace --all`, 30.0 min\n\n\
             Run: 2026-12-02 05:00 UTC, `cargo xtask soak --minutes 30 --only trace`.\n\n\
             new trace\n\nLoad now.\n\n\
             ## `kreplay audit`, 30 min\n\n\
             Run: 2026-12-01 10:00 UTC, `cargo xtask soak --minutes 30`.\n\n\
             old audit\n\n\
             ## `kreplay replay --probes` over 10000 dispatches\n\n\
             Run: 2026-12-01 10:00 UTC, `cargo xtask soak --minutes 30`.\n\n\
             old replay\n\nLoad at the end.\n"
        );
    }

    #[test]
    fn a_section_that_names_its_run_keeps_it_and_a_new_soak_is_appended() {
        let once = splice(OLD, NEW);
        let audit_only = "# kreplay soak\n\nDate: 2026-12-03 01:00 UTC\n\n\
            Produced by `cargo xtask soak --only audit` (as root).\n\n\
            ## `kreplay audit`, 30 min\n\nnewer audit\n";
        let twice = splice(&once, audit_only);
        assert!(twice.contains(
            "## `kreplay trace --all`, 30.0 min\n\n\
             Run: 2026-12-02 05:00 UTC, `cargo xtask soak --minutes 30 --only trace`.\n\n"
        ));
        assert!(twice.contains(
            "## `kreplay audit`, 30 min\n\n\
             Run: 2026-12-03 01:00 UTC, `cargo xtask soak --only audit`.\n\nnewer audit\n\n"
        ));
        assert_eq!(twice.matches("## ").count(), 3);
        let extra = splice("# kreplay soak\n\nDate: d\n\n", NEW);
        assert!(extra.ends_with("new trace\n\nLoad now.\n"));
    }
}
