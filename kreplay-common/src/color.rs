//! Whether kreplay's logs on stderr may carry ANSI colour: only on a terminal, and never when
//! `NO_COLOR` is set to anything non-empty (<https://no-color.org>).

use std::io::IsTerminal;

/// Colour for stderr: a terminal and no `NO_COLOR`.
pub fn stderr_wants_color() -> bool {
    wants_color(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// The rule: a terminal, and `NO_COLOR` unset or empty.
pub fn wants_color(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::wants_color;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(wants_color(true, None));
        assert!(wants_color(true, Some(OsStr::new(""))));
        assert!(!wants_color(true, Some(OsStr::new("1"))));
        assert!(!wants_color(false, None));
        assert!(!wants_color(false, Some(OsStr::new(""))));
    }
}
