//! roctx calls as annotations: each probed `libroctx64` call becomes one `Annotation` record
//! in its thread's stream instead of a call slice.
//!
//! A push, mark or start arrives as a call record followed by the name record the BPF program
//! read from its message at return (same thread, same return time). The call is kept until
//! its name comes; a thread's next roctx call, or the end of the capture, writes a call whose
//! name never came (an unreadable message) with the name [`UNREAD`]. A range begins at its
//! push's entry and ends at its pop's return, so the calls made between nest inside it.
use kreplay_common::{
    api::{ApiKind, Library, spec_of},
    probe::{CallRecord, NameRecord},
    stream::{Annotation, annotation},
};

use crate::merge::FastMap;

/// The name of a range or mark whose message could not be read.
pub const UNREAD: &str = "(message not read)";

/// A push, mark or start waiting for its name.
struct Pending {
    kind: u8,
    ts_ns: u64,
    exit_ns: u64,
    id: u64,
}

/// The roctx calls of a capture whose names are still to come.
#[derive(Default)]
pub struct Roctx {
    pending: FastMap<(u32, u32), Pending>,
}

/// Whether `api` is a roctx call (made an annotation, not a call slice).
pub fn is_roctx(api: u16) -> bool {
    spec_of(api).is_some_and(|s| s.library == Library::Roctx && s.kind == ApiKind::Annotate)
}

fn record(pid: u32, tid: u32, p: &Pending, name: String) -> Annotation {
    Annotation {
        pid,
        tid,
        ts_ns: p.ts_ns,
        kind: p.kind,
        source: annotation::ROCTX,
        category: 0,
        id: p.id,
        domain: String::new(),
        name,
    }
}

impl Roctx {
    /// Takes a roctx call record; returns the annotations ready to write, in order (a call of
    /// the thread still waiting for its name first).
    pub fn call(&mut self, r: &CallRecord) -> Vec<Annotation> {
        let mut out: Vec<Annotation> = self
            .pending
            .remove(&(r.pid, r.tid))
            .map(|p| record(r.pid, r.tid, &p, UNREAD.into()))
            .into_iter()
            .collect();
        let name = spec_of(r.api).map_or("", |s| s.name);
        let (kind, ts_ns, id) = match name {
            "roctxRangePushA" => (annotation::PUSH, r.enter_ns, 0),
            "roctxMarkA" => (annotation::MARK, r.enter_ns, 0),
            "roctxRangeStartA" => (annotation::START, r.enter_ns, r.ret),
            "roctxRangePop" => (annotation::POP, r.exit_ns, 0),
            "roctxRangeStop" => (annotation::END, r.exit_ns, r.args[0]),
            _ => return out,
        };
        let p = Pending {
            kind,
            ts_ns,
            exit_ns: r.exit_ns,
            id,
        };
        if matches!(kind, annotation::POP | annotation::END) {
            out.push(record(r.pid, r.tid, &p, String::new()));
        } else {
            self.pending.insert((r.pid, r.tid), p);
        }
        out
    }

    /// Takes the name record of a roctx call: the annotation it completes, if its call came.
    pub fn name(&mut self, n: &NameRecord) -> Option<Annotation> {
        let key = (n.pid, n.tid);
        if self.pending.get(&key)?.exit_ns != n.ts_ns {
            return None;
        }
        let p = self.pending.remove(&key)?;
        let name = String::from_utf8_lossy(n.name_bytes()).into_owned();
        Some(record(n.pid, n.tid, &p, name))
    }

    /// The calls whose names never came, at the end of the capture.
    pub fn finish(&mut self) -> Vec<Annotation> {
        let mut v: Vec<Annotation> = self
            .pending
            .drain()
            .map(|((pid, tid), p)| record(pid, tid, &p, UNREAD.into()))
            .collect();
        v.sort_by_key(|a| (a.ts_ns, a.tid));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::{
        api::id_of,
        probe::{EXTRA_WORDS, NAME_BYTES},
    };

    fn call(api: &str, enter_ns: u64, exit_ns: u64, ret: u64, arg0: u64) -> CallRecord {
        CallRecord {
            enter_ns,
            exit_ns,
            pid: 5,
            tid: 6,
            api: id_of(api).unwrap(),
            flags: 0,
            parent: 0,
            _pad: 0,
            args: [arg0, 0, 0, 0, 0, 0],
            extra: [0; EXTRA_WORDS],
            ret,
            out: 0,
        }
    }

    fn name(api: &str, ts_ns: u64, s: &str) -> NameRecord {
        let mut n = NameRecord {
            ts_ns,
            handle: 0x1000,
            pid: 5,
            tid: 6,
            api: id_of(api).unwrap(),
            len: s.len() as u16 + 1,
            _pad: 0,
            name: [0; NAME_BYTES],
        };
        n.name[..s.len()].copy_from_slice(s.as_bytes());
        n
    }

    fn brief(v: &[Annotation]) -> Vec<(u8, u64, u64, &str)> {
        v.iter()
            .map(|a| (a.kind, a.ts_ns, a.id, a.name.as_str()))
            .collect()
    }

    #[test]
    fn calls_and_their_names_become_annotations_timed_to_enclose_the_range() {
        use annotation::*;
        let mut r = Roctx::default();
        assert!(
            r.call(&call("roctxRangePushA", 10, 12, 0, 0x1000))
                .is_empty()
        );
        assert_eq!(
            brief(
                &r.name(&name("roctxRangePushA", 12, "step"))
                    .into_iter()
                    .collect::<Vec<_>>()
            ),
            vec![(PUSH, 10, 0, "step")]
        );
        assert_eq!(
            brief(&r.call(&call("roctxRangePop", 30, 31, 0, 0))),
            vec![(POP, 31, 0, "")]
        );
        assert!(
            r.call(&call("roctxRangeStartA", 40, 41, 9, 0x1000))
                .is_empty()
        );
        // A name of another return time is not this call's.
        assert_eq!(r.name(&name("roctxRangeStartA", 99, "x")), None);
        assert_eq!(
            brief(
                &r.name(&name("roctxRangeStartA", 41, "load"))
                    .into_iter()
                    .collect::<Vec<_>>()
            ),
            vec![(START, 40, 9, "load")]
        );
        assert_eq!(
            brief(&r.call(&call("roctxRangeStop", 50, 52, 0, 9))),
            vec![(END, 52, 9, "")]
        );
        // A mark whose name never came: written at the thread's next roctx call, and at the end.
        assert!(r.call(&call("roctxMarkA", 60, 61, 0, 0x1000)).is_empty());
        assert_eq!(
            brief(&r.call(&call("roctxMarkA", 70, 71, 0, 0x1000))),
            vec![(MARK, 60, 0, UNREAD)]
        );
        assert_eq!(brief(&r.finish()), vec![(MARK, 70, 0, UNREAD)]);
        assert!(is_roctx(id_of("roctxRangePop").unwrap()));
        assert!(!is_roctx(id_of("hipMalloc").unwrap()));
    }
}
