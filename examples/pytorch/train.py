#!/usr/bin/python3
"""One worker of the example: trains model.Net (or --model FILE.py:FACTORY,
as job-resnet.yaml's resnet.py:ResNet) on its share of Fashion-MNIST
through paramd servers with paramd.torch.

`paramctl run job.yaml` starts one per rank (worker.command) with the job,
rank and servers in its environment. A worker that is restarted continues
from the clock the servers give it (its share and order of batches are a
function of the clock), so a SIGKILL loses nothing but the step in flight.
At the end each rank evaluates the whole test set with the parameters and
statistics it holds: under sync every rank prints the same figure.
"""

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

import paramd.torch as pt
from paramd.torch.spec import load_factory

HERE = os.path.dirname(os.path.abspath(__file__))


def read_idx(path, limit=0):
    """An IDX file (gzip or not) as a NumPy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    array = array.reshape(dims)
    return array[:limit] if limit else array


def images(x):
    return torch.from_numpy(x.astype(np.float32) / 255).unsqueeze(1)


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(y), 1000):
            out = model(images(x[i:i + 1000]))
            correct += (out.argmax(1) == torch.from_numpy(
                y[i:i + 1000].astype(np.int64))).sum().item()
    model.train()
    return correct


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=os.path.join(HERE, "model.py:Net"),
                        help="FILE.py:FACTORY (default: model.py:Net)")
    args = parser.parse_args()
    ctx = pt.init()
    torch.set_num_threads(1)
    d = ctx.data
    x = read_idx(d["train_images"], d["train_limit"])
    y = read_idx(d["train_labels"], d["train_limit"])
    all_tx = read_idx(d["test_images"], d["test_limit"])
    all_ty = read_idx(d["test_labels"], d["test_limit"])
    tx, ty = all_tx[ctx.rank::ctx.workers], all_ty[ctx.rank::ctx.workers]

    model = load_factory(args.model)()
    opt = pt.DistributedOptimizer(model)  # The servers' parameters.
    # The rank's share, batch by batch from the servers' clock.
    sampler = pt.DistributedSampler(len(y), opt)
    loss_fn = nn.CrossEntropyLoss()
    epoch_loss, epoch_samples, started = 0.0, 0, time.perf_counter()
    for idx in sampler:
        clock = opt.clock
        # Dropout's masks are a function of (seed, rank, clock).
        torch.manual_seed(ctx.seed * 1_000_003 + ctx.rank * 100_003 + clock)
        opt.zero_grad()
        loss = loss_fn(model(images(x[idx])),
                       torch.from_numpy(y[idx].astype(np.int64)))
        loss.backward()
        opt.step(loss=loss)
        epoch_loss += loss.item() * len(idx)
        epoch_samples += len(idx)
        if sampler.epoch_ended:
            seconds = time.perf_counter() - started
            correct = evaluate(model, tx, ty)
            opt.report_epoch(loss=epoch_loss / max(epoch_samples, 1),
                             correct=correct, total=len(ty),
                             samples=epoch_samples, seconds=seconds)
            print(f"rank {ctx.rank}: epoch {sampler.epoch}/{ctx.epochs}: loss "
                  f"{epoch_loss / max(epoch_samples, 1):.4f}, test accuracy "
                  f"on this rank's share {correct / len(ty):.4f}, "
                  f"{epoch_samples / seconds:.0f} samples/s", flush=True)
            epoch_loss, epoch_samples, started = 0.0, 0, time.perf_counter()
    opt.finish()
    print(f"rank {ctx.rank}: the whole test set: accuracy "
          f"{evaluate(model, all_tx, all_ty) / len(all_ty):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
