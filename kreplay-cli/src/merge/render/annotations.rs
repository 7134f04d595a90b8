//! Writing the application's annotations (the state is [`crate::merge::user_ranges`]'s): pushes
//! and pops as slices opened and closed on the calling thread's track, marks as instants, and
//! at the end the start/end ranges on their process's per-source, per-domain tracks.
use std::io::Write;

use kreplay_common::stream::{Annotation as UserMark, annotation};

use super::Renderer;
use crate::merge::holdback::Offer;
use crate::perfetto::{Annotation, EventArgs, Sequence, Value, WriterError};

impl<W: Write> Renderer<W> {
    /// The sequence of thread `(pid, tid)`'s calls and annotations, made on first need.
    pub(in crate::merge) fn thread_seq(&mut self, pid: u32, tid: u32) -> Sequence {
        let w = &mut self.w;
        *self
            .ranges
            .seqs
            .entry((pid, tid))
            .or_insert_with(|| w.sequence())
    }

    /// Takes one annotation record.
    pub(in crate::merge) fn user_mark(&mut self, a: &UserMark) -> Result<(), WriterError> {
        if self.ranges.take(a) {
            let seq = self.thread_seq(a.pid, a.tid);
            if self.hold.offer_annotation(seq, a) == Offer::WriteNow {
                self.write_user_mark(seq, a)?;
            }
        }
        Ok(())
    }

    /// Writes a push, pop or mark on its thread's track.
    pub(in crate::merge) fn write_user_mark(
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
                let category = self.ranges.category_name(a.pid, &a.domain, a.category);
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
    pub(in crate::merge) fn finish_user_marks(&mut self) -> Result<(), WriterError> {
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
            let pname = crate::merge::labels::process_label(&self.process_names, e.pid);
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
            let category = self.ranges.category_name(e.pid, &r.domain, r.category);
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
