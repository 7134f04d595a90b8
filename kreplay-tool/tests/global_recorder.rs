//! The process-wide recorder as the tool uses it: configured from the environment, flushed
//! by the background thread when a buffer passes the size threshold, and on request, into
//! `$KREPLAY_OUTPUT_DIR/tool-<pid>.krs`. (Its own test binary: it sets the environment.)

mod support;

use std::time::{Duration, Instant};

use kreplay_common::stream::{Record, StreamKind, StreamReader};
use kreplay_tool::record::{self, ENV_OUTPUT_DIR, ENV_PER_THREAD};
use support::call;

/// ApiCall records in the stream, and whether its tail is damaged (a chunk being written).
fn api_calls(path: &std::path::Path) -> (usize, bool) {
    let mut r = StreamReader::open(path).unwrap();
    let n = r
        .by_ref()
        .filter(|r| matches!(r, Record::ApiCall(_)))
        .count();
    (n, r.damage().is_some())
}

#[test]
fn the_global_recorder_flushes_on_threshold_and_on_request() {
    let dir = std::env::temp_dir().join(format!("kreplay-global-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // SAFETY: this test binary has one test and sets the variables before any thread starts.
    unsafe {
        std::env::set_var(ENV_OUTPUT_DIR, &dir);
        std::env::set_var(ENV_PER_THREAD, "1");
    }
    let path = dir.join(StreamKind::Tool.file_name(std::process::id()));
    assert!(record::global().per_thread());
    record::start_global_flusher(Duration::from_secs(3600)).unwrap();

    // 10 000 rows from one thread pass the 8192-row threshold: the flusher wakes and writes
    // without anyone asking (its timer is an hour).
    std::thread::spawn(|| (0..10_000).for_each(|i| record::global().record(call(i))))
        .join()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(path.exists() && api_calls(&path).0 >= 8192) {
        assert!(Instant::now() < deadline, "no threshold flush within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The rest, and 5 more, on request.
    (0..5).for_each(|i| record::global().record(call(i)));
    record::flush_global().unwrap();
    assert_eq!(api_calls(&path), (10_005, false));
    assert_eq!(record::global().stats().dropped, 0);
    std::fs::remove_dir_all(dir).unwrap();
}
