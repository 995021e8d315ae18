#!/usr/bin/python3
"""A CNN on Fashion-MNIST: plain.py trains it in one process with a
DataLoader and torch.optim; train.py is plain.py converted to paramd (six
lines differ; docs/pytorch.md shows the diff), run by job.yaml."""
import gzip

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import paramd.torch as pt

DATA = "/usr/share/datasets/fashion-mnist/"  # Debian's dataset-fashion-mnist


def load(images, labels):
    with gzip.open(DATA + images) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(DATA + labels) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return TensorDataset(torch.tensor(x / 255, dtype=torch.float32),
                         torch.tensor(y, dtype=torch.int64))


torch.manual_seed(0)
torch.set_num_threads(1)
train = load("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
test = load("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = pt.DistributedOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
loader = DataLoader(train, batch_sampler=pt.DistributedSampler(len(train), optimizer, per_epoch=True))
for epoch in optimizer.epochs():
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step(loss=loss)
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item()
                      for x, y in DataLoader(test, batch_size=1000))
    print(f"epoch {epoch + 1}: test accuracy {correct / len(test):.4f}",
          flush=True)
    optimizer.report_epoch(correct=correct, total=len(test))
