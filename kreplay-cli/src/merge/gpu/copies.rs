//! Copies and memsets: held like dispatches until the merge reaches their start, then a slice
//! on their device's copy track with bytes, direction and rate, ending the flow from their call.

use std::io::Write;

use kreplay_common::stream::{GpuCopy, copy_kind};

use super::{Gpu, HeldDispatch, Work, valid_times};
use crate::perfetto::{Annotation, EventArgs, TraceWriter, Value, WriterError};

impl Gpu {
    /// Takes a copy or memset of process `pid`; its slice is written once the merge reaches
    /// its start.
    pub fn hold_copy<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        c: &GpuCopy,
        flow: Option<u64>,
        process_name: &dyn Fn(u32) -> String,
    ) -> Result<(), WriterError> {
        let device = self.device(w, pid, c.device, process_name)?;
        let track = self.copy_track(w, pid, c.device, device, c.engine)?;
        self.push_held(HeldDispatch {
            order: 0,
            pid,
            work: Work::Copy(c.clone()),
            device: (device, c.device),
            queue: track,
            flow,
            external: None,
        });
        Ok(())
    }

    pub(super) fn write_copy<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        h: &HeldDispatch,
    ) -> Result<(), WriterError> {
        let Work::Copy(c) = &h.work else {
            return Ok(());
        };
        let n = &self.names;
        let direction = copy_kind::name(c.kind);
        let valid = valid_times(c.submit_ns, c.start_ns, c.end_ns);
        let mut ann = vec![
            Annotation {
                name: n.bytes,
                value: Value::Uint(c.bytes),
            },
            Annotation {
                name: n.direction,
                value: Value::Str(direction),
            },
            Annotation {
                name: n.correlation,
                value: Value::Uint(c.correlation),
            },
        ];
        if valid && c.end_ns > c.start_ns {
            // Bytes per ns are GB/s.
            ann.push(Annotation {
                name: n.gbps,
                value: Value::Double(c.bytes as f64 / (c.end_ns - c.start_ns) as f64),
            });
        }
        let flows: Vec<u64> = h.flow.into_iter().collect();
        let args = EventArgs {
            annotations: &ann,
            terminating_flow_ids: &flows,
            ..Default::default()
        };
        let name = w.event_name(if c.kind == copy_kind::MEMSET {
            "memset"
        } else {
            match c.kind {
                copy_kind::HOST_TO_DEVICE => "copy HtoD",
                copy_kind::DEVICE_TO_HOST => "copy DtoH",
                copy_kind::DEVICE_TO_DEVICE => "copy DtoD",
                copy_kind::HOST_TO_HOST => "copy HtoH",
                _ => "copy",
            }
        });
        self.copies += 1;
        if !valid {
            let seq = self.seq_at(w, c.submit_ns);
            return w.instant(seq, h.queue, name, c.submit_ns, &args);
        }
        let lane = w.lane(h.queue, c.start_ns, c.end_ns)?;
        let seq = self.seq_at(w, c.start_ns);
        w.slice(seq, lane, name, c.start_ns, c.end_ns, &args)?;
        self.busy
            .add(w, (h.pid, h.device.1), h.device.0, c.start_ns, c.end_ns)
    }
}
