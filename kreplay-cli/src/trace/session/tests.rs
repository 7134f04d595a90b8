//! The trace loop's decisions, driven with fake probes and recording.

use super::*;

/// Fake probes: counts what the loop asked of them.
#[derive(Default)]
struct Probes {
    lost: u64,
    rescanned: Vec<u32>,
    rescans_all: u32,
    debug_flushes: u32,
    /// What `followed` answers.
    followed: Vec<u32>,
}

impl Probed for Probes {
    fn counters(&mut self) -> anyhow::Result<Counters> {
        Ok(Counters {
            ringbuf_drops: self.lost,
            ..Counters::default()
        })
    }
    fn rescan_pid(&mut self, pid: u32) {
        self.rescanned.push(pid);
    }
    fn rescan_all(&mut self) {
        self.rescans_all += 1;
    }
    fn followed(&mut self) -> Vec<u32> {
        self.followed.clone()
    }
    fn flush_debug_log(&mut self) {
        self.debug_flushes += 1;
    }
}

/// Fake recording: counts drains, markers, remembered pids, closes.
#[derive(Default)]
struct Rec {
    drains: u32,
    marked: Vec<u64>,
    remembered: Vec<u32>,
    forgets: u32,
    closes: u32,
    records: u64,
}

impl Recording for Rec {
    fn drain(&mut self) {
        self.drains += 1;
    }
    fn mark_losses(&mut self, c: &Counters) -> anyhow::Result<()> {
        self.marked.push(c.lost());
        Ok(())
    }
    fn remember(&mut self, pid: u32) {
        self.remembered.push(pid);
    }
    fn forget_exited(&mut self, _: &dyn Fn(u32) -> bool) {
        self.forgets += 1;
    }
    fn close_idle(&mut self) {
        self.closes += 1;
    }
    fn records(&self) -> u64 {
        self.records
    }
    fn threads(&self) -> usize {
        3
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn records_are_drained_on_data_and_a_stop_finishes_after_the_debug_messages() {
    let t0 = Instant::now();
    let mut s = Session::new(Target::All, None, t0);
    let (mut p, mut r) = (Probes::default(), Rec::default());
    let yes = |_| true;
    assert_eq!(
        s.on(Wake::Data, t0, &mut p, &mut r, &yes).unwrap(),
        (Next::Continue, None)
    );
    assert_eq!((r.drains, p.debug_flushes, p.rescans_all), (1, 0, 0));
    assert_eq!(
        s.on(Wake::Stop, t0, &mut p, &mut r, &yes).unwrap(),
        (Next::Finish, None)
    );
    assert_eq!((r.drains, p.debug_flushes), (1, 1));
}

#[test]
fn a_tick_rescans_what_is_traced_and_marks_losses() {
    let t0 = Instant::now();
    let yes = |_| true;
    // -p: every pid rescanned and its mappings read.
    let mut s = Session::new(Target::Pids(vec![10, 11]), None, t0);
    let (mut p, mut r) = (
        Probes {
            lost: 4,
            ..Probes::default()
        },
        Rec::default(),
    );
    let (next, status) = s
        .on(Wake::Tick, t0 + ms(200), &mut p, &mut r, &yes)
        .unwrap();
    assert_eq!((next, status), (Next::Continue, None));
    assert_eq!(p.rescanned, [10, 11]);
    assert_eq!(r.remembered, [10, 11]);
    assert_eq!((r.drains, r.marked.clone(), r.forgets), (1, vec![4], 1));
    // --all: one rescan of every process.
    let mut s = Session::new(Target::All, None, t0);
    let (mut p, mut r) = (Probes::default(), Rec::default());
    s.on(Wake::Tick, t0 + ms(200), &mut p, &mut r, &yes)
        .unwrap();
    assert_eq!(
        (p.rescans_all, p.rescanned.len(), r.remembered.len()),
        (1, 0, 0)
    );
    // -- CMD: the command's pid.
    let mut s = Session::new(Target::Command(42), None, t0);
    let (mut p, mut r) = (Probes::default(), Rec::default());
    s.on(Wake::Tick, t0 + ms(200), &mut p, &mut r, &yes)
        .unwrap();
    assert_eq!(
        (p.rescanned.clone(), r.remembered.clone()),
        (vec![42], vec![42])
    );
}

#[test]
fn tracing_pids_finishes_once_every_one_has_exited() {
    let t0 = Instant::now();
    let mut s = Session::new(Target::Pids(vec![10, 11]), None, t0);
    let (mut p, mut r) = (Probes::default(), Rec::default());
    let only_11 = |pid| pid == 11;
    let (next, _) = s
        .on(Wake::Tick, t0 + ms(200), &mut p, &mut r, &only_11)
        .unwrap();
    assert_eq!(next, Next::Continue);
    let none = |_| false;
    let (next, _) = s
        .on(Wake::Tick, t0 + ms(400), &mut p, &mut r, &none)
        .unwrap();
    assert_eq!(next, Next::Finish);
    // The last tick still drained and marked losses, and rescanned nothing.
    assert_eq!(
        (r.drains, r.marked.len(), p.rescanned),
        (2, 2, vec![10, 11])
    );
}

#[test]
fn followed_descendants_are_rescanned_and_keep_a_pid_trace_going() {
    let t0 = Instant::now();
    // -p 10 --children: 10 has exited, its child 12 lives on.
    let mut s = Session::new(Target::Pids(vec![10]), None, t0);
    let (mut p, mut r) = (
        Probes {
            followed: vec![10, 12],
            ..Probes::default()
        },
        Rec::default(),
    );
    let only_12 = |pid| pid == 12;
    let (next, _) = s
        .on(Wake::Tick, t0 + ms(200), &mut p, &mut r, &only_12)
        .unwrap();
    assert_eq!(next, Next::Continue);
    assert_eq!(
        (p.rescanned.clone(), r.remembered.clone()),
        (vec![10, 12], vec![10, 12])
    );
    let none = |_| false;
    let (next, _) = s
        .on(Wake::Tick, t0 + ms(400), &mut p, &mut r, &none)
        .unwrap();
    assert_eq!(next, Next::Finish);
    // -- CMD: the command and the processes it started.
    let mut s = Session::new(Target::Command(42), None, t0);
    let (mut p, mut r) = (
        Probes {
            followed: vec![42, 43, 44],
            ..Probes::default()
        },
        Rec::default(),
    );
    s.on(Wake::Tick, t0 + ms(200), &mut p, &mut r, &only_12)
        .unwrap();
    assert_eq!(p.rescanned, [42, 43, 44]);
    assert_eq!(r.remembered, [42, 43, 44]);
}

#[test]
fn idle_streams_are_closed_every_five_seconds() {
    let t0 = Instant::now();
    let mut s = Session::new(Target::All, None, t0);
    let (mut p, mut r) = (Probes::default(), Rec::default());
    let yes = |_| true;
    for k in 1..=60 {
        s.on(Wake::Tick, t0 + ms(200 * k), &mut p, &mut r, &yes)
            .unwrap();
    }
    // 12 s of ticks: closed at 5 s and 10 s.
    assert_eq!(r.closes, 2);
}

#[test]
fn the_status_line_is_every_tick_on_a_terminal_and_every_five_seconds_otherwise() {
    let t0 = Instant::now();
    let yes = |_| true;
    let (mut p, mut r) = (
        Probes {
            lost: 2,
            ..Probes::default()
        },
        Rec::default(),
    );
    let mut tty = Session::new(Target::All, Some(true), t0);
    // Before the first call: why the count is 0.
    let (_, st) = tty
        .on(Wake::Tick, t0 + ms(250), &mut p, &mut r, &yes)
        .unwrap();
    assert_eq!(
        st.map(|s| s.text),
        Some(
            "kreplay:    0.2s  0 events (no GPU runtime call seen yet)  2 dropped  3 threads"
                .into()
        )
    );
    r.records = 1000;
    let (_, st) = tty
        .on(Wake::Tick, t0 + ms(500), &mut p, &mut r, &yes)
        .unwrap();
    assert_eq!(
        st,
        Some(Status {
            // 1000 records in the 0.25 s since the last line.
            text: "kreplay:    0.5s  1000 events  4000 events/s  2 dropped  3 threads".into(),
            in_place: true,
        })
    );
    let mut file = Session::new(Target::All, Some(false), t0);
    let mut printed = Vec::new();
    for k in 1..=30 {
        r.records = 100 * k;
        let (_, st) = file
            .on(Wake::Tick, t0 + ms(200 * k), &mut p, &mut r, &yes)
            .unwrap();
        if let Some(st) = st {
            assert!(!st.in_place);
            printed.push(st.text);
        }
    }
    // 6 s of ticks: one line, at 5 s, over the 2500 records since the start.
    assert_eq!(
        printed,
        ["kreplay:    5.0s  2500 events  500 events/s  2 dropped  3 threads"]
    );
    // -q: none.
    let mut quiet = Session::new(Target::All, None, t0);
    let (_, st) = quiet
        .on(Wake::Tick, t0 + ms(10_000), &mut p, &mut r, &yes)
        .unwrap();
    assert_eq!(st, None);
}
