//! `docs/bench/soak.md` as one section per soak (trace, audit, replay), each saying when and how
//! it was run: a run replaces the sections of the soaks it ran and keeps the others as they
//! were, so `--only audit` leaves the trace and replay results in place.

use super::Soak;

/// The soaks in the order of their sections.
const ORDER: [Soak; 3] = [Soak::Trace, Soak::Audit, Soak::Replay];

/// How soak `s`'s section begins (its heading goes on with the soak's size).
pub fn heading(s: Soak) -> &'static str {
    match s {
        Soak::Trace => "## `kreplay trace",
        Soak::Audit => "## `kreplay audit",
        Soak::Replay => "## `kreplay replay",
    }
}

/// The section of soak `s` when it failed, `why` said.
pub fn failed(s: Soak, why: &str) -> String {
    format!("{}`: **the soak failed** ({why}).\n\n", heading(s))
}

/// The paragraph under each heading: when, with which arguments, on which machine.
pub fn run_line(date: &str, args: &str, machine: &str) -> String {
    format!("Run: {date}, `cargo xtask soak {args}` (as root), on {machine}.")
}

/// `section` with `run` (from [`run_line`]) as the paragraph under its heading.
pub fn with_run_line(section: &str, run: &str) -> String {
    match section.split_once('\n') {
        Some((head, rest)) => format!("{head}\n\n{run}\n{rest}"),
        None => format!("{section}\n\n{run}\n\n"),
    }
}

/// The results file: `header`, then for each soak the section this run made (`new`), else
/// the one `old` (the file as it was) has, if any. A kept section from before sections said
/// how they were run gets its [`run_line`] from `old`'s header, and loses that header's
/// file-wide load-average lines.
pub fn update(old: &str, header: &str, new: &[(Soak, String)]) -> String {
    let old = format!("\n{old}");
    let mut parts = old.split("\n## ");
    let preamble = parts.next().unwrap_or("");
    let kept: Vec<String> = parts.map(|p| format!("## {p}")).collect();
    let old_run = old_run_line(preamble.trim_start());
    let mut out = header.to_string();
    for s in ORDER {
        if let Some((_, text)) = new.iter().find(|(n, _)| *n == s) {
            out.push_str(text);
        } else if let Some(text) = kept.iter().find(|t| t.starts_with(heading(s))) {
            out.push_str(&migrated(text, old_run.as_deref()));
        }
    }
    out
}

/// The run line an old-style header (`Machine:`, `Date:`, `Produced by `…``) implies.
fn old_run_line(preamble: &str) -> Option<String> {
    let field = |name: &str| {
        preamble
            .split("\n\n")
            .find_map(|p| p.trim().strip_prefix(name).map(str::to_string))
    };
    let machine = field("Machine: ")?;
    let date = field("Date: ")?;
    let produced = field("Produced by `cargo xtask soak ")?;
    let args = produced.split('`').next()?;
    Some(run_line(&date, args.trim(), &machine))
}

/// A kept section with a run line (`old_run`, when it has none) and without the old file-wide
/// load-average paragraphs; it ends with one blank line.
fn migrated(section: &str, old_run: Option<&str>) -> String {
    let mut paras: Vec<&str> = section
        .trim_end()
        .split("\n\n")
        .filter(|p| {
            !p.starts_with("Load average at the start:")
                && !p.starts_with("Load average at the end:")
        })
        .collect();
    if let Some(run) = old_run
        && !paras.iter().any(|p| p.starts_with("Run: "))
    {
        paras.insert(1.min(paras.len()), run);
    }
    paras.join("\n\n") + "\n\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "# kreplay soak\n\nMachine: 2 cores\n\nDate: 2026-12-02 01:44 UTC\n\n\
        Produced by `cargo xtask soak --minutes 30 --rate 220000` (as root, not in CI). Rules.\n\n\
        Load average at the start: 1 2 3 (2 cores shared with other work).\n\n\
        ## `kreplay trace --all`, 17.1 min\n\nTrace results.\n\n```\nclosing\n```\n\n\
        ## `kreplay audit`, 30 min, scraped every second by Prometheus\n\nOld audit.\n\n\
        ## `kreplay replay --probes` over 10000 dispatches\n\nReplay results.\n\n\
        Load average at the end: 4 5 6 (2 cores shared with other work).\n";

    #[test]
    fn a_run_of_one_soak_replaces_its_section_and_keeps_the_others() {
        let run = run_line(
            "2026-12-02 05:00 UTC",
            "--minutes 30 --only audit",
            "2 cores",
        );
        let audit = with_run_line("## `kreplay audit`, 30 min\n\nNew audit.\n\n", &run);
        let got = update(OLD, "# kreplay soak\n\nRules.\n\n", &[(Soak::Audit, audit)]);
        let old_run = "Run: 2026-12-02 01:44 UTC, `cargo xtask soak --minutes 30 --rate 220000` \
            (as root), on 2 cores.";
        assert_eq!(
            got,
            format!(
                "# kreplay soak\n\nRules.\n\n\
                 ## `kreplay trace --all`, 17.1 min\n\n{old_run}\n\nTrace results.\n\n```\nclosing\n```\n\n\
                 ## `kreplay audit`, 30 min\n\nRun: 2026-12-02 05:00 UTC, `cargo xtask soak \
                 --minutes 30 --only audit` (as root), on 2 cores.\n\nNew audit.\n\n\
                 ## `kreplay replay --probes` over 10000 dispatches\n\n{old_run}\n\nReplay results.\n\n"
            )
        );
        // Run again over its own output: the kept sections stay exactly as they are.
        let failed = with_run_line(&failed(Soak::Audit, "exit status: 1"), "Run: later.");
        let again = update(
            &got,
            "# kreplay soak\n\nRules.\n\n",
            &[(Soak::Audit, failed)],
        );
        assert_eq!(
            again,
            got.replace(
                &got[got.find("## `kreplay audit").unwrap()
                    ..got.find("## `kreplay replay").unwrap()],
                "## `kreplay audit`: **the soak failed** (exit status: 1).\n\nRun: later.\n\n"
            )
        );
    }

    #[test]
    fn a_first_run_writes_the_header_and_its_sections() {
        let t = "## `kreplay trace --all`, 1.0 min\n\nT.\n\n".to_string();
        assert_eq!(
            update("", "# H\n\n", &[(Soak::Trace, t.clone())]),
            format!("# H\n\n{t}")
        );
    }
}
