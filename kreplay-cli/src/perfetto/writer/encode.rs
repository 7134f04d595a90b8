//! Packet encoding for `TraceWriter`: track descriptors through prost, track events by hand
//! through `wire::Cursor`, and the output buffer's hand-off to the inner writer.

use std::io::Write;

use prost::Message as _;

use super::super::proto::{EventType, PacketData, TracePacket, TrackDescriptor};
use super::super::tracks::{Track, TrackState};
use super::super::{EventArgs, Value, WriterError, wire};
use super::{
    FIRST_FLAGS, INTERNED_ANNOTATION_NAMES, INTERNED_EVENT_NAMES, LATER_FLAGS, Name, Sequence,
    TraceWriter,
};

impl<W: Write> TraceWriter<W> {
    /// Registers a track and writes its descriptor, once per uuid.
    pub(super) fn define(
        &mut self,
        uuid: u64,
        parent: Option<u64>,
        name: &str,
        descriptor: impl FnOnce() -> TrackDescriptor,
    ) -> Result<Track, WriterError> {
        if let Some(&index) = self.by_uuid.get(&uuid) {
            return Ok(Track { index, uuid });
        }
        let index = u32::try_from(self.tracks.len()).expect("fewer than 2^32 tracks");
        self.tracks.push(TrackState::new(uuid, parent, name, index));
        self.by_uuid.insert(uuid, index);
        let s = &mut self.seqs[0];
        let first = !s.started;
        s.started = true;
        let packet = TracePacket {
            trusted_packet_sequence_id: Some(s.trusted_id),
            sequence_flags: Some(if first { FIRST_FLAGS } else { LATER_FLAGS } as u32),
            first_packet_on_sequence: first.then_some(true),
            data: Some(PacketData::TrackDescriptor(descriptor())),
            ..Default::default()
        };
        self.buf.push(0x0a); // Trace.packet: field 1, length-delimited
        packet
            .encode_length_delimited(&mut self.buf)
            .map_err(|source| WriterError::Encode {
                what: "TrackDescriptor packet",
                source,
            })?;
        self.packets += 1;
        self.maybe_flush()?;
        Ok(Track { index, uuid })
    }

    /// Encodes one TrackEvent packet into the buffer: header, any names it defines on the
    /// sequence, then the event. No heap allocation once the scratch vectors have grown.
    #[expect(
        clippy::too_many_arguments,
        reason = "the values of one record or call, as the caller has them"
    )]
    #[inline]
    pub(super) fn event(
        &mut self,
        seq: Sequence,
        ts: u64,
        kind: EventType,
        track: Track,
        name: Option<Name<'_>>,
        args: &EventArgs<'_>,
        counter: Option<Value<'_>>,
    ) -> Result<(), WriterError> {
        let s = &mut self.seqs[seq.0 as usize];
        self.new_names.clear();
        self.annotation_iids.clear();
        // Upper bound of the packet's size: the fixed fields (four framed messages, at most
        // eight varint fields), one framed entry per name / annotation (iid, value or string
        // key and length), one field per flow, then the strings themselves.
        const FIXED: usize = 4 * wire::MAX_FRAMING + 8 * wire::MAX_VARINT_FIELD;
        const ENTRY: usize = wire::MAX_FRAMING + 2 * wire::MAX_VARINT_FIELD;
        let mut bound = FIXED
            + ENTRY * args.annotations.len()
            + wire::MAX_VARINT_FIELD * (args.flow_ids.len() + args.terminating_flow_ids.len());
        let mut inline_name = None;
        let name_iid = match name {
            Some(Name::Interned(n)) => {
                let (iid, new) = s.event_iids.iid(n.0);
                if new {
                    self.new_names.push((INTERNED_EVENT_NAMES, iid, n.0));
                    bound += ENTRY + self.event_names.get(n.0).len();
                }
                Some(iid)
            }
            Some(Name::Inline(text)) => {
                inline_name = Some(text);
                bound += wire::MAX_VARINT_FIELD + text.len();
                None
            }
            None => None,
        };
        for a in args.annotations {
            let (iid, new) = s.annotation_iids.iid(a.name.0);
            if new {
                self.new_names
                    .push((INTERNED_ANNOTATION_NAMES, iid, a.name.0));
                bound += ENTRY + self.annotation_names.get(a.name.0).len();
            }
            if let Value::Str(text) = a.value {
                bound += text.len();
            }
            self.annotation_iids.push(iid);
        }
        let first = !s.started;
        s.started = true;
        let header = &s.header;
        let track_field = &self.tracks[track.index as usize].uuid_field;
        let (new_names, annotation_iids) = (&self.new_names, &self.annotation_iids);
        let (event_names, annotation_names) = (&self.event_names, &self.annotation_names);

        wire::append(&mut self.buf, bound, |c| {
            let packet = c.open(1);
            c.uint(8, ts);
            if first {
                c.uint(10, u64::from(s.trusted_id));
                c.uint(13, FIRST_FLAGS);
                c.uint(87, 1);
            } else {
                c.preencoded(header);
            }
            if !new_names.is_empty() {
                let interned = c.open(12);
                for &(field, iid, global) in new_names {
                    let text = if field == INTERNED_EVENT_NAMES {
                        event_names.get(global)
                    } else {
                        annotation_names.get(global)
                    };
                    let entry = c.open(field);
                    c.uint(1, iid);
                    c.str(2, text);
                    c.close(entry);
                }
                c.close(interned);
            }
            let te = c.open(11);
            c.uint(9, kind as u64);
            c.preencoded(track_field);
            if let Some(iid) = name_iid {
                c.uint(10, iid);
            }
            if let Some(text) = inline_name {
                c.str(23, text);
            }
            for (a, &iid) in args.annotations.iter().zip(annotation_iids) {
                let da = c.open(4);
                c.uint(1, iid);
                put_value(c, a.value);
                c.close(da);
            }
            for &id in args.flow_ids {
                c.fixed64(47, id);
            }
            for &id in args.terminating_flow_ids {
                c.fixed64(48, id);
            }
            match counter {
                Some(Value::Double(v)) => c.double(44, v),
                Some(Value::Int(v)) => c.int(30, v),
                _ => {}
            }
            c.close(te);
            c.close(packet);
        });
        self.packets += 1;
        Ok(())
    }

    /// Encodes a `TYPE_SLICE_END` packet: the hot half of every slice, so it skips the
    /// interning and annotation logic of `event`.
    #[inline]
    pub(super) fn end_event(&mut self, seq: usize, ts: u64, track: u32) {
        const BOUND: usize = 2 * wire::MAX_FRAMING + 6 * wire::MAX_VARINT_FIELD;
        let s = &mut self.seqs[seq];
        let first = !s.started;
        s.started = true;
        let (header, trusted_id) = (&s.header, s.trusted_id);
        let track_field = &self.tracks[track as usize].uuid_field;
        wire::append(&mut self.buf, BOUND, |c| {
            let packet = c.open(1);
            c.uint(8, ts);
            if first {
                c.uint(10, u64::from(trusted_id));
                c.uint(13, FIRST_FLAGS);
                c.uint(87, 1);
            } else {
                c.preencoded(header);
            }
            let te = c.open(11);
            c.uint(9, EventType::TypeSliceEnd as u64);
            c.preencoded(track_field);
            c.close(te);
            c.close(packet);
        });
        self.packets += 1;
    }

    #[inline]
    pub(super) fn maybe_flush(&mut self) -> Result<(), WriterError> {
        if self.buf.len() >= self.opts.buffer_bytes {
            self.write_buffer()?;
        }
        Ok(())
    }

    pub(super) fn write_buffer(&mut self) -> Result<(), WriterError> {
        if let Some(out) = self.out.as_mut() {
            out.write_all(&self.buf).map_err(|source| {
                self.failed = true;
                WriterError::Io {
                    call: "write_all",
                    source,
                }
            })?;
            self.flushed_bytes += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}

/// Writes a debug annotation's value field.
#[inline(always)]
fn put_value(c: &mut wire::Cursor<'_>, value: Value<'_>) {
    match value {
        Value::Bool(v) => c.uint(2, u64::from(v)),
        Value::Uint(v) => c.uint(3, v),
        Value::Int(v) => c.int(4, v),
        Value::Double(v) => c.double(5, v),
        Value::Str(v) => c.str(6, v),
        Value::Pointer(v) => c.uint(7, v),
    }
}
