#!/usr/bin/python3
"""One worker of the example: trains model.Net on its share of
Fashion-MNIST through paramd servers with paramd.torch.

`paramctl run job.yaml` starts one per rank (worker.command) with the job,
rank and servers in its environment. A worker that is restarted continues
from the clock the servers give it (its share and order of batches are a
function of the clock), so a SIGKILL loses nothing but the step in flight.
"""

import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

import paramd.torch as pt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Net  # noqa: E402


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
    ctx = pt.init()
    torch.set_num_threads(1)
    d = ctx.data
    x = read_idx(d["train_images"], d["train_limit"])
    y = read_idx(d["train_labels"], d["train_limit"])
    tx = read_idx(d["test_images"], d["test_limit"])[ctx.rank::ctx.workers]
    ty = read_idx(d["test_labels"], d["test_limit"])[ctx.rank::ctx.workers]

    model = Net()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
