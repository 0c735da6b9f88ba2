# Times several commands interleaved, so that a machine whose speed drifts
# over minutes (this one's does: `crun run` moved between 8 and 13 ms in one
# hour) slows or speeds them all alike, in two ways:
#   - paced: rounds; in each, every command once, each after an untimed
#     pause of PAUSE_MS (a start on an idle machine);
#   - back to back: rounds; in each, every command BLOCK times in a row,
#     after an untimed pause of SETTLE_MS (each run starts as the last ends:
#     a daemon's background work for the last run is still going on).
# The commands' order rotates from round to round.
#   python3 bench/lib/interleave.py SPEC.json
# SPEC: {"rounds": R, "block": B, "pause_ms": P, "settle_ms": S, "warmup": W,
#        "commands": [{"key": K, "argv": [...]}, ...]}
# "{i}" in an argv becomes a unique run tag (container ids). Timing as in
# timeruns.py: time.perf_counter() around subprocess.run, stdio to
# /dev/null; median = sorted[n/2], p90 = sorted[n*9/10].
# Prints one line per command and way: "K<TAB>paced|back-to-back<TAB>ok<TAB>
# median_ms<TAB>p90_ms<TAB>runs", or "K<TAB>-<TAB>failed<TAB>reason" when a
# command cannot run (its warm-up's stderr names why); progress on stderr.
import json, os, signal, subprocess, sys, time

spec = json.load(open(sys.argv[1]))
TIMEOUT_S = 30


class Hung(Exception):
    pass


def on_alarm(signum, frame):
    raise Hung(f"no exit within {TIMEOUT_S} s")


signal.signal(signal.SIGALRM, on_alarm)
tag = [0]


def argv_of(cmd):
    tag[0] += 1
    return [a.replace("{i}", f"{os.getpid()}-{tag[0]}") for a in cmd["argv"]]


def warm_up(cmd):
    """None if the command runs, else why not."""
    for _ in range(spec["warmup"]):
        try:
            p = subprocess.run(argv_of(cmd), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            return str(e)
        if p.returncode != 0:
            lines = [l.strip() for l in p.stderr.decode(errors="replace").splitlines() if l.strip()]
            return lines[-1] if lines else f"exit status {p.returncode}"
    return None


def timed(cmd):
    """Milliseconds from spawn to exit; raises on a failed or hung run."""
    argv = argv_of(cmd)
    signal.alarm(TIMEOUT_S)
    try:
        t = time.perf_counter()
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        d = time.perf_counter() - t
    finally:
        signal.alarm(0)
    if rc != 0:
        raise RuntimeError(f"exit status {rc}")
    return d * 1000


cmds = []
for c in spec["commands"]:
    why = warm_up(c)
    if why:
        print(f"{c['key']}\t-\tfailed\t{why[:200]}")
    else:
        cmds.append(c)
times = {(c["key"], way): [] for c in cmds for way in ("paced", "back-to-back")}
failed = {}
rounds, block = spec["rounds"], spec["block"]
for r in range(rounds):
    order = cmds[r % len(cmds):] + cmds[:r % len(cmds)] if cmds else []
    for c in order:
        if c["key"] in failed:
            continue
        try:
            time.sleep(spec["pause_ms"] / 1000)
            times[(c["key"], "paced")].append(timed(c))
        except (OSError, RuntimeError, Hung) as e:
            failed[c["key"]] = f"paced run: {e}"
    for c in order:
        if c["key"] in failed:
            continue
        try:
            time.sleep(spec["settle_ms"] / 1000)
            for _ in range(block):
                times[(c["key"], "back-to-back")].append(timed(c))
        except (OSError, RuntimeError, Hung) as e:
            failed[c["key"]] = f"back-to-back run: {e}"
    print(f"interleave: round {r + 1}/{rounds} done", file=sys.stderr)
for c in cmds:
    k = c["key"]
    if k in failed:
        print(f"{k}\t-\tfailed\t{failed[k][:200]}")
        continue
    for way in ("paced", "back-to-back"):
        v = sorted(times[(k, way)])
        print(f"{k}\t{way}\tok\t{v[len(v) // 2]:.2f}\t{v[len(v) * 9 // 10]:.2f}\t{len(v)}")
