"""A small residual network with batch norm for Fashion-MNIST, in plain
PyTorch: the example's model for buffers on the servers (job-resnet.yaml).

stem conv 16 → BN → ReLU, then three residual blocks (16 channels at
28×28, 32 at 14×14, 64 at 7×7; each conv → BN → ReLU → conv → BN, plus the
input, through a 1×1 conv and BN where the shape changes), global average
pooling and dense 10: 78k parameters and 9 batch norms, whose running
means and variances paramd keeps on the servers.
"""

import torch.nn as nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            nn.BatchNorm2d(cout))
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


def ResNet():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
