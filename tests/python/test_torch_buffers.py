"""Module buffers on the servers: batch norm's running statistics as
statistic tensors of a model.type tensors job, against real paramd-server
processes. Under sync the servers' statistics are the mean of what each
rank's forward passes made of them, every rank evaluates alike, and a job
whose tensors leave the buffers out is refused naming the first one."""

import copy
import os
import subprocess
import sys

import pytest
import torch

from conftest import PACKAGE, run_ranks
from test_torch_worker import batches, context, grads_of, write_job

import paramd.torch as pt


def make_model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(20, 16),
                               torch.nn.BatchNorm1d(16, momentum=0.3),
                               torch.nn.ReLU(), torch.nn.Linear(16, 4))


def statistics(model):
    return {n: b for n, b in model.named_buffers() if b.is_floating_point()}


def reference_steps(reference, data, steps, lr=0.1):
    """What sync through the servers must equal: plain SGD (lr, no
    momentum) on the ranks' mean gradient, and each running statistic the
    mean of what each rank's forward pass made of the round's value."""
    optimizer = torch.optim.SGD(reference.parameters(), lr=lr)
    for s in range(steps):
        ranks = [copy.deepcopy(reference) for _ in data]
        grads = [grads_of(m, *data[r][s])[0] for r, m in enumerate(ranks)]
        with torch.no_grad():
            for name, b in statistics(reference).items():
                b.copy_(sum(statistics(m)[name] for m in ranks) / len(ranks))
        for p, *g in zip(reference.parameters(), *grads):
            p.grad = sum(g) / len(g)
        optimizer.step()


def test_the_spec_tool_lists_buffers_as_statistics(tmp_path):
    model_file = tmp_path / "net.py"
    model_file.write_text(
        "import torch\n"
        "def Net():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 4),\n"
        "                               torch.nn.BatchNorm1d(4))\n")
    env = dict(os.environ, PYTHONPATH=PACKAGE)
    text = subprocess.run([sys.executable, "-m", "paramd.torch.spec",
                           f"{model_file}:Net"], check=True, env=env,
                          capture_output=True, text=True).stdout
    lines = [l.strip() for l in text.splitlines() if l.startswith("  - ")]
    assert [l.split(",")[0] for l in lines] == [
        "- {name: 0.weight", "- {name: 0.bias", "- {name: 1.weight",
        "- {name: 1.bias", "- {name: 1.running_mean", "- {name: 1.running_var"]
    assert lines[4] == ("- {name: 1.running_mean, shape: [4], init: constant, "
                        "value: 0.0, kind: statistic}")
    assert lines[5] == ("- {name: 1.running_var, shape: [4], init: constant, "
                        "value: 1.0, kind: statistic}")
    assert "num_batches_tracked" not in text


def test_sync_keeps_the_mean_of_the_ranks_statistics(tmp_path, servers):
    steps = 5
    cluster = write_job(tmp_path, servers, make_model(), lr=0.1, momentum=0)
    models = [make_model(), make_model()]
    with torch.no_grad():  # Local values differ: the servers' must win.
        models[1][1].running_mean.add_(3.0)
    opts = [pt.DistributedOptimizer(m, context(cluster, r))
            for r, m in enumerate(models)]
    reference = copy.deepcopy(models[0])
    assert torch.equal(models[1][1].running_mean, torch.zeros(16))
    assert torch.equal(models[1][1].running_var, torch.ones(16))
    data = [batches(0, steps), batches(1, steps)]

    def run(rank):
        for x, y in data[rank]:
            opts[rank].zero_grad()
            torch.nn.functional.cross_entropy(models[rank](x), y).backward()
            opts[rank].step()
        opts[rank].finish()

    run_ranks(run)
    reference_steps(reference, data, steps)
    want = dict(reference.named_parameters())
    want.update(statistics(reference))
    for rank, model in enumerate(models):
        got = dict(model.named_parameters())
        got.update(statistics(model))
        for name, value in want.items():
            err = (got[name] - value).abs().max().item()
            assert err <= 1e-6 * max(1.0, value.abs().max().item()), \
                f"rank {rank} {name}: off by {err}"
    # Every rank evaluates with the servers' statistics: the same outputs.
    for m in models:
        m.eval()
    x = batches(7, 1)[0][0]
    with torch.no_grad():
        assert torch.equal(models[0](x), models[1](x))
    assert not torch.equal(models[0][1].running_mean, torch.zeros(16))


def test_a_rank_that_restarts_pulls_the_statistics(tmp_path, servers):
    cluster = write_job(tmp_path, servers, make_model(), policy="async",
                        workers=1, lr=0.1, momentum=0)
    model = make_model()
    opt = pt.DistributedOptimizer(model, context(cluster, 0))
    for x, y in batches(0, 3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    trained = {n: b.clone() for n, b in statistics(model).items()}
    # Three pushes of the change each forward made, added in order: the
    # servers' values are the rank's own running statistics.
    fresh = make_model()
    pt.DistributedOptimizer(fresh, context(cluster, 0))
    for name, value in statistics(fresh).items():
        assert torch.allclose(value, trained[name], rtol=0, atol=1e-6), name
    assert not torch.equal(trained["1.running_var"], torch.ones(16))


def test_a_job_without_the_buffers_is_refused_naming_the_first(tmp_path,
                                                               servers):
    # The same parameters, but layer norm keeps no running statistics.
    no_buffers = torch.nn.Sequential(torch.nn.Linear(20, 16),
                                     torch.nn.LayerNorm(16),
                                     torch.nn.ReLU(), torch.nn.Linear(16, 4))
    cluster = write_job(tmp_path, servers, no_buffers)
    with pytest.raises(ValueError,
                       match=r"the model has 8 tensors and the job 6: the "
                             r"model's '1.running_mean' is not in the job's "
                             r"model.tensors"):
        pt.DistributedOptimizer(make_model(), context(cluster, 0))


def test_a_buffer_listed_as_trainable_is_refused(tmp_path, servers):
    model = make_model()
    cluster = write_job(tmp_path, servers, model)
    job = (tmp_path / "model.tensors.yaml")
    job.write_text(job.read_text().replace(", kind: statistic", ""))
    with pytest.raises(ValueError,
                       match=r"tensor 6 is '1.running_mean' \[16\] "
                             r"\(statistic\) but the job's model.tensors\[6\] "
                             r"is '1.running_mean' \[16\] \("):
        pt.DistributedOptimizer(model, context(cluster, 0))
