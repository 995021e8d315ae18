"""paramd.torch.EmbeddingBag: a server table's rows pulled and pushed by
row from PyTorch; under sync, rows and dense tensors equal torch's
EmbeddingBag and Linear trained on the averaged gradients."""


import numpy as np
import pytest
import torch

from conftest import job_yaml, run_ranks

import paramd.torch as pt
from paramd import _native
from paramd.torch import spec as pt_spec

TABLE = """  embeddings:
    - name: words
      rows: 50
      dim: 8
      init: uniform
      init_scale: 0.5
      optimizer: {type: sgd, learning_rate: 0.2}
"""


class Net(torch.nn.Module):
    def __init__(self, bag):
        super().__init__()
        self.bag = bag
        torch.manual_seed(5)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, ids):
        return self.fc(self.bag(ids))


def dense_only():
    torch.manual_seed(5)
    return torch.nn.Linear(8, 4)


def batches(rank, steps):
    g = torch.Generator().manual_seed(40 + rank)
    out = []
    for _ in range(steps):
        ids = torch.randint(0, 50, (16, 5), generator=g)
        y = ids[:, 0] % 4
        out.append((ids, y))
    return out


def job(tmp_path, servers):
    # The tensors of Net are fc's (named fc.weight, fc.bias).
    model = torch.nn.Module()
    model.fc = dense_only()
    pt_spec.write_tensors(model, str(tmp_path / "model.tensors.yaml"))
    text = job_yaml("model.tensors.yaml").replace(
        "  tensors_file: model.tensors.yaml\n",
        "  tensors_file: model.tensors.yaml\n" + TABLE)
    return servers(text, 2)


def context(cluster, rank):
    return pt.Context(_native.Worker(cluster.job, rank, cluster.addresses))


def all_rows(ctx):
    rows = np.empty((50, 8), dtype=np.float32)
    ctx.worker.pull_rows(0, np.arange(50, dtype=np.uint64), rows)
    return torch.from_numpy(rows)


def test_rows_train_as_torch_embedding_bag_under_sync(tmp_path, servers):
    steps = 4
    cluster = job(tmp_path, servers)
    ctxs = [context(cluster, r) for r in range(2)]
    models = [Net(pt.EmbeddingBag("words", mode="mean", context=c))
              for c in ctxs]
    opts = [pt.DistributedOptimizer(m, c) for m, c in zip(models, ctxs)]
    start_rows = all_rows(ctxs[0])
    reference = torch.nn.EmbeddingBag(50, 8, mode="mean")
    ref_fc = dense_only()
    with torch.no_grad():
        reference.weight.copy_(start_rows)
        ref_fc.weight.copy_(models[0].fc.weight)
        ref_fc.bias.copy_(models[0].fc.bias)
    data = [batches(0, steps), batches(1, steps)]

    def run(r):
        for ids, y in data[r]:
            opts[r].zero_grad()
            loss = torch.nn.functional.cross_entropy(models[r](ids), y)
            loss.backward()
            opts[r].step(loss=loss)

    run_ranks(run)
    dense = torch.optim.SGD(ref_fc.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        grads = []
        for r in range(2):
            ids, y = data[r][s]
            reference.zero_grad()
            ref_fc.zero_grad()
            loss = torch.nn.functional.cross_entropy(ref_fc(reference(ids)), y)
            loss.backward()
            grads.append((reference.weight.grad.clone(),
                          [p.grad.clone() for p in ref_fc.parameters()]))
        with torch.no_grad():
            # The table's plain SGD on the rows' averaged gradient.
            reference.weight -= 0.2 * (grads[0][0] + grads[1][0]) / 2
        for p, a, b in zip(ref_fc.parameters(), grads[0][1], grads[1][1]):
            p.grad = (a + b) / 2
        dense.step()
    # The rows as of the last clock, from the servers.
    rows = all_rows(ctxs[0]).numpy()
    for o in opts:
        o.finish()
    scale = reference.weight.detach().abs().max().item()
    assert np.abs(rows - reference.weight.detach().numpy()).max() <= 1e-6 * scale
    assert not torch.equal(torch.from_numpy(rows), start_rows)
    for got, ref in zip(models[0].fc.parameters(), ref_fc.parameters()):
        scale = ref.detach().abs().max().item()
        assert (got - ref).abs().max().item() <= 1e-6 * scale


def test_a_bag_names_its_table(tmp_path, servers):
    cluster = job(tmp_path, servers)
    ctx = context(cluster, 0)
    with pytest.raises(ValueError, match="'tags' is not in the job's "
                                         "model.embeddings \\(words\\)"):
        pt.EmbeddingBag("tags", context=ctx)
    bag = pt.EmbeddingBag("words", context=ctx)
    assert (bag.num_embeddings, bag.embedding_dim) == (50, 8)
    with pytest.raises(ValueError, match=r"must be in \[0, 50\)"):
        bag(torch.tensor([[1, 50]]))
