#!/usr/bin/python3
"""One line of scripts/cross-host-main.sh's table, from one rate's logs.

    cross-host-figures.py RATE RUN_DIR --servers S --workers W --epochs E
        --batch B [--ddp]

paramd: each rank's log (RUN_DIR/worker<R>.log) has a line per epoch
"epoch E/N: ... test accuracy A on this rank's M samples, S samples/s"
(a framework worker's: "... test accuracy on this rank's share A, S
samples/s");
the job's samples/s is the median over epochs of the ranks' sum (as
paramctl counts it), its accuracy the mean of the ranks' last (the shares
are equal). DDP (RUN_DIR/ddp0.log, tools/bench/torch_ddp.py's rank 0):
"epoch E/N: test accuracy A, S samples/s". Bytes: RUN_DIR/{paramd,ddp}.
{before,after} hold each host's counters ("HOST TX RX RETRANS RTOS": its
interface's bytes, its TCP's retransmitted segments and timeouts); hosts
0..S-1 are the servers', the W after them the workers' (DDP's ranks'); a
worker's steps are E × ceil(60000 / W / B) (Fashion-MNIST's training set,
cut as DataPartition cuts it).
"""
import argparse
import math
import re
import statistics
import sys

TRAIN_SAMPLES = 60000


def paramd_figures(run, workers):
    per_epoch, accuracy = {}, {}
    for rank in range(workers):
        with open(f"{run}/worker{rank}.log") as log:
            text = log.read()
        # paramd-worker's line, or a framework worker's ("test accuracy
        # on this rank's share A, S samples/s").
        for m in re.finditer(r"epoch (\d+)/\d+: .*?test accuracy (?:on this "
                             r"rank's share )?([0-9.]+)(?: on this rank's \d+ "
                             r"samples)?, ([0-9.]+) samples/s", text):
            epoch = int(m.group(1))
            per_epoch[epoch] = per_epoch.get(epoch, 0.0) + float(m.group(3))
            accuracy[rank] = float(m.group(2))
    if not per_epoch or len(accuracy) != workers:
        sys.exit(f"cross-host-figures: no epochs in {run}/worker*.log")
    return statistics.median(per_epoch.values()), statistics.mean(
        accuracy.values())


def ddp_figures(run):
    with open(f"{run}/ddp0.log") as log:
        epochs = re.findall(
            r"epoch \d+/\d+: test accuracy ([0-9.]+), ([0-9.]+) samples/s",
            log.read())
    if not epochs:
        sys.exit(f"cross-host-figures: no epochs in {run}/ddp0.log")
    return statistics.median(float(s) for _, s in epochs), float(epochs[-1][0])


def counters(path):
    """By host: (tx bytes, rx bytes, retransmitted segments, RTOs)."""
    out = {}
    with open(path) as f:
        for line in f:
            host, *values = line.split()
            out[int(host)] = tuple(int(v) for v in values)
    return out


def link_kb(run, tag, hosts, steps):
    """Mean KB out and in per worker step over `hosts`' links."""
    before = counters(f"{run}/{tag}.before")
    after = counters(f"{run}/{tag}.after")
    tx = statistics.mean(after[h][0] - before[h][0] for h in hosts)
    rx = statistics.mean(after[h][1] - before[h][1] for h in hosts)
    return f"{tx / steps / 1000:.0f}/{rx / steps / 1000:.0f}"


def losses(run, tag):
    """TCP segments retransmitted and retransmission timeouts, all hosts."""
    before = counters(f"{run}/{tag}.before")
    after = counters(f"{run}/{tag}.after")
    retrans = sum(after[h][2] - before[h][2] for h in after)
    timeouts = sum(after[h][3] - before[h][3] for h in after)
    return f"{retrans}/{timeouts}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("rate")
    p.add_argument("run")
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--ddp", action="store_true")
    a = p.parse_args()
    steps = a.epochs * math.ceil(TRAIN_SAMPLES / a.workers / a.batch)
    servers = range(a.servers)
    workers = range(a.servers, a.servers + a.workers)
    samples, accuracy = paramd_figures(a.run, a.workers)
    line = (f"{a.rate:<8} {samples:10,.0f} {accuracy:8.4f} "
            f"{link_kb(a.run, 'paramd', workers, steps):>13} "
            f"{link_kb(a.run, 'paramd', servers, steps):>13} "
            f"{losses(a.run, 'paramd'):>11}")
    if a.ddp:
        ddp_samples, ddp_accuracy = ddp_figures(a.run)
        line += (f" {ddp_samples:10,.0f} {ddp_accuracy:8.4f} "
                 f"{link_kb(a.run, 'ddp', workers, steps):>13} "
                 f"{losses(a.run, 'ddp'):>11} "
                 f"{samples / ddp_samples:9.2f}x")
    else:
        line += f" {'-':>10} {'-':>8} {'-':>13} {'-':>11} {'-':>10}"
    print(f"{line}  {a.run}")


if __name__ == "__main__":
    main()
