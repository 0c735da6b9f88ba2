//! Unit tests of `parsers`.

use super::*;
use joblet_core::JobRequest;

#[test]
fn cluster_node_names_are_host_names() {
    for good in ["gpu-07", "n1", "node.rack3.example", "GPU_7", " n2 "] {
        assert_eq!(cluster_node(good).unwrap(), good.trim(), "{good:?}");
    }
    for bad in ["", " ", "a b", "n1/x", "é", &"n".repeat(254)] {
        let e = cluster_node(bad).unwrap_err();
        assert!(e.contains("like gpu-07"), "{bad:?}: {e}");
    }
}

#[test]
fn names_follow_the_core_rule() {
    for name in [
        "python-3.11-ml",
        "data-lake",
        "a",
        "a b",
        "../x",
        "",
        "x/y",
        "é",
        &"n".repeat(128),
        &"n".repeat(129),
    ] {
        let req = JobRequest {
            command: "true".into(),
            runtime: name.into(),
            volumes: vec![name.into()],
            ..Default::default()
        };
        // An empty runtime means "none", so compare on the volume.
        assert_eq!(is_name(name), req.validate().is_ok(), "{name:?}");
    }
}

#[test]
fn runtime_names_take_an_optional_version() {
    for good in [
        "python-3.11-ml",
        "python-3.11-ml@1.0",
        "rt@2024.01.3-rc_1+cu122",
        "a@b",
    ] {
        assert_eq!(runtime_name(good), Ok(good.to_owned()), "{good}");
    }
    assert_eq!(runtime_base("python-3.11-ml@1.0"), "python-3.11-ml");
    assert_eq!(runtime_base("python-3.11-ml"), "python-3.11-ml");
    for bad in [
        "",
        "a b",
        "@1.0",
        "rt@",
        "rt@1.0@2",
        "rt@1 0",
        "rt@v/1",
        "../rt",
        "rt:1.0",
        &format!("rt@{}", "1".repeat(65)),
        &"n".repeat(129),
    ] {
        let e = runtime_name(bad).unwrap_err();
        assert_eq!(
            e,
            "expected NAME[@VERSION]: a runtime name of up to 128 letters, digits, '.', '-' and '_', \
             optionally @ and a version of letters, digits, '.', '-', '_' and '+', \
             like python-3.11-ml or python-3.11-ml@1.0",
            "{bad:?}"
        );
    }
}

#[test]
fn volume_mounts_take_ro_and_normalise_rw_away() {
    assert_eq!(volume_name("data-lake"), Ok("data-lake".into()));
    assert_eq!(volume_name("data-lake:ro"), Ok("data-lake:ro".into()));
    assert_eq!(volume_name("data-lake:rw"), Ok("data-lake".into()));
    assert_eq!(volume_base("data-lake:ro"), "data-lake");
    assert_eq!(volume_base("data-lake"), "data-lake");
    for bad in ["", ":ro", "../x", "/data", "a b:ro", "x:ro:ro", "x:"] {
        let e = volume_name(bad).unwrap_err();
        assert!(
            e.starts_with("expected --volume=NAME[:ro]: a volume name of")
                || e.starts_with("unknown mount mode"),
            "{bad:?}: {e}"
        );
        assert!(e.contains("like data-lake or data-lake:ro"), "{bad:?}: {e}");
    }
    assert_eq!(
        volume_name("x:RO").unwrap_err(),
        format!("unknown mount mode \"RO\": expected --volume={VOLUME_MOUNT_FORM}")
    );
    assert!(volume_name("x:ro:ro").unwrap_err().contains("\"ro:ro\""));
    // The volume commands take the bare name only.
    assert_eq!(volume_ref("data-lake"), Ok("data-lake".into()));
    assert!(volume_ref("data-lake:ro")
        .unwrap_err()
        .contains("like data-lake (a volume name, not a path)"));
    assert_eq!(extra_name("tensorflow"), Ok("tensorflow".into()));
    assert!(extra_name("tensor flow")
        .unwrap_err()
        .contains("like tensorflow"));
}

#[test]
fn volume_sizes_are_bytes() {
    assert_eq!(volume_size_bytes("1GB"), Ok(1 << 30));
    assert_eq!(volume_size_bytes("512MB"), Ok(512 << 20));
    assert_eq!(volume_size_bytes("16MB"), Ok(16 << 20));
    assert_eq!(volume_size_bytes("16"), Ok(16 << 20));
    assert_eq!(volume_size_bytes("2TB"), Ok(2 << 40));
    for bad in ["0", "0MB", "1.5GB", "-1GB", "big", "", "1PB"] {
        assert_eq!(
            volume_size_bytes(bad),
            Err(format!("expected {VOLUME_SIZE_FORM}")),
            "{bad:?}"
        );
    }
    let e = volume_size_bytes("9000000TB").unwrap_err();
    assert!(e.ends_with("at most 8796093022207 MB"), "{e}");
}

#[test]
fn numbers_refuse_negative_and_overflow() {
    assert_eq!(gpu_count("2"), Ok(GpuAsk { count: 2, milli: 0 }));
    assert_eq!(gpu_count("2.0"), Ok(GpuAsk { count: 2, milli: 0 }));
    assert_eq!(
        gpu_count("0.5"),
        Ok(GpuAsk {
            count: 1,
            milli: 500
        })
    );
    assert_eq!(
        gpu_count(".25"),
        Ok(GpuAsk {
            count: 1,
            milli: 250
        })
    );
    assert_eq!(
        gpu_count("0.125"),
        Ok(GpuAsk {
            count: 1,
            milli: 125
        })
    );
    for bad in ["1.5", "0.0005", "0.", "0.5x", "-0.5", "0,5"] {
        let e = gpu_count(bad).unwrap_err();
        assert!(
            e.contains("share of one GPU from 0.001 to 0.999"),
            "{bad}: {e}"
        );
    }
    for bad in ["-1", "1.5", "99999999999999999999", "257", "x", ""] {
        let e = gpu_count(bad).unwrap_err();
        assert!(
            e.starts_with("expected a whole number of GPUs from 0 to 256"),
            "{bad}: {e}"
        );
    }
    assert_eq!(cpu_percent("800"), Ok(800));
    assert!(cpu_percent("-5").is_err());
    assert_eq!(iobps(&i64::MAX.to_string()), Ok(i64::MAX));
    assert!(iobps("9223372036854775808").is_err());
}

#[test]
fn sizes_and_durations() {
    assert_eq!(memory_mb("16GB"), Ok(16384));
    assert_eq!(gpu_memory_mb("4096"), Ok(4096));
    assert!(memory_mb("17TB")
        .unwrap_err()
        .contains("at most 16777216 MB"));
    assert_eq!(timeout_ms("1h"), Ok(3_600_000));
    assert_eq!(timeout_ms("0"), Ok(0));
    assert_eq!(timeout_ms("500ms"), Ok(500));
    assert_eq!(timeout_ms("0.5s"), Ok(500));
    assert_eq!(timeout_ms("1ms"), Ok(1));
    assert_eq!(timeout_ms("1.9s"), Ok(1900));
    assert!(timeout_ms("1us").unwrap_err().contains("500ms"));
    assert!(timeout_ms("400days").unwrap_err().contains("at most"));
    assert_eq!(grace_secs("30s"), Ok(30));
    assert_eq!(grace_secs("0"), Ok(0));
    for bad in ["1500ms", "0.5s", "2days", "-1"] {
        assert!(
            grace_secs(bad).unwrap_err().contains("whole seconds"),
            "{bad}"
        );
    }
    assert_eq!(cpu_list("3,1,2"), Ok("1-3".into()));
}

#[test]
fn secret_debug_hides_the_value() {
    let p = SecretPair {
        key: "TOKEN".into(),
        value: "hunter2".into(),
    };
    assert_eq!(format!("{p:?}"), "TOKEN=***");
}

#[test]
fn gpu_time_and_cuda() {
    assert_eq!(gpu_time_secs("90s"), Ok(90));
    assert_eq!(gpu_time_secs("30m"), Ok(1800));
    assert_eq!(gpu_time_secs("2h"), Ok(7200));
    assert_eq!(gpu_time_secs("1h30m"), Ok(5400));
    assert_eq!(gpu_time_secs("45"), Ok(45));
    for bad in [
        "0", "0s", "500ms", "1500ms", "1.5s", "-5", "soon", "400days", "",
    ] {
        let e = gpu_time_secs(bad).unwrap_err();
        assert!(e.contains("like 90s, 30m, 2h or 1h30m"), "{bad}: {e}");
    }
    assert_eq!(cuda_version("12.2"), Ok("12.2".into()));
    assert_eq!(cuda_version("11.8.0"), Ok("11.8.0".into()));
    for bad in ["12", "v12.2", "12.2.1.1", "latest"] {
        let e = cuda_version(bad).unwrap_err();
        assert!(
            e.contains("expected a CUDA version like 12.2"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn since_takes_durations_and_times() {
    const T: i64 = 1_735_787_045_000; // 2025-01-02T03:04:05Z
    assert_eq!(since("2h"), Ok(Since::Ago(Duration::from_secs(7200))));
    assert_eq!(since("2h").unwrap().to_unix_ms(T), T - 7_200_000);
    assert_eq!(since("2025-01-02T03:04:05Z"), Ok(Since::At(T)));
    assert_eq!(since("2025-01-02T03:04:05.250Z"), Ok(Since::At(T + 250)));
    assert_eq!(since("2025-01-02T05:04:05+02:00"), Ok(Since::At(T)));
    assert_eq!(since("2025-01-01T22:34:05-04:30"), Ok(Since::At(T)));
    assert_eq!(since("2025-01-02"), Ok(Since::At(T - 11_045_000)));
    for bad in [
        "yesterday",
        "2025-01-02T03:04:05",
        "2025-01-02 03:04:05Z",
        "2025-01-02T03:04:05+2:00",
        "2025-01-02T03:04:05+25:00",
        "2025-13-02",
        "",
    ] {
        let e = since(bad).unwrap_err();
        assert!(e.contains("RFC 3339 time like"), "{bad}: {e}");
    }
    assert_eq!(owner(" alice "), Ok("alice".into()));
    assert!(owner("").is_err());
    assert!(owner("a\nb").is_err());
}
