#!/usr/bin/python3
"""A shipped job's model under PyTorch DDP, for comparison with paramd.

--model cnn (default): the CNN job's network (examples/pytorch/model.py,
as configs/fashion_mnist_cnn.yaml: conv 32 → pool → conv 64 → pool →
dense 128 → dropout 0.25 → dense 10). --model mlp: the main job's
(configs/fashion_mnist_mlp.yaml: 784-256-128-10, ReLU). --model resnet:
examples/pytorch/resnet.py's residual network with batch norm (DDP
broadcasts rank 0's buffers before each forward). Each with the
jobs' batch (64 per rank), optimizer (SGD lr 0.05, momentum 0.9) and rank
shares, trained by N ranks of DistributedDataParallel over gloo, each
with one thread. Prints per epoch the test accuracy (the whole test set,
on rank 0) and samples/s, then the training seconds to the first epoch at
or above 0.90.

    /usr/bin/python3 tools/bench/torch_ddp.py [--model cnn|mlp] [--ranks 2]
        [--epochs 12] [--data /usr/share/datasets/fashion-mnist]

spawns the ranks on this host. Across hosts, one process a rank, each on
its host (scripts/cross-host-main.sh --ddp does this):

    GLOO_SOCKET_IFNAME=IF /usr/bin/python3 tools/bench/torch_ddp.py
        --model mlp --ranks 2 --rank R --master HOST:PORT

Needs Debian's python3-torch (scripts/setup.sh --tests installs it).
"""
import argparse
import gzip
import importlib.util
import os
import struct
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class Mlp(nn.Module):
    """The main job's model: 784-256-128-10 with ReLU."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
            nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.layers(x)


def make_model(kind):
    if kind == "mlp":
        return Mlp()
    # The same network as the PyTorch example's that trains through paramd
    # (examples/pytorch/model.py, or resnet.py), loaded from there.
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    file, factory = {"cnn": ("model.py", "Net"),
                     "resnet": ("resnet.py", "ResNet")}[kind]
    spec = importlib.util.spec_from_file_location(
        "example_model", os.path.join(root, "examples", "pytorch", file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, factory)()


def run(rank, args, init_method):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank,
                            world_size=args.ranks)
    torch.manual_seed(42)
    x = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz"))
    tx = read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz"))
    ty = read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz"))
    # The rank's share, as paramd's DataPartition takes it: i % ranks.
    mine = np.arange(rank, len(y), args.ranks)
    share = len(y) // args.ranks
    mine = mine[:share]
    model = nn.parallel.DistributedDataParallel(make_model(args.model))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    test_x = torch.from_numpy(tx.astype(np.float32) / 255).unsqueeze(1)
    test_y = torch.from_numpy(ty.astype(np.int64))
    trained = 0.0
    to_90 = None
    for epoch in range(1, args.epochs + 1):
        rng = np.random.default_rng(1000 * epoch + rank)
        order = rng.permutation(mine)
        model.train()
        start = time.perf_counter()
        for b in range(0, len(order), args.batch):
            idx = order[b:b + args.batch]
            xb = torch.from_numpy(x[idx].astype(np.float32) / 255).unsqueeze(1)
            yb = torch.from_numpy(y[idx].astype(np.int64))
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
        dist.barrier()
        seconds = time.perf_counter() - start
        trained += seconds
        if rank == 0:
            model.eval()
            with torch.no_grad():
                correct = sum(
                    (model.module(test_x[i:i + 1000]).argmax(1) ==
                     test_y[i:i + 1000]).sum().item()
                    for i in range(0, len(test_y), 1000))
            acc = correct / len(test_y)
            if to_90 is None and acc >= 0.90:
                to_90 = trained
            print(f"epoch {epoch}/{args.epochs}: test accuracy {acc:.4f}, "
                  f"{args.ranks * share / seconds:.0f} samples/s, "
                  f"{trained:.1f} s trained", flush=True)
    if rank == 0:
        print("seconds to 0.90:", f"{to_90:.1f}" if to_90 else "not reached")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--model", choices=("cnn", "mlp", "resnet"), default="cnn")
    p.add_argument("--rank", type=int, default=None,
                   help="run this rank only (with --master), not all here")
    p.add_argument("--master", default=None,
                   help="HOST:PORT of rank 0's rendezvous (with --rank)")
    args = p.parse_args()
    if args.rank is not None:
        if not args.master:
            p.error("--rank needs --master HOST:PORT")
        run(args.rank, args, "tcp://" + args.master)
        return
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(run, args=(args, "file://" + os.path.join(tmp, "rendezvous")),
                 nprocs=args.ranks)


if __name__ == "__main__":
    main()
