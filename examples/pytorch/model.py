"""The example's network: a PyTorch CNN for Fashion-MNIST.

conv 32 → ReLU → max-pool → conv 64 → ReLU → max-pool → dense 128 → ReLU →
dropout 0.25 → dense 10: the network of configs/fashion_mnist_cnn.yaml and
tools/bench/torch_ddp.py, written in PyTorch.
"""

import torch.nn as nn


def Net():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10))
