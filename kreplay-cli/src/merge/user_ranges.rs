//! Rendering the application's annotations (roctx, NVTX: `Annotation` records).
//!
//! - Pushed ranges are slices on the calling thread's track, opened at the push and closed at
//!   the pop, so the runtime calls made inside nest in them. They go on the sequence of that
//!   thread's calls and queue behind its held launches ([`super::holdback`]), which keeps the
//!   sequence in time order. A pop with nothing pushed (pushed before the trace began) is
//!   counted, not drawn; a range still open at the end of the trace closes at its last event.
//! - Marks are instants on the calling thread's track.
//! - Start/end ranges may end on another thread: each becomes a slice on a track of its
//!   process per source and domain (`NVTX ranges`, `NVTX ranges (DOMAIN)`), written at the end of
//!   the merge (overlapping ones on sibling lanes). Memory: one entry per range not yet ended,
//!   and one per ended range until the end; applications make few of these.
//! - Every range and mark carries its `domain` (non-default only), `category` (its name when
//!   the application named it) and `source`.
use std::io::Write;

use kreplay_common::stream::{Annotation as UserMark, annotation};

use super::FastMap;
use super::holdback::Offer;
use super::render::Renderer;
use crate::perfetto::{Annotation, EventArgs, Sequence, Value, WriterError};

/// A start/end range: when it began and what it is.
struct Started {
    ts: u64,
    name: String,
    domain: String,
    category: u32,
    source: u8,
}

/// A start/end range that ended, waiting for the end of the merge.
struct Ended {
    pid: u32,
    begin: u64,
    end: u64,
    range: Started,
}

/// The annotation state of a merge.
#[derive(Default)]
pub struct UserRanges {
    /// Ranges pushed and not yet popped, per thread.
    depth: FastMap<(u32, u32), u32>,
    /// The sequence of each thread's calls and annotations.
    pub(super) seqs: FastMap<(u32, u32), Sequence>,
    /// Category names by (pid, domain, category).
    categories: FastMap<(u32, String, u32), String>,
    started: FastMap<(u32, u64), Started>,
    ended: Vec<Ended>,
    /// The latest time any record reached: where ranges still open at the end close.
    pub(super) latest: u64,
    /// Ranges and marks written.
    pub written: u64,
    /// Pops and ends with no push or start seen.
    pub unmatched: u64,
}

impl<W: Write> Renderer<W> {
    /// The sequence of thread `(pid, tid)`'s calls and annotations, made on first need.
    pub(super) fn thread_seq(&mut self, pid: u32, tid: u32) -> Sequence {
        let w = &mut self.w;
        *self
            .ranges
            .seqs
            .entry((pid, tid))
            .or_insert_with(|| w.sequence())
    }

    /// Takes one annotation record.
    pub(super) fn user_mark(&mut self, a: &UserMark) -> Result<(), WriterError> {
        let r = &mut self.ranges;
        r.latest = r.latest.max(a.ts_ns);
        match a.kind {
            annotation::NAME_CATEGORY => {
                r.categories
                    .insert((a.pid, a.domain.clone(), a.category), a.name.clone());
            }
            annotation::START => {
                let s = Started {
                    ts: a.ts_ns,
                    name: a.name.clone(),
                    domain: a.domain.clone(),
                    category: a.category,
                    source: a.source,
                };
                r.started.insert((a.pid, a.id), s);
            }
            annotation::END => match r.started.remove(&(a.pid, a.id)) {
                Some(range) => r.ended.push(Ended {
                    pid: a.pid,
                    begin: range.ts,
                    end: a.ts_ns.max(range.ts),
                    range,
                }),
                None => r.unmatched += 1,
            },
            annotation::PUSH | annotation::POP | annotation::MARK => {
                let seq = self.thread_seq(a.pid, a.tid);
                if self.hold.offer_annotation(seq, a) == Offer::WriteNow {
                    self.write_user_mark(seq, a)?;
                }
            }
            _ => self.stats.unrenderable += 1,
        }
        Ok(())
    }

    /// Writes a push, pop or mark on its thread's track.
    pub(super) fn write_user_mark(
        &mut self,
        seq: Sequence,
        a: &UserMark,
    ) -> Result<(), WriterError> {
        let track = self.thread_track(a.pid, a.tid)?;
        let depth = self.ranges.depth.entry((a.pid, a.tid)).or_default();
        match a.kind {
            annotation::POP if *depth == 0 => {
                self.ranges.unmatched += 1;
                Ok(())
            }
            annotation::POP => {
                *depth -= 1;
                self.w.end(seq, track, a.ts_ns)
            }
            kind => {
                if kind == annotation::PUSH {
                    *depth += 1;
                }
                let category = self.category_name(a.pid, &a.domain, a.category);
                let ann = self.mark_args(a.source, &a.domain, a.category, category.as_deref());
                let args = EventArgs {
                    annotations: &ann,
                    ..Default::default()
                };
                self.ranges.written += 1;
                if kind == annotation::PUSH {
                    self.w.begin_inline(seq, track, &a.name, a.ts_ns, &args)
                } else {
                    let name = self.w.event_name(&a.name);
                    self.w.instant(seq, track, name, a.ts_ns, &args)
                }
            }
        }
    }

    fn category_name(&self, pid: u32, domain: &str, category: u32) -> Option<String> {
        (category != 0)
            .then(|| {
                self.ranges
                    .categories
                    .get(&(pid, domain.to_owned(), category))
                    .cloned()
            })
            .flatten()
    }

    fn mark_args<'a>(
        &mut self,
        source: u8,
        domain: &'a str,
        category: u32,
        category_name: Option<&'a str>,
    ) -> Vec<Annotation<'a>> {
        let mut v = vec![Annotation {
            name: self.names.source,
            value: Value::Str(annotation::source_name(source)),
        }];
        if !domain.is_empty() {
            v.push(Annotation {
                name: self.w.annotation_name("domain"),
                value: Value::Str(domain),
            });
        }
        if category != 0 {
            v.push(Annotation {
                name: self.w.annotation_name("category"),
                value: match category_name {
                    Some(n) => Value::Str(n),
                    None => Value::Uint(u64::from(category)),
                },
            });
        }
        v
    }

    /// Closes the pushed ranges still open, and writes the start/end ranges.
    pub(super) fn finish_user_marks(&mut self) -> Result<(), WriterError> {
        let end = self.ranges.latest;
        let open: Vec<((u32, u32), u32)> = self
            .ranges
            .depth
            .iter()
            .filter(|(_, d)| **d > 0)
            .map(|(k, d)| (*k, *d))
            .collect();
        for ((pid, tid), n) in open {
            let seq = self.thread_seq(pid, tid);
            let track = self.thread_track(pid, tid)?;
            for _ in 0..n {
                self.w.end(seq, track, end)?;
            }
        }
        let mut ended = std::mem::take(&mut self.ranges.ended);
        ended.sort_by_key(|e| (e.begin, std::cmp::Reverse(e.end)));
        let seq = self.w.sequence();
        for e in &ended {
            let r = &e.range;
            let pname = super::labels::process_label(&self.process_names, e.pid);
            let process = self.w.process_track(e.pid as i32, &pname)?;
            let source = annotation::source_name(r.source);
            let label = if r.domain.is_empty() {
                format!("{source} ranges")
            } else {
                format!("{source} ranges ({})", r.domain)
            };
            let key = crate::perfetto::name_hash(&label);
            let base = self.w.child_track(process, key, &label)?;
            let lane = self.w.lane(base, e.begin, e.end)?;
            let category = self.category_name(e.pid, &r.domain, r.category);
            let ann = self.mark_args(r.source, &r.domain, r.category, category.as_deref());
            let args = EventArgs {
                annotations: &ann,
                ..Default::default()
            };
            self.w
                .slice_inline(seq, lane, &r.name, e.begin, e.end, &args)?;
            self.ranges.written += 1;
        }
        Ok(())
    }
}
