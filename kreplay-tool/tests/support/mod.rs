//! What the integration tests share: the row they record.

use kreplay_common::stream::{ApiCall, Record};
use kreplay_tool::record;

/// Row `i` of the calling thread: an API call entered at `i` ns that returned `i`.
pub fn call(i: u64) -> Record {
    ApiCall {
        pid: std::process::id(),
        tid: record::current_tid(),
        api: 1,
        enter_ns: i,
        exit_ns: i + 1,
        ret: i,
        args: [i; 6],
        extra: [0; 5],
        out: 0,
    }
    .into()
}
