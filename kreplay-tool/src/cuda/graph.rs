//! kreplay's own launches captured once into a CUDA graph and replayed with one
//! `cuGraphLaunch`: the one-pass restore and the kernel that publishes its counters go to the
//! device together: launched one after the other, the second launch's host time costs about
//! what publishing the counters saves (`tests/gpu/restore_bench.cu`, `graph_ms` against
//! `mapped_ms`; docs/gpu/h200-restore.md). Captured on a stream of
//! kreplay's own in relaxed mode, so the application's other threads may call CUDA meanwhile.

use super::backend::{CudaBackend, check};
use super::driver::GraphEntries;
use super::ffi::*;
use super::kernel_buffers::Captured;
use crate::engine::backend::BackendError;

/// One kernel launch to capture: function, name for errors, blocks, 64-bit parameters.
pub type Launch = (usize, &'static str, u64, Vec<u64>);

impl CudaBackend<'_> {
    /// The driver's graph entries, where it has them all.
    fn graphs(&self) -> Option<&GraphEntries> {
        self.tool().driver.graphs.as_ref()
    }

    /// Captures `launches`, in order, into one graph, instantiated and uploaded for the
    /// legacy default stream. `Unsupported` when the driver lacks the entries.
    pub(super) fn capture(
        &self,
        launches: &mut [Launch],
        key: Vec<u64>,
    ) -> Result<Captured, BackendError> {
        let g = self
            .graphs()
            .ok_or(BackendError::Unsupported("graph capture"))?;
        let mut stream: CUstream = core::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check("cuStreamCreate", unsafe {
            (g.stream_create)(&mut stream, STREAM_NON_BLOCKING)
        })?;
        let captured = self.capture_on(g, stream, launches, key);
        // SAFETY: the stream was created above; the graph does not refer to it after capture.
        let _ = unsafe { (g.stream_destroy)(stream) };
        captured
    }

    /// [`Self::capture`] on kreplay's `stream`.
    fn capture_on(
        &self,
        g: &GraphEntries,
        stream: CUstream,
        launches: &mut [Launch],
        key: Vec<u64>,
    ) -> Result<Captured, BackendError> {
        // SAFETY: `stream` is kreplay's own, not capturing.
        check("cuStreamBeginCapture_v2", unsafe {
            (g.begin_capture)(stream, STREAM_CAPTURE_MODE_RELAXED)
        })?;
        let mut recorded = Ok(());
        for (kernel, call, blocks, params) in launches.iter_mut() {
            recorded = self.launch_on(*kernel, call, *blocks, params, stream);
            if recorded.is_err() {
                break;
            }
        }
        let mut graph: CUgraph = core::ptr::null_mut();
        // SAFETY: ends the capture begun above (also after a failed launch, which invalidates
        // it); valid out-pointer.
        let ended = check("cuStreamEndCapture", unsafe {
            (g.end_capture)(stream, &mut graph)
        });
        let built = recorded.and(ended).and_then(|()| {
            let mut exec: CUgraphExec = core::ptr::null_mut();
            // SAFETY: `graph` is the graph just captured; valid out-pointer.
            check("cuGraphInstantiateWithFlags", unsafe {
                (g.instantiate)(&mut exec, graph, 0)
            })?;
            // SAFETY: `exec` was just instantiated; the legacy default stream, where it runs.
            let uploaded = check("cuGraphUpload", unsafe {
                (g.upload)(exec, core::ptr::null_mut())
            });
            if let Err(e) = uploaded {
                // SAFETY: `exec` was instantiated above and never launched.
                let _ = unsafe { (g.exec_destroy)(exec) };
                return Err(e);
            }
            Ok(exec)
        });
        match built {
            Ok(exec) => Ok(Captured { exec, graph, key }),
            Err(e) => {
                if !graph.is_null() {
                    // SAFETY: the graph came from the capture above and has no executable.
                    let _ = unsafe { (g.destroy)(graph) };
                }
                Err(e)
            }
        }
    }

    /// Launches `c` on the legacy default stream (the launches run in their captured order).
    pub(super) fn launch_captured(&self, c: &Captured) -> Result<(), BackendError> {
        let g = self
            .graphs()
            .ok_or(BackendError::Unsupported("graph launch"))?;
        // SAFETY: `c.exec` is a live executable graph of this context.
        check("cuGraphLaunch(kreplay restore)", unsafe {
            (g.launch)(c.exec, core::ptr::null_mut())
        })
    }

    /// Destroys `c` (the caller waited for its launches).
    pub(super) fn release(&self, c: Captured) {
        if let Some(g) = self.graphs() {
            // SAFETY: both handles came from `capture`; nothing launches them any more.
            unsafe {
                let _ = (g.exec_destroy)(c.exec);
                let _ = (g.destroy)(c.graph);
            }
        }
    }
}
