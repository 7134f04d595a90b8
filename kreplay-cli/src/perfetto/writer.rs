//! The streaming `TraceWriter`: tracks, sequences, interning and the ordering of slice ends.
//!
//! Packets are encoded straight into one reusable output buffer and written to the inner
//! `io::Write` in chunks of `WriterOptions::buffer_bytes` — what a `BufWriter` would do, minus
//! a second copy: a packet's length-delimited fields are back-patched in place (`wire`), which
//! needs the packet's bytes to be in a buffer the writer owns.
//!
//! Packet encoding lives in `writer/encode.rs`.
//!
//! A complete slice writes its `TYPE_SLICE_BEGIN` at once and defers its `TYPE_SLICE_END` to a
//! per-sequence min-heap; ends are written as soon as an event at or after them arrives on the
//! sequence. So with events given in time order, every sequence comes out time-ordered and
//! child slices land between their parent's begin and end. The heap holds only the slices open
//! at the current time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;

use super::intern::{AnnotationName, EventName, NameTable, SeqIids};
use super::proto::{CounterUnit, EventType};
use super::tracks::{self, OPEN_END, Track, TrackKey, TrackState};
use super::{EventArgs, Value, WriterError, wire};

mod encode;

/// `SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE`, on a sequence's first packet.
const FIRST_FLAGS: u64 = 1 | 2;
/// `SEQ_NEEDS_INCREMENTAL_STATE`, on every later packet.
const LATER_FLAGS: u64 = 2;

/// A writer sequence (one `trusted_packet_sequence_id` with its own interning tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sequence(u32);

impl Sequence {
    /// The `trusted_packet_sequence_id` this sequence writes.
    pub fn trusted_id(&self) -> u32 {
        self.0 + 1
    }
}

/// Settings of a `TraceWriter`.
#[derive(Clone, Copy, Debug)]
pub struct WriterOptions {
    /// Check event order per sequence and strict nesting per track, returning an error on a
    /// violation. On by default in debug builds, off in release builds.
    pub check_nesting: bool,
    /// Bytes buffered before a write to the inner writer.
    pub buffer_bytes: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            check_nesting: cfg!(debug_assertions),
            buffer_bytes: 256 * 1024,
        }
    }
}

/// How an event is named: an interned handle, or the name itself written in the event.
#[derive(Clone, Copy)]
pub(super) enum Name<'a> {
    /// `TrackEvent.name_iid`.
    Interned(EventName),
    /// `TrackEvent.name`.
    Inline(&'a str),
}

/// A pending slice end: (end time, tie-breaker so later-opened slices close first, track
/// index). All three are 64-bit: a heap writes an entry and reads it back at once, and an
/// 8-byte read of a field written as 4 bytes (plus padding) stalls the CPU's store forwarding.
type PendingEnd = Reverse<(u64, u64, u64)>;

/// Per-sequence state.
struct SeqState {
    trusted_id: u32,
    /// `trusted_packet_sequence_id` and `sequence_flags` of every packet after the first.
    header: wire::Preencoded,
    started: bool,
    last_ts: u64,
    pending: BinaryHeap<PendingEnd>,
    opened: u64,
    event_iids: SeqIids,
    annotation_iids: SeqIids,
}

/// Fields of `InternedData` entries (`event_names`, `debug_annotation_names`).
const INTERNED_EVENT_NAMES: u32 = 2;
const INTERNED_ANNOTATION_NAMES: u32 = 3;

/// Streams a Perfetto trace to `W`. Call `finish` to write the pending slice ends and flush;
/// dropping the writer does the same on a best-effort basis.
pub struct TraceWriter<W: Write> {
    out: Option<W>,
    buf: Vec<u8>,
    opts: WriterOptions,
    seqs: Vec<SeqState>,
    tracks: Vec<TrackState>,
    by_uuid: HashMap<u64, u32>,
    event_names: NameTable,
    annotation_names: NameTable,
    /// Scratch for the packet being written: names it defines, as (field, iid, global index).
    new_names: Vec<(u32, u64, u32)>,
    /// Scratch: the sequence iids of the current event's annotations.
    annotation_iids: Vec<u64>,
    flushed_bytes: u64,
    packets: u64,
    /// A write or flush of `out` failed: dropping the writer does not try again (the error
    /// was returned once; a second attempt would only repeat it).
    failed: bool,
}

impl<W: Write> TraceWriter<W> {
    /// A writer with default options; the first sequence exists already.
    pub fn new(out: W) -> Self {
        Self::with_options(out, WriterOptions::default())
    }

    /// A writer with `opts`.
    pub fn with_options(out: W, opts: WriterOptions) -> Self {
        let mut writer = TraceWriter {
            out: Some(out),
            buf: Vec::with_capacity(opts.buffer_bytes + 4096),
            opts,
            seqs: Vec::new(),
            tracks: Vec::new(),
            by_uuid: HashMap::new(),
            event_names: NameTable::default(),
            annotation_names: NameTable::default(),
            new_names: Vec::new(),
            annotation_iids: Vec::new(),
            flushed_bytes: 0,
            packets: 0,
            failed: false,
        };
        writer.sequence();
        writer
    }

    /// The writer's first sequence; track descriptors are written on it.
    pub fn default_sequence(&self) -> Sequence {
        Sequence(0)
    }

    /// The timestamp of `seq`'s latest event (0 before its first, or for a foreign handle):
    /// an event earlier than this is refused there.
    pub fn last_ts(&self, seq: Sequence) -> u64 {
        self.seqs.get(seq.0 as usize).map_or(0, |s| s.last_ts)
    }

    /// Starts a new sequence (e.g. one per source thread stream).
    pub fn sequence(&mut self) -> Sequence {
        let index = u32::try_from(self.seqs.len()).expect("fewer than 2^32 sequences");
        self.seqs.push(SeqState {
            trusted_id: index + 1,
            header: wire::Preencoded::default()
                .uint(10, u64::from(index + 1))
                .uint(13, LATER_FLAGS),
            started: false,
            last_ts: 0,
            pending: BinaryHeap::new(),
            opened: 0,
            event_iids: SeqIids::default(),
            annotation_iids: SeqIids::default(),
        });
        Sequence(index)
    }

    /// The handle of a slice or instant name (interned once per sequence when first used).
    pub fn event_name(&mut self, name: &str) -> EventName {
        EventName(self.event_names.intern(name))
    }

    /// The handle of a debug-annotation name.
    pub fn annotation_name(&mut self, name: &str) -> AnnotationName {
        AnnotationName(self.annotation_names.intern(name))
    }

    /// Packets written so far (including those still buffered).
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Bytes of trace produced so far (including those still buffered).
    pub fn bytes(&self) -> u64 {
        self.flushed_bytes + self.buf.len() as u64
    }

    /// The track of process `pid`, named `name`. Defining it again returns the same track.
    pub fn process_track(&mut self, pid: i32, name: &str) -> Result<Track, WriterError> {
        let uuid = TrackKey::Process { pid }.uuid();
        self.define(uuid, None, name, || {
            tracks::process_descriptor(uuid, pid, name)
        })
    }

    /// The track of thread `tid` of process `pid`, under the process track if that is defined.
    pub fn thread_track(&mut self, pid: i32, tid: i32, name: &str) -> Result<Track, WriterError> {
        let uuid = TrackKey::Thread { pid, tid }.uuid();
        let process = TrackKey::Process { pid }.uuid();
        let parent = self.by_uuid.contains_key(&process).then_some(process);
        self.define(uuid, parent, name, || {
            tracks::thread_descriptor(uuid, parent, pid, tid, name)
        })
    }

    /// A top-level track for GPU device or agent `id`.
    pub fn device_track(&mut self, id: u64, name: &str) -> Result<Track, WriterError> {
        let uuid = TrackKey::Device { id }.uuid();
        self.define(uuid, None, name, || {
            tracks::named_descriptor(uuid, None, name)
        })
    }

    /// A named track under `parent` (a process or device), e.g. a GPU queue or stream keyed by
    /// its address or handle.
    pub fn child_track(
        &mut self,
        parent: Track,
        key: u64,
        name: &str,
    ) -> Result<Track, WriterError> {
        let parent = self.track_state(parent)?.uuid;
        let uuid = TrackKey::Child { parent, key }.uuid();
        self.define(uuid, Some(parent), name, || {
            tracks::named_descriptor(uuid, Some(parent), name)
        })
    }

    /// A counter track named `name` under `parent` (or top-level), with values in `unit`.
    pub fn counter_track(
        &mut self,
        parent: Option<Track>,
        name: &str,
        unit: CounterUnit,
    ) -> Result<Track, WriterError> {
        let parent = parent
            .map(|p| self.track_state(p).map(|t| t.uuid))
            .transpose()?;
        let key = TrackKey::Counter {
            parent: parent.unwrap_or(0),
            name_hash: tracks::name_hash(name),
        };
        let uuid = key.uuid();
        self.define(uuid, parent, name, || {
            tracks::counter_descriptor(uuid, parent, name, unit)
        })
    }

    /// The track on which a top-level slice `[begin, end]` of `base` goes without overlapping
    /// earlier ones: `base` itself when it is free at `begin`, else the first free overflow
    /// lane (a sibling track with the same name and parent), made on first need. Use it for
    /// GPU work that may overlap on one queue; slices must be given in begin order.
    pub fn lane(&mut self, base: Track, begin: u64, end: u64) -> Result<Track, WriterError> {
        let state = self.track_state(base)?;
        if let Some(slot) = state.lanes.iter().position(|&(_, busy)| busy <= begin) {
            let lane = &mut self.tracks[base.index as usize].lanes[slot];
            lane.1 = end;
            let index = lane.0;
            return Ok(Track {
                index,
                uuid: self.tracks[index as usize].uuid,
            });
        }
        let lane = u32::try_from(state.lanes.len()).expect("fewer than 2^32 lanes");
        let uuid = TrackKey::Lane {
            base: base.uuid,
            lane,
        }
        .uuid();
        let parent = state.parent;
        let name = state.name.clone();
        let track = self.define(uuid, parent, &name, || {
            tracks::named_descriptor(uuid, parent, &name)
        })?;
        self.tracks[base.index as usize]
            .lanes
            .push((track.index, end));
        Ok(track)
    }

    /// A complete slice `[begin, end]` on `track`. Within a sequence, events must come in time
    /// order (by begin time for slices); on one track, a slice that begins inside another must
    /// end inside it too (at equal begins, give the outer slice first); all slices of a track go
    /// on one sequence. A source that yields calls in completion order (inner calls first) must
    /// reorder them by begin time first; the reorder window is the nesting depth.
    pub fn slice(
        &mut self,
        seq: Sequence,
        track: Track,
        name: EventName,
        begin: u64,
        end: u64,
        args: &EventArgs<'_>,
    ) -> Result<(), WriterError> {
        self.slice_with(seq, track, Name::Interned(name), begin, end, args)
    }

    /// [`TraceWriter::slice`] with its name written in the event instead of interned: for
    /// names that differ from slice to slice (`pass 17`), which interning would keep in the
    /// writer's tables and each sequence's, growing with every new name.
    pub fn slice_inline(
        &mut self,
        seq: Sequence,
        track: Track,
        name: &str,
        begin: u64,
        end: u64,
        args: &EventArgs<'_>,
    ) -> Result<(), WriterError> {
        self.slice_with(seq, track, Name::Inline(name), begin, end, args)
    }

    fn slice_with(
        &mut self,
        seq: Sequence,
        track: Track,
        name: Name<'_>,
        begin: u64,
        end: u64,
        args: &EventArgs<'_>,
    ) -> Result<(), WriterError> {
        self.advance(seq, begin)?;
        if self.opts.check_nesting {
            let state = self.track_state(track)?;
            if end < begin {
                return Err(WriterError::NegativeDuration {
                    track: state.uuid,
                    begin,
                    end,
                });
            }
            if let Err(tracks::NestError::Crosses { parent_end }) = state.check_fits(end) {
                return Err(WriterError::Crosses {
                    track: state.uuid,
                    begin,
                    end,
                    parent_end,
                });
            }
        }
        self.event(
            seq,
            begin,
            EventType::TypeSliceBegin,
            track,
            Some(name),
            args,
            None,
        )?;
        self.tracks[track.index as usize].open.push(end);
        let s = &mut self.seqs[seq.0 as usize];
        s.opened += 1;
        s.pending
            .push(Reverse((end, u64::MAX - s.opened, u64::from(track.index))));
        self.maybe_flush()
    }

    /// Opens a slice on `track` at `ts` whose end is not known yet; close it with `end`.
    pub fn begin(
        &mut self,
        seq: Sequence,
        track: Track,
        name: EventName,
        ts: u64,
        args: &EventArgs<'_>,
    ) -> Result<(), WriterError> {
        self.begin_with(seq, track, Name::Interned(name), ts, args)
    }

    /// [`TraceWriter::begin`] with its name written in the event (see
    /// [`TraceWriter::slice_inline`]): for names an application makes up as it runs.
    pub fn begin_inline(
        &mut self,
        seq: Sequence,
        track: Track,
        name: &str,
        ts: u64,
        args: &EventArgs<'_>,
    ) -> Result<(), WriterError> {
        self.begin_with(seq, track, Name::Inline(name), ts, args)
    }

    fn begin_with(
        &mut self,
        seq: Sequence,
        track: Track,
        name: Name<'_>,
        ts: u64,
        args: &EventArgs<'_>,
    ) -> Result<(), WriterError> {
        self.advance(seq, ts)?;
        self.event(
            seq,
            ts,
            EventType::TypeSliceBegin,
            track,
            Some(name),
            args,
            None,
        )?;
        self.tracks[track.index as usize].open.push(OPEN_END);
        self.maybe_flush()
    }

    /// Closes the innermost slice opened on `track` with `begin`.
    pub fn end(&mut self, seq: Sequence, track: Track, ts: u64) -> Result<(), WriterError> {
        self.advance(seq, ts)?;
        let state = self.track_state(track)?;
        if state.open.last() != Some(&OPEN_END) {
            return Err(WriterError::UnmatchedEnd {
                track: state.uuid,
                ts,
            });
        }
        self.tracks[track.index as usize].open.pop();
        self.end_event(seq.0 as usize, ts, track.index);
        self.maybe_flush()
    }

    /// A zero-duration event on `track` (e.g. a marker where events were dropped).
    pub fn instant(
        &mut self,
        seq: Sequence,
        track: Track,
        name: EventName,
        ts: u64,
        args: &EventArgs<'_>,
    ) -> Result<(), WriterError> {
        self.advance(seq, ts)?;
        self.event(
            seq,
            ts,
            EventType::TypeInstant,
            track,
            Some(Name::Interned(name)),
            args,
            None,
        )?;
        self.maybe_flush()
    }

    /// An integer value on counter track `track` from `ts` on.
    pub fn counter(
        &mut self,
        seq: Sequence,
        track: Track,
        ts: u64,
        value: i64,
    ) -> Result<(), WriterError> {
        self.advance(seq, ts)?;
        let none = EventArgs::default();
        self.event(
            seq,
            ts,
            EventType::TypeCounter,
            track,
            None,
            &none,
            Some(Value::Int(value)),
        )?;
        self.maybe_flush()
    }

    /// A floating-point value on counter track `track` from `ts` on.
    pub fn counter_f64(
        &mut self,
        seq: Sequence,
        track: Track,
        ts: u64,
        value: f64,
    ) -> Result<(), WriterError> {
        self.advance(seq, ts)?;
        let none = EventArgs::default();
        self.event(
            seq,
            ts,
            EventType::TypeCounter,
            track,
            None,
            &none,
            Some(Value::Double(value)),
        )?;
        self.maybe_flush()
    }

    /// Writes the buffered bytes to the inner writer and flushes it. Slice ends not yet due
    /// stay pending.
    pub fn flush(&mut self) -> Result<(), WriterError> {
        self.write_buffer()?;
        if let Some(out) = self.out.as_mut() {
            out.flush().map_err(|source| {
                self.failed = true;
                WriterError::Io {
                    call: "flush",
                    source,
                }
            })?;
        }
        Ok(())
    }

    /// Writes every pending slice end, flushes, and returns the inner writer.
    pub fn finish(mut self) -> Result<W, WriterError> {
        self.close_all()?;
        self.flush()?;
        Ok(self.out.take().expect("the writer is only taken here"))
    }

    /// Writes the pending ends of every sequence, in end order per sequence.
    fn close_all(&mut self) -> Result<(), WriterError> {
        for seq in 0..self.seqs.len() {
            self.advance_to(seq, u64::MAX)?;
        }
        Ok(())
    }

    /// Checks `ts` against the sequence's last event and writes the slice ends due by `ts`.
    #[inline]
    fn advance(&mut self, seq: Sequence, ts: u64) -> Result<(), WriterError> {
        let Some(s) = self.seqs.get_mut(seq.0 as usize) else {
            return Err(WriterError::ForeignHandle {
                what: "sequence",
                index: seq.0,
            });
        };
        if ts < s.last_ts && self.opts.check_nesting {
            return Err(WriterError::OutOfOrder {
                sequence: s.trusted_id,
                ts,
                last: s.last_ts,
            });
        }
        s.last_ts = s.last_ts.max(ts);
        match s.pending.peek() {
            Some(Reverse((end, _, _))) if *end <= ts => self.advance_to(seq.0 as usize, ts),
            _ => Ok(()),
        }
    }

    /// Writes, in end order, the pending slice ends of sequence `seq` at or before `ts`.
    fn advance_to(&mut self, seq: usize, ts: u64) -> Result<(), WriterError> {
        while let Some(&Reverse((end, _, index))) = self.seqs[seq].pending.peek() {
            if end > ts {
                break;
            }
            self.seqs[seq].pending.pop();
            let state = &mut self.tracks[index as usize];
            let innermost = state.close(end);
            if !innermost && self.opts.check_nesting {
                return Err(WriterError::UnclosedInside {
                    track: state.uuid,
                    end,
                });
            }
            self.end_event(seq, end, index as u32);
        }
        Ok(())
    }

    fn track_state(&self, track: Track) -> Result<&TrackState, WriterError> {
        self.tracks
            .get(track.index as usize)
            .filter(|t| t.uuid == track.uuid)
            .ok_or(WriterError::ForeignHandle {
                what: "track",
                index: track.index,
            })
    }
}

impl<W: Write> Drop for TraceWriter<W> {
    fn drop(&mut self) {
        if self.out.is_none() || self.failed {
            return;
        }
        if let Err(e) = self.close_all().and_then(|()| self.flush()) {
            tracing::warn!("finishing the Perfetto trace on drop failed: {e}");
        }
    }
}
