#!/usr/bin/env python3
"""Where a process's threads spend a stretch of time, from /proc alone (no perf, no gdb):
per thread group (a thread's name without its /N suffix; the loop thread keeps the
process's name), the CPU seconds used, the seconds spent runnable but waiting for a core
(schedstat's run-queue delay: the cost of oversubscription), the mean number of the
group's threads seen running or runnable, and what the others were blocked in (wchan).
Also the machine's mean runnable count (procs_running) against its CPUs.

Usage: threadstat.py PID SECONDS|STOPFILE [INTERVAL_MS]
(until SECONDS passed or STOPFILE exists; one line per group, then a total)
"""
import collections
import os
import sys
import time


def group(name):
    head, _, tail = name.rpartition("/")
    return head if head and tail.isdigit() else name


def tasks(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat") as f:
                stat = f.read()
            with open(f"{base}/schedstat") as f:
                sched = f.read().split()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2 :].split()
        # rest[0] is the state; utime and stime are fields 14 and 15 of stat.
        out[tid] = dict(
            name=name,
            state=rest[0],
            cpu=(int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK"),
            run_ns=int(sched[0]),
            wait_ns=int(sched[1]),
            slices=int(sched[2]),
        )
    return out


def procs_running():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 0


def main():
    pid = int(sys.argv[1])
    try:
        seconds, stop = float(sys.argv[2]), None
    except ValueError:
        seconds, stop = 3600.0, sys.argv[2]
    interval = (float(sys.argv[3]) if len(sys.argv) > 3 else 5.0) / 1000
    t0 = tasks(pid)
    if os.environ.get("THREADSTAT_READY"):  # the caller starts the run once this exists
        open(os.environ["THREADSTAT_READY"], "w").close()
    runnable = collections.Counter()
    blocked = collections.defaultdict(collections.Counter)
    machine = []
    samples = 0
    end = time.monotonic() + seconds
    start = time.monotonic()
    while time.monotonic() < end and not (stop and os.path.exists(stop)):
        machine.append(procs_running())
        for tid in os.listdir(f"/proc/{pid}/task"):
            base = f"/proc/{pid}/task/{tid}"
            try:
                with open(f"{base}/stat") as f:
                    stat = f.read()
                with open(f"{base}/wchan") as f:
                    wchan = f.read().strip() or "0"
            except OSError:
                continue
            g = group(stat[stat.index("(") + 1 : stat.rindex(")")])
            state = stat[stat.rindex(")") + 2]
            if state == "R":
                runnable[g] += 1
            else:
                blocked[g][wchan] += 1
        samples += 1
        time.sleep(interval)
    wall = time.monotonic() - start
    t1 = tasks(pid)
    agg = collections.defaultdict(lambda: collections.Counter())
    for tid, b in t1.items():
        a = t0.get(tid, dict(cpu=0, run_ns=0, wait_ns=0, slices=0))
        g = group(b["name"])
        agg[g]["threads"] += 1
        agg[g]["cpu"] += b["cpu"] - a["cpu"]
        agg[g]["run"] += (b["run_ns"] - a["run_ns"]) / 1e9
        agg[g]["wait"] += (b["wait_ns"] - a["wait_ns"]) / 1e9
        agg[g]["slices"] += b["slices"] - a["slices"]
    total = collections.Counter()
    for g in sorted(agg, key=lambda k: -agg[k]["run"]):
        v = agg[g]
        top = ",".join(f"{w}:{c * 100 // max(1, sum(blocked[g].values()))}%"
                       for w, c in blocked[g].most_common(2))
        print(f"threads group={g} n={v['threads']} cpu_s={v['run']:.2f} "
              f"runq_wait_s={v['wait']:.2f} switches={v['slices']} "
              f"runnable_mean={runnable[g] / max(1, samples):.1f} blocked_in={top or '-'}")
        for k in ("cpu", "run", "wait", "slices"):
            total[k] += v[k]
    print(f"threads total wall_s={wall:.2f} cpu_s={total['run']:.2f} "
          f"runq_wait_s={total['wait']:.2f} switches={total['slices']} "
          f"machine_runnable_mean={sum(machine) / max(1, len(machine)):.1f} "
          f"cpus={os.cpu_count()} samples={samples}")


if __name__ == "__main__":
    main()
