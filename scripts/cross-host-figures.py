#!/usr/bin/python3
"""One line of scripts/cross-host-main.sh's table, from one rate's logs.

    cross-host-figures.py RATE RUN_DIR [--ddp]

paramd: each rank's log (RUN_DIR/worker0.log, worker1.log) has a line per
epoch "epoch E/N: ... test accuracy A on this rank's M samples, S
samples/s"; the job's samples/s is the median over epochs of both ranks'
sum (as paramctl counts it), its accuracy the mean of the ranks' last (the
shares are equal). DDP (RUN_DIR/ddp0.log, tools/bench/torch_ddp.py's rank
0): "epoch E/N: test accuracy A, S samples/s".
"""
import re
import statistics
import sys


def paramd_figures(run):
    per_epoch, accuracy = {}, {}
    for rank in (0, 1):
        with open(f"{run}/worker{rank}.log") as log:
            text = log.read()
        for m in re.finditer(r"epoch (\d+)/\d+: .*?test accuracy ([0-9.]+) on "
                             r"this rank's \d+ samples, ([0-9.]+) samples/s",
                             text):
            epoch = int(m.group(1))
            per_epoch[epoch] = per_epoch.get(epoch, 0.0) + float(m.group(3))
            accuracy[rank] = float(m.group(2))
    if not per_epoch or len(accuracy) != 2:
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


def main():
    rate, run = sys.argv[1], sys.argv[2]
    samples, accuracy = paramd_figures(run)
    line = f"{rate:<8} {samples:12,.0f} {accuracy:10.4f}"
    if "--ddp" in sys.argv[3:]:
        ddp_samples, ddp_accuracy = ddp_figures(run)
        line += (f" {ddp_samples:14,.0f} {ddp_accuracy:13.4f} "
                 f"{samples / ddp_samples:9.2f}x")
    else:
        line += f" {'-':>14} {'-':>13} {'-':>10}"
    print(f"{line}  {run}")


if __name__ == "__main__":
    main()
