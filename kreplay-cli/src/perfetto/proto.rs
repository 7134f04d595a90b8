//! The Perfetto trace messages kreplay emits, as a small hand-written prost schema.
//!
//! Why this route: the `perfetto_protos` crate (what `cargo add perfetto-protos` resolves to)
//! is built on rust-protobuf and took 9–12 minutes and ~350 MB of target to build on the dev
//! machine (docs/perfetto.md). Running protoc from a build script would add a tool dependency
//! and a build step for ~300 lines of output. These derives cover exactly the fields kreplay writes,
//! build in seconds and need neither protoc nor a build script. Protobuf is forward
//! compatible, so a subset schema produces bytes any full decoder (trace_processor, the UI, the
//! `perfetto` PyPI package) reads.
//!
//! Field numbers and wire types are the official ones from
//! `protos/perfetto/trace/{trace,trace_packet}.proto`,
//! `protos/perfetto/trace/track_event/{track_event,track_descriptor,process_descriptor,
//! thread_descriptor,counter_descriptor,debug_annotation}.proto` and
//! `protos/perfetto/trace/interned_data/interned_data.proto`, checked against the generated
//! descriptors of the `perfetto` 0.59.1 PyPI package (`perfetto_trace_pb2`).
//!
//! The hot path (slice begin/end, counter values) does not use these structs: it is encoded by
//! hand in `wire.rs` (see the benchmark for why). These structs encode the cold packets (track
//! descriptors) and are the reference the hand encoder is tested against.

/// `perfetto.protos.Trace`: the whole file is one of these.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    /// Field 1: every packet of the trace.
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `TracePacket.SequenceFlags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SequenceFlags {
    /// No flag.
    SeqUnspecified = 0,
    /// Incremental state (interning tables) of the sequence was cleared before this packet.
    SeqIncrementalStateCleared = 1,
    /// This packet needs the sequence's incremental state to be decoded.
    SeqNeedsIncrementalState = 2,
}

/// `perfetto.protos.TracePacket`, the fields kreplay writes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// Field 8: timestamp in ns of the default trace clock.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// Field 10: the writer sequence this packet belongs to.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// Field 12: names interned on this sequence by this packet.
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// Field 13: a bit set of `SequenceFlags`.
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// Field 42: packets were lost on this sequence before this one.
    #[prost(uint32, optional, tag = "42")]
    pub previous_packet_dropped: Option<u32>,
    /// Field 87: this is the first packet the writer wrote on its sequence.
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
    /// The `data` oneof: a track event or a track descriptor.
    #[prost(oneof = "PacketData", tags = "11, 60")]
    pub data: Option<PacketData>,
}

/// `TracePacket.data`, the two members kreplay uses.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum PacketData {
    /// Field 11.
    #[prost(message, tag = "11")]
    TrackEvent(TrackEvent),
    /// Field 60.
    #[prost(message, tag = "60")]
    TrackDescriptor(TrackDescriptor),
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// Field 1: the track's id, referenced by `TrackEvent.track_uuid`.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// Field 5: the parent track (a process or device track).
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// Field 2: the display name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// Field 3: set on process tracks.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// Field 4: set on thread tracks.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// Field 8: set on counter tracks.
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// Field 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Field 6.
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// Field 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Field 2 (int64 in the official schema).
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    /// Field 5.
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `CounterDescriptor.Unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CounterUnit {
    /// No unit.
    UnitUnspecified = 0,
    /// Nanoseconds.
    UnitTimeNs = 1,
    /// A plain count.
    UnitCount = 2,
    /// Bytes (the UI formats KiB/MiB/GiB).
    UnitSizeBytes = 3,
}

/// `perfetto.protos.CounterDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {
    /// Field 3: a `CounterUnit`.
    #[prost(enumeration = "CounterUnit", optional, tag = "3")]
    pub unit: Option<i32>,
    /// Field 6: a free-form unit name, used when no enum value fits.
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
}

/// `TrackEvent.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum EventType {
    /// Unset.
    TypeUnspecified = 0,
    /// Opens a slice on the track.
    TypeSliceBegin = 1,
    /// Closes the innermost open slice on the track.
    TypeSliceEnd = 2,
    /// A zero-duration event.
    TypeInstant = 3,
    /// A counter value.
    TypeCounter = 4,
}

/// `perfetto.protos.TrackEvent`, the fields kreplay writes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// Field 22: category names, not interned.
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// Field 9: an `EventType`.
    #[prost(enumeration = "EventType", optional, tag = "9")]
    pub r#type: Option<i32>,
    /// Field 11: the track the event is on.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// Field 4.
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// Field 47 (fixed64): flows this event starts or continues.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// Field 48 (fixed64): flows this event ends.
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
    /// The `name_field` oneof.
    #[prost(oneof = "EventNameField", tags = "10, 23")]
    pub name_field: Option<EventNameField>,
    /// The `counter_value_field` oneof.
    #[prost(oneof = "CounterValueField", tags = "30, 44")]
    pub counter_value_field: Option<CounterValueField>,
}

/// `TrackEvent.name_field`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum EventNameField {
    /// Field 10: an iid of `InternedData.event_names` on this sequence.
    #[prost(uint64, tag = "10")]
    NameIid(u64),
    /// Field 23: the name inline.
    #[prost(string, tag = "23")]
    Name(String),
}

/// `TrackEvent.counter_value_field`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum CounterValueField {
    /// Field 30.
    #[prost(int64, tag = "30")]
    CounterValue(i64),
    /// Field 44.
    #[prost(double, tag = "44")]
    DoubleCounterValue(f64),
}

/// `perfetto.protos.DebugAnnotation`, scalar values only.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// The `name_field` oneof.
    #[prost(oneof = "AnnotationNameField", tags = "1, 10")]
    pub name_field: Option<AnnotationNameField>,
    /// The `value` oneof.
    #[prost(oneof = "AnnotationValue", tags = "2, 3, 4, 5, 6, 7")]
    pub value: Option<AnnotationValue>,
}

/// `DebugAnnotation.name_field`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AnnotationNameField {
    /// Field 1: an iid of `InternedData.debug_annotation_names`.
    #[prost(uint64, tag = "1")]
    NameIid(u64),
    /// Field 10: the name inline.
    #[prost(string, tag = "10")]
    Name(String),
}

/// `DebugAnnotation.value`, the scalar members.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AnnotationValue {
    /// Field 2.
    #[prost(bool, tag = "2")]
    BoolValue(bool),
    /// Field 3.
    #[prost(uint64, tag = "3")]
    UintValue(u64),
    /// Field 4.
    #[prost(int64, tag = "4")]
    IntValue(i64),
    /// Field 5.
    #[prost(double, tag = "5")]
    DoubleValue(f64),
    /// Field 6.
    #[prost(string, tag = "6")]
    StringValue(String),
    /// Field 7: shown in hex by the UI.
    #[prost(uint64, tag = "7")]
    PointerValue(u64),
}

/// `perfetto.protos.InternedData`, the two tables kreplay fills.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// Field 2.
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedString>,
    /// Field 3.
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedString>,
}

/// `EventName` and `DebugAnnotationName`: both are `{iid = 1, name = 2}`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    /// Field 1: the id, never 0.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Field 2.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}
