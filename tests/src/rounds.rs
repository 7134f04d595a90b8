//! A test program driven one round at a time: it prints `ready`, then runs a round and prints
//! `round N` for each `go` line on its stdin, and ends at EOF (tests/cuda-sim's `loop`,
//! tests/trace/gpu_timeline.c's `rounds`): what the attach tests run kreplay against.
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The program, running.
pub struct Rounds {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    lines: Vec<String>,
}

impl Rounds {
    /// Starts `c` with stdin and stdout piped; returns once it printed `ready`.
    pub fn start(mut c: Command) -> Rounds {
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the rounds program");
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut r = Rounds {
            child,
            stdin,
            out,
            lines: Vec::new(),
        };
        assert_eq!(r.line(), "ready");
        r
    }

    /// The program's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn line(&mut self) -> String {
        let mut s = String::new();
        self.out.read_line(&mut s).unwrap();
        self.lines.push(s.clone());
        s.trim_end().to_owned()
    }

    /// Runs `n` rounds, each finished (its line printed) before this returns.
    pub fn rounds(&mut self, n: usize) {
        for _ in 0..n {
            self.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
            let l = self.line();
            assert!(l.starts_with("round "), "{l}");
        }
    }

    /// Ends the program (it must exit 0); returns everything it printed.
    pub fn finish(mut self) -> String {
        drop(self.stdin.take());
        loop {
            let mut s = String::new();
            if self.out.read_line(&mut s).unwrap() == 0 {
                break;
            }
            self.lines.push(s);
        }
        assert!(self.child.wait().unwrap().success());
        self.lines.concat()
    }
}
