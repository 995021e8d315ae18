#!/usr/bin/python3
"""Where a traced step's time goes, read from a merged paramd timeline.

    /usr/bin/python3 tools/bench/trace_shares.py TRACE.json

For each worker, over its traced steps: the mean step time and the share
spent in data, forward, backward (forward+backward as one where the backend
does not tell them apart: CUDA, and the overlapped step) and push+pull; and within push+pull, what
the servers report for that rank and step: the longest apply (checks to the
policy's answer), the longest wait of its pull and the longest reply
(framing the parameters and writing them, StepStream only) over the
shards; the rest of push+pull is on the wire and in the client
(serialising, sending, receiving, copying the reply).

Then, per worker and shard, the mean of that shard's call as the worker saw
it (its lane): push (until the step's message was written to the
transport, or the push call acknowledged), wait (until the first reply
message came: the server's apply and wait, and the reply on the wire) and
pull (reading the reply into the parameters).

Last, per server: its optimizer steps (under sync one per round, inside
the apply of the push that completed it), their mean time, the part that
copied parameters a pull still held, and the slowest chunk's step.
"""
import collections
import json
import sys


def main(path):
    with open(path) as f:
        all_events = json.load(f)["traceEvents"]
    events = [e for e in all_events if e["ph"] == "X"]
    names = {e["pid"]: e["args"]["name"] for e in all_events
             if e["ph"] == "M" and e["name"] == "process_name"}
    worker = collections.defaultdict(dict)  # (rank, step) -> name -> dur
    server = collections.defaultdict(lambda: collections.defaultdict(float))
    # (rank, shard) -> name -> [durations]
    calls = collections.defaultdict(lambda: collections.defaultdict(list))
    # server -> {"step": [durations], "copy": [...], "chunk": [...]}
    optimizer = collections.defaultdict(lambda: collections.defaultdict(list))
    for e in events:
        if e["pid"] < 1000 and e["name"] in ("step", "copy", "chunk"):
            optimizer[e["pid"]][e["name"]].append(e["dur"])
            continue
        step = e["args"]["clock"]
        if e["pid"] >= 1000 and e["tid"] > 0:
            calls[(e["pid"] - 1000, e["tid"] - 1)][e["name"]].append(e["dur"])
        elif e["pid"] >= 1000:
            worker[(e["pid"] - 1000, step)][e["name"]] = e["dur"]
        else:
            key = (e["args"].get("rank", e["tid"]), step)
            server[key][e["name"]] = max(server[key][e["name"]], e["dur"])
    ranks = sorted({rank for rank, _ in worker})
    print("%-10s %6s %9s %7s %9s %9s %9s %9s %9s %9s %9s" %
          ("worker", "steps", "step_ms", "data", "forward", "backward",
           "push+pull", "apply", "wait", "reply", "wire"))
    for rank in ranks:
        steps = [s for r, s in worker if r == rank]
        total = collections.defaultdict(float)
        for s in steps:
            w = worker[(rank, s)]
            for name in ("step", "data", "push+pull"):
                total[name] += w.get(name, 0)
            total["forward"] += w.get("forward", w.get("forward+backward", 0))
            total["backward"] += w.get("backward", 0)
            total["apply"] += server[(rank, s)]["apply"]
            total["wait"] += server[(rank, s)]["wait"]
            total["reply"] += server[(rank, s)]["reply"]
        step = total["step"] or 1
        wire = (total["push+pull"] - total["apply"] - total["wait"] -
                total["reply"])
        print("%-10s %6d %9.3f %6.1f%% %8.1f%% %8.1f%% %8.1f%% %8.1f%% "
              "%8.1f%% %8.1f%% %8.1f%%" % (
                  names.get(1000 + rank, rank), len(steps),
                  total["step"] / len(steps) / 1000,
                  100 * total["data"] / step,
                  100 * total["forward"] / step,
                  100 * total["backward"] / step,
                  100 * total["push+pull"] / step,
                  100 * total["apply"] / step, 100 * total["wait"] / step,
                  100 * total["reply"] / step, 100 * wire / step))
    if not calls:
        return
    print()
    print("%-10s %6s %9s %9s %9s %9s" %
          ("worker", "shard", "calls", "push_ms", "wait_ms", "pull_ms"))
    for rank, shard in sorted(calls):
        c = calls[(rank, shard)]

        def mean(name):
            d = c.get(name, [])
            return sum(d) / len(d) / 1000 if d else float("nan")
        push = "push" if "push" in c else "push+wait"
        print("%-10s %6d %9d %9.3f %9.3f %9.3f" % (
            names.get(1000 + rank, rank), shard, len(c["pull"]), mean(push),
            mean("wait"), mean("pull")))
    if not optimizer:
        return
    print()
    print("%-10s %6s %9s %9s %9s" %
          ("server", "steps", "step_ms", "copy_ms", "chunk_max"))
    for pid in sorted(optimizer):
        o = optimizer[pid]
        steps = len(o["step"])
        print("%-10s %6d %9.3f %9.3f %9.3f" % (
            names.get(pid, pid), steps, sum(o["step"]) / steps / 1000,
            sum(o["copy"]) / steps / 1000,
            max(o["chunk"] or [0]) / 1000))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
