//! `joblet-probe`: run inside a sandbox, prints as JSON what the process
//! can see and do — ids, visible pids, mounts (ro/rw), `/dev` entries,
//! capabilities, seccomp and no_new_privs, hostname, network interfaces —
//! plus the outcome (`ok` or an errno name) of each requested attempt:
//!
//! `--try-write PATH`, `--try-read PATH`, `--try-open PATH` (read-write),
//! `--try-mknod PATH` (char 1:3), `--try-ptrace PID` (attach, detach), `--try-mount`, `--try-unshare-user`,
//! `--try-clone-newuser`, `--try-clone3`, `--try-setns`, `--try-bpf`,
//! `--try-io-uring` (`io_uring_setup`), `--try-perf` (`perf_event_open`
//! of a task clock on itself), `--try-vsock` (an `AF_VSOCK` socket);
//! `--read-file PATH` (the attempt also carries `content`, lossy UTF-8, at
//! most 4 KiB, and `len`), `--stat PATH` (`lstat`; also `kind`, `size`,
//! `mode` and, for a directory, its sorted `entries`).
//!
//! Depends on std, libc and serde_json only, so it runs in any sandbox that
//! provides the C library.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::net::UdpSocket;
use std::time::Duration;

use serde_json::{json, Value};

fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ETXTBSY => "ETXTBSY",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::EPIPE => "EPIPE",
        libc::ENOSYS => "ENOSYS",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn outcome(ret: libc::c_long) -> String {
    if ret < 0 {
        errno_name(last_errno())
    } else {
        "ok".into()
    }
}

fn io_outcome<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => e
            .raw_os_error()
            .map(errno_name)
            .unwrap_or_else(|| e.to_string()),
    }
}

fn status_fields() -> BTreeMap<String, String> {
    let text = fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| {
            matches!(
                *k,
                "CapEff" | "CapPrm" | "CapBnd" | "CapInh" | "CapAmb" | "Seccomp" | "NoNewPrivs"
            )
        })
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn mounts() -> Vec<Value> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            let opts = *l.get(5)?;
            Some(json!({
                "mount_point": l.get(4)?,
                "options": opts,
                "ro": opts.split(',').any(|o| o == "ro"),
                "fstype": r.first()?,
                "source": r.get(1)?,
                "super_options": r.get(2).copied().unwrap_or(""),
            }))
        })
        .collect()
}

fn dir_names(path: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(path)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn pids() -> Vec<u32> {
    let mut v: Vec<u32> = dir_names("/proc")
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    v.sort();
    v
}

fn net_ifaces() -> Vec<String> {
    fs::read_to_string("/proc/net/dev")
        .unwrap_or_default()
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim().to_string()))
        .collect()
}

fn loopback_works() -> bool {
    let Ok(sock) = UdpSocket::bind("127.0.0.1:0") else {
        return false;
    };
    let Ok(addr) = sock.local_addr() else {
        return false;
    };
    let _ = sock.set_read_timeout(Some(Duration::from_millis(500)));
    if sock.send_to(b"ping", addr).is_err() {
        return false;
    }
    let mut buf = [0u8; 4];
    matches!(sock.recv_from(&mut buf), Ok((4, _)))
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Runs `f` in a forked child and returns its outcome: the child exits
/// with 0 for success or the errno.
fn in_child(f: fn() -> i32) -> String {
    // SAFETY: this program is single-threaded, so the child may run any
    // code; it only calls `f` and _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return format!("fork failed: {}", errno_name(last_errno()));
    }
    if pid == 0 {
        let code = f();
        // SAFETY: _exit ends the child without running the parent's
        // atexit handlers or flushing its buffers twice.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `status` is a valid writable int.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return format!("waitpid failed: {}", errno_name(last_errno()));
    }
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => "ok".into(),
            e => errno_name(e),
        }
    } else {
        format!("child killed by signal {}", libc::WTERMSIG(status))
    }
}

fn unshare_user() -> i32 {
    // SAFETY: unshare takes a flag word and passes no memory.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0 {
        0
    } else {
        last_errno()
    }
}

fn clone_newuser() -> i32 {
    // SAFETY: a raw clone without CLONE_VM gives the child a copy of the
    // address space (like fork); the child only calls _exit.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if ret == 0 {
        // SAFETY: ending the cloned child at once.
        unsafe { libc::_exit(0) };
    }
    if ret < 0 {
        return last_errno();
    }
    let mut status = 0;
    // SAFETY: `status` is a valid writable int.
    unsafe { libc::waitpid(ret as libc::pid_t, &mut status, 0) };
    0
}

#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
}

fn clone3_plain() -> i32 {
    let args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        ..Default::default()
    };
    // SAFETY: `args` is a valid clone_args (version 0, 64 bytes) that
    // outlives the call; without CLONE_VM the child gets a copy of the
    // address space and only calls _exit.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if ret == 0 {
        // SAFETY: ending the cloned child at once.
        unsafe { libc::_exit(0) };
    }
    if ret < 0 {
        return last_errno();
    }
    let mut status = 0;
    // SAFETY: `status` is a valid writable int.
    unsafe { libc::waitpid(ret as libc::pid_t, &mut status, 0) };
    0
}

fn try_setns() -> String {
    let f = match fs::File::open("/proc/self/ns/uts") {
        Ok(f) => f,
        Err(e) => return format!("open /proc/self/ns/uts: {}", io_outcome::<()>(Err(e))),
    };
    // SAFETY: setns takes a descriptor we own and a flag word.
    let ret = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWUTS) };
    outcome(ret.into())
}

fn try_mount() -> String {
    let src = c"none";
    let target = c"/tmp";
    let fstype = c"tmpfs";
    // SAFETY: all strings are NUL-terminated and outlive the call; no data.
    let ret = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if ret == 0 {
        // SAFETY: as above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
    outcome(ret.into())
}

fn try_bpf() -> String {
    // union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size,
    // max_entries; the rest zero.
    let mut attr = [0u32; 32];
    attr[0] = 2; // BPF_MAP_TYPE_ARRAY
    attr[1] = 4;
    attr[2] = 4;
    attr[3] = 1;
    // SAFETY: `attr` is a zeroed 128-byte bpf_attr that outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            0 as libc::c_long, // BPF_MAP_CREATE
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if ret >= 0 {
        // SAFETY: closing the map descriptor just created.
        unsafe { libc::close(ret as i32) };
    }
    outcome(ret)
}

fn try_io_uring() -> String {
    // struct io_uring_params: 120 bytes, zeroed (the kernel fills it in).
    let mut params = [0u32; 30];
    // SAFETY: `params` is a zeroed io_uring_params that outlives the call.
    let ret = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    if ret >= 0 {
        // SAFETY: closing the ring descriptor just created.
        unsafe { libc::close(ret as i32) };
    }
    outcome(ret)
}

fn try_perf() -> String {
    // struct perf_event_attr of PERF_ATTR_SIZE_VER0 (64 bytes): a software
    // task-clock counter on this process, user space only (allowed by the
    // default perf_event_paranoid 2), disabled.
    let mut attr = [0u64; 8];
    attr[0] = 1 | (64 << 32); // type PERF_TYPE_SOFTWARE, size 64
    attr[1] = 1; // config PERF_COUNT_SW_TASK_CLOCK
    attr[5] = 1 | (1 << 5) | (1 << 6); // disabled, exclude_kernel, exclude_hv
                                       // SAFETY: `attr` is a valid perf_event_attr that outlives the call;
                                       // pid 0 (self), cpu -1 (any), no group, no flags.
    let ret = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0) };
    if ret >= 0 {
        // SAFETY: closing the event descriptor just created.
        unsafe { libc::close(ret as i32) };
    }
    outcome(ret)
}

fn try_vsock() -> String {
    // SAFETY: socket takes three integers.
    let fd = unsafe { libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0) };
    if fd >= 0 {
        // SAFETY: closing the socket just created.
        unsafe { libc::close(fd) };
    }
    outcome(fd.into())
}

fn try_ptrace(pid: &str) -> String {
    let Ok(pid) = pid.parse::<libc::pid_t>() else {
        return "EINVAL".into();
    };
    // SAFETY: PTRACE_ATTACH takes a pid and null pointers.
    let ret = unsafe {
        libc::ptrace(
            libc::PTRACE_ATTACH,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if ret == 0 {
        let mut status = 0;
        // SAFETY: waiting for the attach stop; `status` is writable.
        unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        // SAFETY: detaching from the tracee just attached.
        unsafe {
            libc::ptrace(
                libc::PTRACE_DETACH,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
    }
    outcome(ret)
}

fn try_write(path: &str) -> String {
    let r = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(b"probe"));
    let out = io_outcome(r);
    if out == "ok" {
        let _ = fs::remove_file(path);
    }
    out
}

fn try_open(path: &str) -> String {
    io_outcome(fs::OpenOptions::new().read(true).write(true).open(path))
}

fn try_mknod(path: &str) -> String {
    let Ok(c) = CString::new(path) else {
        return "EINVAL".into();
    };
    // SAFETY: `c` is NUL-terminated and outlives the call.
    let ret = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
    if ret == 0 {
        let _ = fs::remove_file(path);
    }
    outcome(ret.into())
}

/// Reads `path`: the outcome and `content`/`len` on success.
fn read_file(path: &str) -> (String, Value) {
    match fs::read(path) {
        Ok(bytes) => {
            let shown = &bytes[..bytes.len().min(4096)];
            (
                "ok".into(),
                json!({"content": String::from_utf8_lossy(shown), "len": bytes.len()}),
            )
        }
        Err(e) => (io_outcome::<()>(Err(e)), json!({})),
    }
}

/// `lstat`s `path`: the outcome and `kind`, `size`, `mode` (and `entries`
/// of a directory) on success.
fn stat(path: &str) -> (String, Value) {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return (io_outcome::<()>(Err(e)), json!({})),
    };
    let ft = meta.file_type();
    let kind = if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else if ft.is_char_device() {
        "char"
    } else if ft.is_block_device() {
        "block"
    } else {
        "other"
    };
    let mut extra = json!({
        "kind": kind,
        "size": meta.len(),
        "mode": meta.permissions().mode() & 0o7777,
    });
    if ft.is_dir() {
        extra["entries"] = json!(dir_names(path));
    }
    ("ok".into(), extra)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut tries = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let op = args[i].as_str();
        let target = args.get(i + 1).cloned().unwrap_or_default();
        let mut extra = json!({});
        let (name, result, used) = match op {
            "--read-file" => {
                let (result, more) = read_file(&target);
                extra = more;
                ("read-file", result, 2)
            }
            "--stat" => {
                let (result, more) = stat(&target);
                extra = more;
                ("stat", result, 2)
            }
            "--try-write" => ("write", try_write(&target), 2),
            "--try-read" => ("read", io_outcome(fs::read(&target)), 2),
            "--try-open" => ("open", try_open(&target), 2),
            "--try-mknod" => ("mknod", try_mknod(&target), 2),
            "--try-ptrace" => ("ptrace", try_ptrace(&target), 2),
            "--try-mount" => ("mount", try_mount(), 1),
            "--try-unshare-user" => ("unshare-user", in_child(unshare_user), 1),
            "--try-clone-newuser" => ("clone-newuser", in_child(clone_newuser), 1),
            "--try-clone3" => ("clone3", in_child(clone3_plain), 1),
            "--try-setns" => ("setns", try_setns(), 1),
            "--try-bpf" => ("bpf", try_bpf(), 1),
            "--try-io-uring" => ("io-uring", try_io_uring(), 1),
            "--try-perf" => ("perf", try_perf(), 1),
            "--try-vsock" => ("vsock", try_vsock(), 1),
            other => {
                eprintln!("joblet-probe: unknown argument {other:?}");
                std::process::exit(2);
            }
        };
        let target = if used == 2 {
            Value::from(target)
        } else {
            Value::Null
        };
        let mut entry = json!({"op": name, "target": target, "result": result});
        if let (Some(entry), Some(extra)) = (entry.as_object_mut(), extra.as_object()) {
            entry.extend(extra.clone());
        }
        tries.push(entry);
        i += used;
    }

    // SAFETY: these getters cannot fail and pass no memory.
    let (pid, ppid, uid, gid, euid, egid) = unsafe {
        (
            libc::getpid(),
            libc::getppid(),
            libc::getuid(),
            libc::getgid(),
            libc::geteuid(),
            libc::getegid(),
        )
    };
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: `groups` has room for 256 entries, the size passed.
    let n = unsafe { libc::getgroups(256, groups.as_mut_ptr()) };
    groups.truncate(n.max(0) as usize);

    let status = status_fields();
    let cap = |k: &str| status.get(k).and_then(|v| u64::from_str_radix(v, 16).ok());
    let out = json!({
        "pid": pid,
        "ppid": ppid,
        "uid": uid,
        "gid": gid,
        "euid": euid,
        "egid": egid,
        "groups": groups,
        "hostname": hostname(),
        "cwd": std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default(),
        "pids": pids(),
        "mounts": mounts(),
        "dev": dir_names("/dev"),
        "status": status,
        "cap_eff": cap("CapEff"),
        "cap_prm": cap("CapPrm"),
        "cap_bnd": cap("CapBnd"),
        "cap_inh": cap("CapInh"),
        "cap_amb": cap("CapAmb"),
        "seccomp": status.get("Seccomp").and_then(|v| v.parse::<u32>().ok()),
        "no_new_privs": status.get("NoNewPrivs").map(|v| v == "1"),
        "net_ifaces": net_ifaces(),
        "loopback_works": loopback_works(),
        "tries": tries,
    });
    println!("{out}");
}
