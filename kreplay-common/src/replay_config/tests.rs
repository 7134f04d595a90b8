//! Encoding and decoding the replay settings: round trips, every refusal's exact message.

use super::*;

fn decode(pairs: &[(&str, &str)]) -> Result<ReplaySettings, ConfigError> {
    ReplaySettings::decode(pairs.iter().copied())
}

fn full() -> ReplaySettings {
    ReplaySettings {
        passes: Some(5),
        kernel: Some("^sax(py)?$".into()),
        max_dispatches: Some(3),
        check_determinism: Some(false),
        chunk_size: Some(64 << 10),
        restore: Some(RestoreMode::Dirty),
        snapshot_budget: Some(40960),
        snapshot_placement: Some(SnapshotPlacement::Pinned),
        device_check: Some(DeviceCheck::Compare),
        output_dir: Some("/tmp/kreplay-replay-7".into()),
        progress: Some("/tmp/kreplay-replay-7/progress".into()),
        gpu_timeline: Some(true),
    }
}

#[test]
fn encoding_lists_the_set_settings_in_order() {
    let strs = |s: &ReplaySettings| -> Vec<(&str, String)> {
        s.encode()
            .into_iter()
            .map(|(k, v)| (k, v.into_string().unwrap()))
            .collect()
    };
    assert_eq!(
        strs(&full()),
        [
            ("KREPLAY_PASSES", "5"),
            ("KREPLAY_KERNEL", "^sax(py)?$"),
            ("KREPLAY_MAX_DISPATCHES", "3"),
            ("KREPLAY_CHECK_DETERMINISM", "0"),
            ("KREPLAY_CHUNK_SIZE", "64K"),
            ("KREPLAY_RESTORE", "dirty"),
            ("KREPLAY_SNAPSHOT_BUDGET", "40K"),
            ("KREPLAY_SNAPSHOT_PLACEMENT", "pinned"),
            ("KREPLAY_DEVICE_CHECK", "compare"),
            ("KREPLAY_OUTPUT_DIR", "/tmp/kreplay-replay-7"),
            ("KREPLAY_PROGRESS", "/tmp/kreplay-replay-7/progress"),
            ("KREPLAY_GPU_TIMELINE", "1"),
        ]
        .map(|(k, v)| (k, v.to_owned()))
    );
    assert_eq!(strs(&ReplaySettings::default()), []);
    let few = ReplaySettings {
        passes: Some(2),
        snapshot_budget: Some(1000),
        ..ReplaySettings::default()
    };
    assert_eq!(
        strs(&few),
        [("KREPLAY_PASSES", "2"), ("KREPLAY_SNAPSHOT_BUDGET", "1000")]
            .map(|(k, v)| (k, v.to_owned()))
    );
}

#[test]
fn decoding_what_was_encoded_gives_it_back() {
    let cases = [
        full(),
        ReplaySettings::default(),
        ReplaySettings {
            passes: Some(1),
            check_determinism: Some(true),
            chunk_size: Some(MIN_CHUNK),
            restore: Some(RestoreMode::Auto),
            snapshot_budget: Some(0),
            snapshot_placement: Some(SnapshotPlacement::Device),
            device_check: Some(DeviceCheck::Hash),
            gpu_timeline: Some(false),
            ..ReplaySettings::default()
        },
        ReplaySettings {
            passes: Some(u32::MAX),
            kernel: Some("".into()),
            max_dispatches: Some(0),
            chunk_size: Some(MAX_CHUNK),
            restore: Some(RestoreMode::Full),
            snapshot_budget: Some(u64::MAX),
            snapshot_placement: Some(SnapshotPlacement::Pageable),
            ..ReplaySettings::default()
        },
        ReplaySettings {
            snapshot_placement: Some(SnapshotPlacement::Auto),
            snapshot_budget: Some(3 << 30),
            ..ReplaySettings::default()
        },
    ];
    for s in cases {
        assert_eq!(ReplaySettings::decode(s.encode()), Ok(s.clone()), "{s:?}");
    }
}

#[test]
fn every_setting_has_one_variable_and_round_trips_its_choices() {
    for s in Setting::ALL {
        assert_eq!(Setting::of_var(s.var()), Some(s));
        assert!(s.var().starts_with(PREFIX) && is_known(s.var()), "{s:?}");
    }
    for v in OTHER_KNOWN {
        assert_eq!(Setting::of_var(v), None);
        assert!(v.starts_with(PREFIX) && is_known(v), "{v}");
    }
    assert_eq!(Setting::Progress.var(), crate::progress::ENV);
    assert_eq!(Setting::SnapshotBudget.flag(), Some("--snapshot-budget"));
    assert_eq!(Setting::CheckDeterminism.flag(), None);
    for (i, n) in RestoreMode::NAMES.iter().enumerate() {
        let r: RestoreMode = n.parse().unwrap();
        assert_eq!((r.as_str(), i), (*n, r as usize));
    }
    for n in SnapshotPlacement::NAMES {
        assert_eq!(n.parse::<SnapshotPlacement>().unwrap().as_str(), *n);
    }
    for n in DeviceCheck::NAMES {
        assert_eq!(n.parse::<DeviceCheck>().unwrap().as_str(), *n);
    }
    assert_eq!(
        SnapshotPlacement::NAMES,
        ["auto", "device", "pinned", "pageable"]
    );
    assert_eq!(" full ".parse::<RestoreMode>(), Ok(RestoreMode::Full));
}

#[test]
fn values_parse_and_other_variables_are_left_alone() {
    let c = decode(&[
        ("KREPLAY_PASSES", " 5 "),
        ("KREPLAY_KERNEL", "^sax"),
        ("KREPLAY_MAX_DISPATCHES", "3"),
        ("KREPLAY_CHUNK_SIZE", "16384"),
        ("KREPLAY_SNAPSHOT_BUDGET", "3M"),
        ("KREPLAY_LOG", "debug"),
        ("KREPLAY_FORCE_PANIC", "all"),
        ("PATH", "x"),
    ])
    .unwrap();
    assert_eq!(
        c,
        ReplaySettings {
            passes: Some(5),
            kernel: Some("^sax".into()),
            max_dispatches: Some(3),
            chunk_size: Some(16384),
            snapshot_budget: Some(3 << 20),
            ..ReplaySettings::default()
        }
    );
}

#[test]
fn each_bad_value_is_refused_naming_its_flag_and_variable() {
    for (var, value, message) in [
        (
            "KREPLAY_PASSES",
            "0",
            r#"--passes: not an integer >= 1: "0" (KREPLAY_PASSES)"#,
        ),
        (
            "KREPLAY_PASSES",
            "two",
            r#"--passes: not an integer >= 1: "two" (KREPLAY_PASSES)"#,
        ),
        (
            "KREPLAY_KERNEL",
            "(",
            "--kernel: not a valid regex: regex parse error:     (     ^ error: unclosed group: \"(\" \
             (KREPLAY_KERNEL)",
        ),
        (
            "KREPLAY_MAX_DISPATCHES",
            "-1",
            r#"--max-dispatches: not a count: "-1" (KREPLAY_MAX_DISPATCHES)"#,
        ),
        (
            "KREPLAY_CHECK_DETERMINISM",
            "yes",
            r#"KREPLAY_CHECK_DETERMINISM: must be 0 or 1: "yes""#,
        ),
        (
            "KREPLAY_CHUNK_SIZE",
            "3000",
            r#"--chunk-size: not a power of two from 4K to 1G: "3000" (KREPLAY_CHUNK_SIZE)"#,
        ),
        (
            "KREPLAY_CHUNK_SIZE",
            "1K",
            r#"--chunk-size: not a power of two from 4K to 1G: "1K" (KREPLAY_CHUNK_SIZE)"#,
        ),
        (
            "KREPLAY_CHUNK_SIZE",
            "2G",
            r#"--chunk-size: not a power of two from 4K to 1G: "2G" (KREPLAY_CHUNK_SIZE)"#,
        ),
        (
            "KREPLAY_RESTORE",
            "some",
            r#"--restore: must be auto, dirty or full: "some" (KREPLAY_RESTORE)"#,
        ),
        (
            "KREPLAY_SNAPSHOT_BUDGET",
            "lots",
            r#"--snapshot-budget: not a size (bytes, or with K/M/G): "lots" (KREPLAY_SNAPSHOT_BUDGET)"#,
        ),
        (
            "KREPLAY_SNAPSHOT_PLACEMENT",
            "gpu",
            r#"--snapshot-placement: must be auto, device, pinned or pageable: "gpu" (KREPLAY_SNAPSHOT_PLACEMENT)"#,
        ),
        (
            "KREPLAY_DEVICE_CHECK",
            "bytes",
            r#"--device-check: must be hash or compare: "bytes" (KREPLAY_DEVICE_CHECK)"#,
        ),
    ] {
        let err = decode(&[(var, value)]).unwrap_err();
        assert_eq!(err.to_string(), message, "{var}={value}");
        let ConfigError::Bad {
            setting, value: v, ..
        } = err
        else {
            panic!("{var}={value}: {err:?}");
        };
        assert_eq!((setting.var(), v.as_str()), (var, value));
    }
}

#[test]
fn unknown_variables_and_values_that_are_not_text_are_refused() {
    let err = decode(&[("KREPLAY_PASES", "2")]).unwrap_err();
    assert_eq!(err, ConfigError::Unknown("KREPLAY_PASES".into()));
    assert_eq!(
        err.to_string(),
        "unknown environment variable KREPLAY_PASES"
    );
    // Only the `KREPLAY_` prefix is the contract's: `KREPLAYX` and other names are not looked at.
    assert_eq!(
        decode(&[("KREPLAYX", "1"), ("XKREPLAY_PASSES", "0")]),
        Ok(ReplaySettings::default())
    );
    use std::os::unix::ffi::OsStrExt;
    let not_utf8 = OsStr::from_bytes(b"4\xffK");
    assert_eq!(
        ReplaySettings::decode([("KREPLAY_CHUNK_SIZE", not_utf8)])
            .unwrap_err()
            .to_string(),
        "--chunk-size: not UTF-8: \"4\u{fffd}K\" (KREPLAY_CHUNK_SIZE)"
    );
    // A path need not be text.
    let dir = OsStr::from_bytes(b"/tmp/\xff");
    assert_eq!(
        ReplaySettings::decode([("KREPLAY_OUTPUT_DIR", dir)]),
        Ok(ReplaySettings {
            output_dir: Some(dir.into()),
            ..ReplaySettings::default()
        })
    );
}

#[test]
fn the_flag_parsers_are_the_decoders() {
    assert_eq!(parse_passes("3"), Ok(3));
    assert_eq!(parse_count(" 7"), Ok(7));
    assert_eq!(parse_size("512M"), Ok(512 << 20));
    assert_eq!(parse_chunk_size("1G"), Ok(MAX_CHUNK));
    assert_eq!(parse_chunk_size("4K"), Ok(MIN_CHUNK));
    assert_eq!(parse_switch("1"), Ok(true));
    assert_eq!(parse_kernel("gemm|conv"), Ok("gemm|conv".to_owned()));
    assert_eq!(
        parse_size("1.5M"),
        Err("not a size (bytes, or with K/M/G)".to_owned())
    );
}
