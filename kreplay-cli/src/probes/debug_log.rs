//! `--debug-probes`: the programs say, through aya-log, why they skipped a call or lost a
//! record (a full ring, an entry never saved, an unreadable out-pointer). Each message goes to
//! stderr as one line, the API named instead of its id.

use std::sync::atomic::{AtomicU8, Ordering};

use aya::Ebpf;
use aya_log::EbpfLogger;

/// The level the programs log at (`AYA_LOG_LEVEL`, set when they load): off by default.
static LEVEL: AtomicU8 = AtomicU8::new(0);

/// Turns the programs' debug messages on (or off) for the probes loaded from now on.
pub fn enable(on: bool) {
    let level = if on { aya_log::Level::Debug as u8 } else { 0 };
    LEVEL.store(level, Ordering::Relaxed);
}

/// The level to load the programs with.
pub(super) fn level() -> u8 {
    LEVEL.load(Ordering::Relaxed)
}

/// The reader of the programs' messages, when they are on.
pub struct DebugLog {
    logger: EbpfLogger<Printer>,
}

impl DebugLog {
    /// Starts reading `bpf`'s messages; `None` when they are off (or the object has none).
    pub(super) fn start(bpf: &mut Ebpf) -> Option<DebugLog> {
        if level() == 0 {
            return None;
        }
        match EbpfLogger::init_with_logger(bpf, Printer) {
            Ok(logger) => Some(DebugLog { logger }),
            Err(e) => {
                eprintln!("kreplay: --debug-probes: the programs' messages cannot be read: {e}");
                None
            }
        }
    }

    /// Prints every message the programs wrote since the last call.
    pub fn flush(&mut self) {
        self.logger.flush();
    }
}

/// Prints each message on stderr.
struct Printer;

impl log::Log for Printer {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        eprintln!("kreplay: probe: {}", named(&record.args().to_string()));
    }

    fn flush(&self) {}
}

/// `message` with a leading `api N` replaced by the API's name.
pub fn named(message: &str) -> String {
    let Some(rest) = message.strip_prefix("api ") else {
        return message.to_owned();
    };
    let (id, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    let name = id
        .parse::<kreplay_common::api::ApiId>()
        .ok()
        .and_then(kreplay_common::api::spec_of)
        .map(|s| s.name);
    match name {
        Some(n) => format!("{n} {tail}"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_id_becomes_its_name() {
        let id = kreplay_common::api::id_of("hipMalloc").expect("known");
        assert_eq!(
            named(&format!("api {id} tid 7: ring buffer full, record dropped")),
            "hipMalloc tid 7: ring buffer full, record dropped"
        );
        assert_eq!(named("api 65535 tid 7: x"), "api 65535 tid 7: x");
        assert_eq!(named("something else"), "something else");
    }
}
