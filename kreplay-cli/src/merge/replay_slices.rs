//! Rendering the tool's replay records as slices under their dispatch: each pass, snapshot,
//! restore and replay step (the snapshot's parts, the determinism check's hashing and
//! comparing, the release of the buffers), with its bytes; each also marks a window of
//! kreplay's own work on its thread ([`super::own_calls`]).

use std::io::Write;

use kreplay_common::stream::{Record, replay_step};

use super::gpu::Child;
use super::render::Renderer;
use crate::perfetto::WriterError;

impl<W: Write> Renderer<W> {
    /// Renders a `ReplayPass`, `Snapshot`, `Restore` or `ReplayStep` record of a stream whose
    /// header names process `pid` (other records are ignored).
    pub(super) fn replay_slice(
        &mut self,
        pid: u32,
        rec: &Record,
        late: bool,
    ) -> Result<(), WriterError> {
        match rec {
            Record::ReplayPass(r) => {
                self.own
                    .add_window(r.pid, r.tid, r.start_ns, r.end_ns, late);
                let name = format!("pass {}", r.pass);
                let ann = self.gpu.names.pass_args(r.pass, r.correlation, r.gpu_ns);
                // One name per pass number: written in the slice, not interned.
                self.child(&Child {
                    pid,
                    correlation: r.correlation,
                    name: &name,
                    inline_name: true,
                    start: r.start_ns,
                    end: r.end_ns,
                    args: &ann,
                })?;
            }
            Record::Snapshot(r) => {
                self.own
                    .add_window(r.pid, r.tid, r.start_ns, r.end_ns, late);
                let mut ann =
                    self.gpu
                        .names
                        .copy_args(r.bytes, r.regions, None, None, r.correlation);
                self.gpu.names.chunk.snapshot(r, &mut ann);
                self.child(&Child {
                    pid,
                    correlation: r.correlation,
                    name: "snapshot",
                    inline_name: false,
                    start: r.start_ns,
                    end: r.end_ns,
                    args: &ann,
                })?;
            }
            Record::Restore(r) => {
                self.own
                    .add_window(r.pid, r.tid, r.start_ns, r.end_ns, late);
                let mut ann = self.gpu.names.copy_args(
                    r.bytes,
                    r.regions,
                    Some(r.skipped),
                    Some(r.pass),
                    r.correlation,
                );
                self.gpu.names.chunk.restore(r, &mut ann);
                self.child(&Child {
                    pid,
                    correlation: r.correlation,
                    name: "restore",
                    inline_name: false,
                    start: r.start_ns,
                    end: r.end_ns,
                    args: &ann,
                })?;
            }
            Record::ReplayStep(r) => {
                self.own
                    .add_window(r.pid, r.tid, r.start_ns, r.end_ns, late);
                let ann = self.gpu.names.step_args(r.pass, r.bytes, r.correlation);
                self.child(&Child {
                    pid,
                    correlation: r.correlation,
                    name: replay_step::name(r.step),
                    inline_name: false,
                    start: r.start_ns,
                    end: r.end_ns,
                    args: &ann,
                })?;
            }
            _ => {}
        }
        Ok(())
    }
}
