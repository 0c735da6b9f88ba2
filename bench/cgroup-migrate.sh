#!/usr/bin/env bash
# What moving a process into a job's cgroups costs on this host, in the
# ways the kernel offers (issue 6's start latency; BENCHMARKS.md, method;
# found in bench/history/runs-17-22.md):
# cgroup v1
#   - procs: the pid written to each hierarchy's `cgroup.procs` (what crun
#     and Slurm do, and how the shim moved a sandbox init before the init
#     entered its cgroups itself).
#     This write-locks the global cgroup_threadgroup_rwsem, whose first
#     writer after a quiet spell waits for an RCU grace period
#     (rcu_sync_enter -> synchronize_rcu), unless favordynmods is on;
#   - tasks: the process writes "0" to each hierarchy's `tasks` (a single
#     thread moving itself, as the sandbox init does), which
#     the kernel does without that lock.
#   Each sample: a pause of PAUSE_MS (so the lock's fast path goes idle
#   again), then this single-threaded python process moves itself into a
#   scratch cgroup in every v1 hierarchy, timed, and back, timed.
# cgroup2 (where mounted), a new process into a scratch directory:
#   - fork, then its pid to `cgroup.procs` (the same global write lock);
#   - clone3 with CLONE_INTO_CGROUP (how the sandbox init forks pid 1),
#     which takes that lock only for reading.
#   Each sample: a pause, then the fork and the write (or the clone3)
#   timed until the child is in the directory; the child exits 50 ms later.
#
# Usage: bench/cgroup-migrate.sh   (as root, on a host with cgroup v1 hierarchies)
#   CGMIG_SAMPLES  (default 10)   samples per way
#   CGMIG_PAUSE_MS (default 300)
# Prints a markdown table; whether favordynmods is on (a mount option of a
# cgroup hierarchy; once set, this kernel keeps migrations off the global
# lock until reboot even after the option is cleared: see dmesg's "per
# threadgroup rwsem mechanism can't be disabled"); and a "kernel state"
# line: default when a pid to `cgroup.procs` takes at least 3x as long as
# "0" to `tasks` and 2 ms more (bench/gpu-start.sh prints it beside its
# numbers). Removes
# its scratch cgroups on exit.
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "cgroup-migrate: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "cgroup-migrate: must run as root" >&2; exit 1; }
exec python3 - "${CGMIG_SAMPLES:-10}" "${CGMIG_PAUSE_MS:-300}" <<'EOF'
import os, statistics, sys, time

samples, pause = int(sys.argv[1]), int(sys.argv[2]) / 1000
if samples < 1 or pause < 0:
    sys.exit("cgroup-migrate: CGMIG_SAMPLES must be >= 1 and CGMIG_PAUSE_MS >= 0")
# v1 hierarchies: every cgroup mount other than cgroup2, and where this
# process sits in each (to move back to).
mine = {}
for line in open("/proc/self/cgroup"):
    hid, ctrls, path = line.rstrip("\n").split(":", 2)
    if hid != "0":
        mine[ctrls] = path
hier = []
for line in open("/proc/self/mounts"):
    dev, mnt, fstype, opts = line.split()[:4]
    if fstype != "cgroup":
        continue
    opts = opts.split(",")
    ctrls = ",".join(o for o in opts if o in {c for v in mine for c in v.split(",")})
    key = next((k for k in mine if set(k.split(",")) == set(ctrls.split(","))), None)
    if key is not None:
        hier.append((mnt, mnt + mine[key]))
unified = next((l.split()[1] for l in open("/proc/self/mounts") if l.split()[2] == "cgroup2"), None)
if not hier and unified is None:
    sys.exit("cgroup-migrate: no cgroup filesystem mounted; nothing to measure")
scratch = [os.path.join(m, f"joblet-cgmig-{os.getpid()}") for m, _ in hier]
scratch2 = unified and os.path.join(unified, f"joblet-cgmig-{os.getpid()}")
favor = [l.split()[1] for l in open("/proc/self/mounts")
         if l.split()[2].startswith("cgroup") and "favordynmods" in l.split()[3].split(",")]
try:
    for (mnt, _), d in zip(hier, scratch):
        os.mkdir(d)
        for f in ("cpuset.cpus", "cpuset.mems"):  # a cpuset cgroup takes no task without them
            if os.path.exists(os.path.join(mnt, f)):
                open(os.path.join(d, f), "w").write(open(os.path.join(mnt, f)).read())

    def move(dirs, way):
        t = time.perf_counter()
        for d in dirs:
            if way == "procs":
                open(os.path.join(d, "cgroup.procs"), "w").write(str(os.getpid()))
            else:
                open(os.path.join(d, "tasks"), "w").write("0")
        return (time.perf_counter() - t) * 1000

    res = {"procs": ([], []), "tasks": ([], [])}
    for _ in range(samples if hier else 0):
        for way in ("procs", "tasks"):
            time.sleep(pause)
            res[way][0].append(move(scratch, way))
            res[way][1].append(move([h for _, h in hier], way))

    res2 = {"fork": [], "clone3": []}
    if scratch2:
        import ctypes
        os.mkdir(scratch2)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long

        class CloneArgs(ctypes.Structure):
            _fields_ = [(n, ctypes.c_uint64) for n in (
                "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack",
                "stack_size", "tls", "set_tid", "set_tid_size", "cgroup")]

        SYS_CLONE3, CLONE_INTO_CGROUP = 435, 0x200000000  # x86_64 and aarch64 number
        dirfd = os.open(scratch2, os.O_RDONLY | os.O_DIRECTORY)
        procs2 = os.path.join(scratch2, "cgroup.procs")

        def child():
            time.sleep(0.05)  # still there when the parent writes its pid
            os._exit(0)

        def spawn(way):
            t = time.perf_counter()
            if way == "fork":
                pid = os.fork()
                if pid == 0:
                    child()
                with open(procs2, "w") as f:
                    f.write(str(pid))
            else:
                args = CloneArgs(flags=CLONE_INTO_CGROUP, exit_signal=17, cgroup=dirfd)
                pid = libc.syscall(SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
                if pid == 0:
                    child()
                if pid < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"clone3 into {scratch2}: {os.strerror(err)}")
            took = (time.perf_counter() - t) * 1000
            os.waitpid(pid, 0)
            return took

        for _ in range(samples):
            for way in ("fork", "clone3"):
                time.sleep(pause)
                res2[way].append(spawn(way))
        os.close(dirfd)
finally:
    for (_, home) in hier:
        try:
            open(os.path.join(home, "cgroup.procs"), "w").write(str(os.getpid()))
        except OSError:
            pass
    for d in scratch + ([scratch2] if scratch2 else []):
        for _ in range(100):  # a child that just exited may not have left yet
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)

print(f"machine: {os.cpu_count()} cores, kernel {os.uname().release}; {len(hier)} v1 hierarchies; "
      f"cgroup2: {unified or 'none'}; favordynmods on: {', '.join(favor) or 'none'}; "
      f"{samples} samples, {pause * 1000:.0f} ms apart")
if hier:
    print()
    print("| v1: way | into the scratch cgroups: median ms (max) | back: median ms (max) |")
    print("|---|---:|---:|")
    for way, label in (("procs", "pid to `cgroup.procs`"), ("tasks", '`"0"` to `tasks` (self)')):
        into, back = res[way]
        print(f"| {label} | {statistics.median(into):.2f} ({max(into):.2f}) | "
              f"{statistics.median(back):.2f} ({max(back):.2f}) |")
if scratch2:
    print()
    print("| cgroup2: way | a new process into the scratch directory: median ms (max) |")
    print("|---|---:|")
    for way, label in (("fork", "fork, then its pid to `cgroup.procs`"),
                       ("clone3", "`clone3` with `CLONE_INTO_CGROUP`")):
        t = res2[way]
        print(f"| {label} | {statistics.median(t):.2f} ({max(t):.2f}) |")
if hier:
    procs, tasks = statistics.median(res["procs"][0]), statistics.median(res["tasks"][0])
    print()
    if procs >= 3 * tasks and procs - tasks >= 2:  # a grace period: ~5 ms on the standard machine
        print(f"kernel state: default. A pid written to `cgroup.procs` waits for an RCU grace "
              f"period ({procs:.2f} ms vs {tasks:.2f} ms for `\"0\"` to `tasks`); crun, runc and "
              f"Slurm pay that on every start.")
    else:
        print(f"kernel state: `cgroup.procs` writes do not wait ({procs:.2f} ms vs {tasks:.2f} ms "
              f"for `\"0\"` to `tasks`): favordynmods is on, or was set once since boot (dmesg: "
              f"\"per threadgroup rwsem mechanism can't be disabled\"). crun, runc and Slurm start "
              f"faster here than on a default kernel; compare runs only within one state.")
EOF
