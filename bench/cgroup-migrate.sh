#!/usr/bin/env bash
# What moving a process into a job's cgroups costs on this host, in the two
# ways the kernel offers on cgroup v1 (issue 6's start latency; BENCHMARKS.md
# run 17):
#   - procs: the pid written to each hierarchy's `cgroup.procs` (what
#     JobCgroup::add_pid does for a sandbox init, and what crun and Slurm do).
#     This write-locks the global cgroup_threadgroup_rwsem, whose first
#     writer after a quiet spell waits for an RCU grace period
#     (rcu_sync_enter -> synchronize_rcu), unless favordynmods is on;
#   - tasks: the process writes "0" to each hierarchy's `tasks` (a single
#     thread moving itself), which the kernel does without that lock.
# Each sample: a pause of PAUSE_MS (so the lock's fast path goes idle again),
# then this single-threaded python process moves itself into a scratch
# cgroup in every v1 hierarchy, timed, and back, timed.
#
# Usage: bench/cgroup-migrate.sh   (as root, on a host with cgroup v1 hierarchies)
#   CGMIG_SAMPLES  (default 10)   samples per way
#   CGMIG_PAUSE_MS (default 300)
# Prints a markdown table; whether favordynmods is on (a mount option of a
# cgroup hierarchy; once set, this kernel keeps migrations off the global
# lock until reboot even after the option is cleared: see dmesg's "per
# threadgroup rwsem mechanism can't be disabled"). Removes its scratch
# cgroups on exit.
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
if not hier:
    sys.exit("cgroup-migrate: no cgroup v1 hierarchy mounted; nothing to measure")
scratch = [os.path.join(m, f"joblet-cgmig-{os.getpid()}") for m, _ in hier]
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
    for _ in range(samples):
        for way in ("procs", "tasks"):
            time.sleep(pause)
            res[way][0].append(move(scratch, way))
            res[way][1].append(move([h for _, h in hier], way))
finally:
    for (_, home) in hier:
        try:
            open(os.path.join(home, "cgroup.procs"), "w").write(str(os.getpid()))
        except OSError:
            pass
    for d in scratch:
        try:
            os.rmdir(d)
        except OSError:
            pass

print(f"machine: {os.cpu_count()} cores, kernel {os.uname().release}; {len(hier)} v1 hierarchies; "
      f"favordynmods on: {', '.join(favor) or 'none'}; {samples} samples, {pause * 1000:.0f} ms apart")
print()
print("| way | into the scratch cgroups: median ms (max) | back: median ms (max) |")
print("|---|---:|---:|")
for way, label in (("procs", "pid to `cgroup.procs`"), ("tasks", '`"0"` to `tasks` (self)')):
    into, back = res[way]
    print(f"| {label} | {statistics.median(into):.2f} ({max(into):.2f}) | "
          f"{statistics.median(back):.2f} ({max(back):.2f}) |")
EOF
