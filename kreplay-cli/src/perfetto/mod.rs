//! kreplay's Perfetto trace writer: the rendering half shared by `kreplay trace`, `kreplay
//! replay` and `kreplay merge`.
//!
//! [`TraceWriter`] streams `Trace.packet` records to any `io::Write`, one packet at a time, so
//! memory is bounded by its buffer and the number of open slices, never by trace length. It
//! follows the practices in docs/perfetto.md: deterministic track uuids, each `TrackDescriptor`
//! written once before the first event that uses it, one `trusted_packet_sequence_id` per
//! sequence with correct `sequence_flags`, and event and annotation names interned per
//! sequence. Hot packets are encoded by hand (`wire`), cold ones through a small prost schema
//! (`proto`).
//!
//! ```
//! use kreplay_cli::perfetto::{Annotation, CounterUnit, EventArgs, TraceWriter, Value};
//!
//! let mut w = TraceWriter::new(Vec::new());
//! let seq = w.sequence(); // e.g. one per source thread stream
//! let app = w.process_track(42, "app")?;
//! let main = w.thread_track(42, 42, "main")?;
//! let gpu = w.device_track(0, "GPU 0")?;
//! let queue = w.child_track(gpu, 0x7f00_1000, "queue 0")?;
//! let live = w.counter_track(Some(app), "live device bytes", CounterUnit::UnitSizeBytes)?;
//! let (malloc, launch, kernel) = (w.event_name("hipMalloc"), w.event_name("hipLaunchKernel"), w.event_name("saxpy"));
//! let size = w.annotation_name("size");
//! let args = [Annotation { name: size, value: Value::Uint(4096) }];
//! w.slice(seq, main, malloc, 1_000, 1_200, &EventArgs { annotations: &args, ..Default::default() })?;
//! w.counter(seq, live, 1_200, 4096)?;
//! w.slice(seq, main, launch, 2_000, 2_100, &EventArgs { flow_ids: &[1], ..Default::default() })?;
//! let lane = w.lane(queue, 2_150, 2_600)?; // a free track for possibly overlapping GPU work
//! w.slice(seq, lane, kernel, 2_150, 2_600, &EventArgs { terminating_flow_ids: &[1], ..Default::default() })?;
//! let trace: Vec<u8> = w.finish()?;
//! assert_eq!(trace[0], 0x0a); // Trace.packet
//! # Ok::<(), kreplay_cli::perfetto::WriterError>(())
//! ```
//!
//! Timestamps are CLOCK_MONOTONIC nanoseconds written on the packet's default clock (no
//! `timestamp_clock_id`, no clock snapshot). Trace processor then takes them as its trace
//! clock as they are: every slice, duration and ordering in the UI is exact, and nothing can be
//! dropped for a failed clock conversion (trace processor converts a declared non-default clock
//! through `ClockSnapshot`s and drops events it cannot convert). The UI shows times relative to the
//! trace start, so the absolute epoch does not show. The one thing this gives up is aligning
//! with a separately recorded system trace on BOOTTIME, which kreplay does not merge.

mod intern;
pub mod proto;
mod tracks;
mod wire;
mod writer;
#[cfg(test)]
mod writer_tests;

pub use intern::{AnnotationName, EventName};
pub use proto::CounterUnit;
pub use tracks::{Track, TrackKey, name_hash};
pub use writer::{Sequence, TraceWriter, WriterOptions};

/// A debug-annotation value, shown in the UI's argument panel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// An unsigned integer (`uint_value`).
    Uint(u64),
    /// A signed integer (`int_value`).
    Int(i64),
    /// An address (`pointer_value`, shown in hex).
    Pointer(u64),
    /// A string (`string_value`).
    Str(&'a str),
    /// A float (`double_value`).
    Double(f64),
    /// A boolean (`bool_value`).
    Bool(bool),
}

/// One debug annotation: a name and a value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Annotation<'a> {
    /// The annotation's interned name.
    pub name: AnnotationName,
    /// Its value.
    pub value: Value<'a>,
}

/// What a slice-begin or instant event carries besides its name.
#[derive(Clone, Copy, Debug, Default)]
pub struct EventArgs<'a> {
    /// Debug annotations, in display order.
    pub annotations: &'a [Annotation<'a>],
    /// Flows this event starts or continues (e.g. on a CPU launch slice).
    pub flow_ids: &'a [u64],
    /// Flows this event ends (e.g. on the GPU dispatch slice the launch produced).
    pub terminating_flow_ids: &'a [u64],
}

/// Why the writer could not write an event.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// The underlying writer failed.
    #[error("{call} on the trace output failed")]
    Io {
        /// The failing call (`write_all`, `flush`).
        call: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// prost refused to encode a descriptor (cannot happen with a growable buffer).
    #[error("prost encode of a {what} failed")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// prost's error.
        #[source]
        source: prost::EncodeError,
    },
    /// An event is earlier than the previous event on its sequence.
    #[error(
        "event at {ts} ns on sequence {sequence} is earlier than the previous one at {last} ns"
    )]
    OutOfOrder {
        /// The sequence's trusted id.
        sequence: u32,
        /// The event's timestamp.
        ts: u64,
        /// The previous event's timestamp.
        last: u64,
    },
    /// A slice ends before it begins.
    #[error("slice on track {track:#x} ends at {end} ns before it begins at {begin} ns")]
    NegativeDuration {
        /// Track uuid.
        track: u64,
        /// Begin timestamp.
        begin: u64,
        /// End timestamp.
        end: u64,
    },
    /// A slice overlaps the open slice it starts inside without ending within it.
    #[error(
        "slice [{begin}, {end}] ns on track {track:#x} crosses the enclosing slice that ends at \
         {parent_end} ns; put overlapping work on its own track (TraceWriter::lane)"
    )]
    Crosses {
        /// Track uuid.
        track: u64,
        /// Begin timestamp.
        begin: u64,
        /// End timestamp.
        end: u64,
        /// End of the enclosing slice.
        parent_end: u64,
    },
    /// A slice ended while a slice opened inside it with `begin` was still open.
    #[error("slice on track {track:#x} ends at {end} ns while a slice begun inside it is open")]
    UnclosedInside {
        /// Track uuid.
        track: u64,
        /// End of the outer slice.
        end: u64,
    },
    /// `end` was called on a track whose innermost open slice was not opened with `begin`.
    #[error("end at {ts} ns on track {track:#x} has no matching begin")]
    UnmatchedEnd {
        /// Track uuid.
        track: u64,
        /// Timestamp of the `end` call.
        ts: u64,
    },
    /// A handle from another writer was used.
    #[error("{what} handle {index} does not belong to this writer")]
    ForeignHandle {
        /// "track" or "sequence".
        what: &'static str,
        /// The handle's index.
        index: u32,
    },
}
