//! The tool's warnings, said once per cause: a warning whose cause ([`kreplay_common::cause`]:
//! addresses and numbers masked) was already logged is counted instead of printed, and the
//! counts are printed once when the process exits or the tool unloads. A replay of hundreds of
//! dispatches that all decline for one reason then prints one line and a count, not hundreds.
//! Warnings are not a hot path: the one lock here is taken only for them.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter};

/// Causes remembered; later new causes are printed every time (memory stays bounded).
const MAX_CAUSES: usize = 256;

/// One cause: its key, the first message, how many times it was seen.
struct Seen {
    key: String,
    first: String,
    count: u64,
}

static CAUSES: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
static SUMMARIZED: AtomicBool = AtomicBool::new(false);

/// A [`Filter`] that lets the first warning of each cause through and counts the rest; every
/// other level passes.
pub struct OncePerCause;

impl<S: Subscriber> Filter<S> for OncePerCause {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        if *event.metadata().level() != Level::WARN {
            return true;
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        first_of_its_cause(&m.0)
    }
}

/// The `message` field of an event, as text.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

/// Whether `message` is the first of its cause (then it is printed); counts it either way.
pub fn first_of_its_cause(message: &str) -> bool {
    let key = kreplay_common::cause::of(message);
    let mut causes = CAUSES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = causes.iter_mut().find(|s| s.key == key) {
        s.count += 1;
        return false;
    }
    if causes.len() < MAX_CAUSES {
        causes.push(Seen {
            key,
            first: message.to_owned(),
            count: 1,
        });
    }
    true
}

/// One line per cause seen more than once: `kreplay: N more warnings like: FIRST`.
pub fn repeated() -> Vec<String> {
    let causes = CAUSES.lock().unwrap_or_else(|p| p.into_inner());
    causes
        .iter()
        .filter(|s| s.count > 1)
        .map(|s| {
            let first = s.first.strip_prefix("kreplay: ").unwrap_or(&s.first);
            format!("kreplay: {} more warnings like: {first}", s.count - 1)
        })
        .collect()
}

/// Prints [`repeated`] to stderr once per process (at exit or unload, whichever comes first),
/// without `tracing`: its thread-locals may be gone by then.
pub fn print_repeated_once() {
    if SUMMARIZED.swap(true, Ordering::SeqCst) {
        return;
    }
    for line in repeated() {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_printed_once_and_counted_after() {
        let a = "kreplay: snapshot declined: region 0x7f00 of 4096 bytes (test cause)";
        let b = "kreplay: snapshot declined: region 0x8e00 of 8192 bytes (test cause)";
        assert!(first_of_its_cause(a));
        assert!(!first_of_its_cause(b));
        assert!(!first_of_its_cause(a));
        assert!(first_of_its_cause(
            "kreplay: another thing entirely (test cause)"
        ));
        let lines = repeated();
        assert!(
            lines.contains(&"kreplay: 2 more warnings like: snapshot declined: region 0x7f00 of 4096 bytes (test cause)".to_owned()),
            "{lines:?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("another thing")),
            "{lines:?}"
        );
    }
}
