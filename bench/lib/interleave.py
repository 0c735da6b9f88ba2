# Times several commands interleaved (each run as bench/lib/runlib.py
# does), so that a machine whose speed drifts over minutes (this one's does:
# `crun run` moved between 8 and 13 ms in one hour) slows or speeds them all
# alike, in two ways:
#   - paced: rounds; in each, every command once, each after an untimed
#     pause of PAUSE_MS (a start on an idle machine);
#   - back to back: rounds; in each, every command BLOCK times in a row,
#     after an untimed pause of SETTLE_MS (each run starts as the last ends:
#     a daemon's background work for the last run is still going on).
# The commands' order rotates from round to round.
#   python3 bench/lib/interleave.py SPEC.json
# SPEC: {"rounds": R, "block": B, "pause_ms": P, "settle_ms": S, "warmup": W,
#        "commands": [{"key": K, "argv": [...]}, ...]}
# "{i}" in an argv becomes a unique run tag (container ids); median =
# sorted[n/2], p90 = sorted[n*9/10]; the mean is there too, because back
# to back a daemon's times can be bimodal (a start that finds its warm
# sandbox ready, one that waits for it), and then the median lands on
# either mode while the mean still tells what a sustained run costs.
# Prints one line per command and way: "K<TAB>paced|back-to-back<TAB>ok<TAB>
# median_ms<TAB>p90_ms<TAB>runs<TAB>mean_ms", or "K<TAB>-<TAB>failed<TAB>reason" when a
# command cannot run (its warm-up's stderr names why); progress on stderr.
import json, os, sys, time

from runlib import Hung, timed, warm_up

spec = json.load(open(sys.argv[1]))
tag = [0]


def argv_of(cmd):
    tag[0] += 1
    return [a.replace("{i}", f"{os.getpid()}-{tag[0]}") for a in cmd["argv"]]


def why_not(cmd):
    """None if the command runs (its warm-up runs succeed), else why not."""
    for _ in range(spec["warmup"]):
        why = warm_up(argv_of(cmd))
        if why:
            return why
    return None


cmds = []
for c in spec["commands"]:
    why = why_not(c)
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
            times[(c["key"], "paced")].append(timed(argv_of(c)))
        except (OSError, RuntimeError, Hung) as e:
            failed[c["key"]] = f"paced run: {e}"
    for c in order:
        if c["key"] in failed:
            continue
        try:
            time.sleep(spec["settle_ms"] / 1000)
            for _ in range(block):
                times[(c["key"], "back-to-back")].append(timed(argv_of(c)))
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
        mean = sum(v) / len(v)
        print(f"{k}\t{way}\tok\t{v[len(v) // 2]:.2f}\t{v[len(v) * 9 // 10]:.2f}\t{len(v)}\t{mean:.2f}")
