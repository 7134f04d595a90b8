//! The tool's GPU work records: each dispatch or copy is given the flow from the launch or copy
//! call that caused it (a `Correlation` record names the call, else the submit time inside a
//! held call of its thread does) and handed to the GPU render ([`super::super::gpu`]).

use std::io::Write;

use kreplay_common::stream::{Dispatch, GpuCopy};

use super::super::gpu::soft;
use super::super::labels::process_label;
use super::Renderer;
use crate::perfetto::WriterError;

impl<W: Write> Renderer<W> {
    /// A kernel dispatch of the tool stream of process `pid`, merged at `now`.
    pub(super) fn dispatch(&mut self, pid: u32, d: &Dispatch, now: u64) -> Result<(), WriterError> {
        let dpid = if d.pid == 0 { pid } else { d.pid };
        let linked = self.externals.remove(&(dpid, d.correlation));
        // A Correlation record names the launch call; else the submit time does.
        let flow = linked
            .and_then(|(tid, ts, _)| self.hold.flow_from_launch(dpid, tid, ts))
            .or_else(|| self.hold.flow_from_launch(dpid, d.tid, d.submit_ns));
        match flow {
            Some(_) => self.stats.flows += 1,
            None => {
                self.stats.unmatched_dispatches += 1;
                // tid 0: the tool never learnt the launching thread.
                tracing::debug!(
                    pid = dpid,
                    tid = d.tid,
                    correlation = d.correlation,
                    submit_ns = d.submit_ns,
                    merged_at = now,
                    kernel = %d.kernel,
                    "a dispatch with no launch call held on its thread at its submit time"
                );
            }
        }
        let names = &self.process_names;
        let pname = |pid: u32| process_label(names, pid);
        let r = self.gpu.hold(
            &mut self.w,
            dpid,
            d,
            flow,
            linked.map(|(_, _, ext)| ext),
            &pname,
        );
        soft(r, &mut self.stats.unrenderable)?;
        // A dispatch that already started (or has no GPU times) goes out now.
        self.advance(now)
    }

    /// A copy or memset of the tool stream of process `pid`, merged at `now`.
    pub(super) fn gpu_copy(&mut self, pid: u32, c: &GpuCopy, now: u64) -> Result<(), WriterError> {
        let cpid = if c.pid == 0 { pid } else { c.pid };
        let flow = self.hold.flow_from_copy(cpid, c.tid, c.submit_ns);
        match flow {
            Some(_) => self.stats.flows += 1,
            None => self.stats.unmatched_copies += 1,
        }
        let names = &self.process_names;
        let pname = |pid: u32| process_label(names, pid);
        let r = self.gpu.hold_copy(&mut self.w, cpid, c, flow, &pname);
        soft(r, &mut self.stats.unrenderable)?;
        self.advance(now)
    }
}
