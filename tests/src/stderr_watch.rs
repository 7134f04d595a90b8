//! Reading a child's stderr on a thread, to wait for the line that says it is ready.
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

/// A child's stderr read on a thread: [`StderrWatch::wait_for`] blocks until a line starting
/// with a prefix arrives, [`StderrWatch::finish`] returns everything read.
pub struct StderrWatch {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl StderrWatch {
    /// Takes `child`'s piped stderr.
    pub fn new(child: &mut std::process::Child) -> StderrWatch {
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        StderrWatch {
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// Blocks until a line starting with `prefix` arrives (panics after 120 s).
    pub fn wait_for(&mut self, prefix: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.starts_with(prefix);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!("no line starting with {prefix:?}; got {:?}", self.seen),
            }
        }
    }

    /// The last line read so far (after [`StderrWatch::wait_for`]: the line it waited for).
    pub fn last(&self) -> Option<&str> {
        self.seen.last().map(String::as_str)
    }

    /// Every line read, until the child closed its stderr.
    pub fn finish(mut self) -> String {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(120)) {
            self.seen.push(line);
        }
        self.seen.join("\n") + "\n"
    }
}
