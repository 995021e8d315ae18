"""paramd.torch against real paramd-server processes over loopback gRPC:
the spec tool, sync equal to torch.optim.SGD on the averaged gradients,
async and ssp, a model that differs from the job's, the GIL released
during a blocking step."""

import json
import math
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

from conftest import BIN, PACKAGE, job_yaml, run_ranks

import paramd.torch as pt
from paramd import _native
from paramd.torch import spec as pt_spec


def make_model():
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4))


def batches(rank, steps, n=16):
    """Each rank's batches: a fixed synthetic classification problem."""
    g = torch.Generator().manual_seed(100 + rank)
    out = []
    for _ in range(steps):
        x = torch.randn(n, 20, generator=g)
        y = (x[:, :4].argmax(dim=1))
        out.append((x, y))
    return out


def write_job(tmp_path, servers_fixture, model, **job_args):
    tensors = tmp_path / "model.tensors.yaml"
    pt_spec.write_tensors(model, str(tensors))
    count = job_args.pop("servers", 2)
    return servers_fixture(job_yaml(tensors.name, servers=count, **job_args),
                           count)


def context(cluster, rank):
    return pt.Context(_native.Worker(cluster.job, rank, cluster.addresses))


def grads_of(model, x, y):
    model.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return [p.grad.detach().clone() for p in model.parameters()], loss


def run_rank(model, opt, data, losses):
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step(loss=loss)
        losses.append(float(loss))
    opt.finish()


def train_both(models, opts, data, losses):
    """Both ranks' steps, each on a thread of its own (a sync step waits
    for the other rank's push)."""
    run_ranks(lambda r: run_rank(models[r], opts[r], data[r], losses[r]))


def torch_on_averaged_gradients(reference, data, steps, optimizer=None,
                                scheduler=None):
    """What sync through the servers must equal: `optimizer` over
    `reference` (default: torch SGD, lr 0.1, momentum 0.9), and its
    scheduler if any, stepped on the mean of the two ranks' gradients."""
    if optimizer is None:
        optimizer = torch.optim.SGD(reference.parameters(), lr=0.1,
                                    momentum=0.9)
    for s in range(steps):
        g0, _ = grads_of(reference, *data[0][s])
        g1, _ = grads_of(reference, *data[1][s])
        for p, a, b in zip(reference.parameters(), g0, g1):
            p.grad = (a + b) / 2
        optimizer.step()
        if scheduler is not None:
            scheduler.step()


def test_spec_tool_writes_the_models_tensors(tmp_path):
    model_file = tmp_path / "net.py"
    model_file.write_text(
        "import torch\n"
        "def Net():\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3),\n"
        "                               torch.nn.BatchNorm2d(4),\n"
        "                               torch.nn.Flatten(),\n"
        "                               torch.nn.Linear(4 * 26 * 26, 10))\n")
    out = tmp_path / "net.tensors.yaml"
    env = dict(os.environ, PYTHONPATH=PACKAGE)
    subprocess.run([sys.executable, "-m", "paramd.torch.spec",
                    f"{model_file}:Net", "-o", str(out)], check=True, env=env)
    text = out.read_text()
    assert "{name: 0.weight, shape: [4, 1, 3, 3], init: uniform, bound:" in text
    assert "{name: 1.weight, shape: [4], init: constant, value: 1.0}" in text
    assert "{name: 1.bias, shape: [4], init: constant, value: 0.0}" in text
    assert "{name: 3.weight, shape: [10, 2704], init: uniform" in text
    bad = subprocess.run([sys.executable, "-m", "paramd.torch.spec",
                          f"{model_file}:Missing"], env=env,
                         capture_output=True, text=True)
    assert bad.returncode != 0
    assert "has no callable 'Missing'" in bad.stderr


def test_sync_equals_torch_sgd_on_the_averaged_gradients(tmp_path, servers):
    steps = 6
    cluster = write_job(tmp_path, servers, make_model(), lr=0.1, momentum=0.9)
    models = [make_model(), make_model()]
    # Different local values: the servers' initial state must win.
    with torch.no_grad():
        for p in models[1].parameters():
            p.add_(1.0)
    opts = [pt.DistributedOptimizer(m, context(cluster, r))
            for r, m in enumerate(models)]
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)
    reference = make_model()
    with torch.no_grad():
        for r, p in zip(reference.parameters(), models[0].parameters()):
            r.copy_(p)
    data = [batches(0, steps), batches(1, steps)]
    losses = [[], []]
    train_both(models, opts, data, losses)
    torch_on_averaged_gradients(reference, data, steps)
    assert opts[0].clock == steps and opts[1].clock == steps
    for name_p, ref, got0, got1 in zip(reference.named_parameters(),
                                       reference.parameters(),
                                       models[0].parameters(),
                                       models[1].parameters()):
        name = name_p[0]
        assert torch.equal(got0, got1), name
        scale = ref.detach().abs().max().item()
        err = (got0 - ref).abs().max().item()
        assert err <= 1e-6 * scale, f"{name}: {err} against {scale}"
    assert losses[0][-1] < losses[0][0]


def test_a_model_that_differs_is_refused_naming_the_tensor(tmp_path, servers):
    cluster = write_job(tmp_path, servers, make_model())
    other = torch.nn.Sequential(torch.nn.Linear(20, 12), torch.nn.ReLU(),
                                torch.nn.Linear(12, 4))
    with pytest.raises(ValueError,
                       match=r"tensor 0 is '0.weight' \[12, 20\] but the "
                             r"job's model.tensors\[0\] is '0.weight' "
                             r"\[16, 20\]"):
        pt.DistributedOptimizer(other, context(cluster, 0))
    extra = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4), torch.nn.Linear(4, 4))
    with pytest.raises(ValueError, match="the model's '3.weight' is not in "
                                         "the job's model.tensors"):
        pt.DistributedOptimizer(extra, context(cluster, 0))


def test_the_gil_is_released_during_a_blocking_step(tmp_path, servers):
    cluster = write_job(tmp_path, servers, make_model())
    models = [make_model(), make_model()]
    opts = [pt.DistributedOptimizer(m, context(cluster, r))
            for r, m in enumerate(models)]
    (x0, y0), = batches(0, 1)
    (x1, y1), = batches(1, 1)
    done = threading.Event()

    def rank0():
        torch.nn.functional.cross_entropy(models[0](x0), y0).backward()
        opts[0].step()  # Waits for rank 1's push of this round (sync).
        done.set()

    t = threading.Thread(target=rank0)
    t.start()
    # This thread runs Python while rank 0 waits inside step(): it could
    # not if the step held the GIL.
    progress = 0
    while progress < 200000 and not done.is_set():
        progress += 1
    assert progress == 200000
    assert not done.is_set()  # Rank 0 is still waiting for the round.
    torch.nn.functional.cross_entropy(models[1](x1), y1).backward()
    opts[1].step()
    assert done.wait(timeout=60)
    t.join()
    assert opts[0].clock == 1 and opts[1].clock == 1


def status_of(cluster):
    """paramctl status --json: each shard's ShardStatus, in shard order."""
    out = subprocess.run(
        [os.path.join(BIN, "tools", "paramctl"), "status", "--job",
         cluster.job, "--servers", ",".join(cluster.addresses), "--json"],
        check=True, capture_output=True, text=True).stdout
    servers = json.loads(out)["servers"]
    assert all(s["ok"] for s in servers), servers
    return [s["status"] for s in servers]


@pytest.mark.parametrize("policy", ["async", "ssp"])
def test_async_and_ssp_train_and_lose_no_push(tmp_path, servers, policy):
    steps = 8
    cluster = write_job(tmp_path, servers, make_model(), policy=policy,
                        lr=0.05)
    models = [make_model(), make_model()]
    opts = [pt.DistributedOptimizer(m, context(cluster, r))
            for r, m in enumerate(models)]
    losses = [[], []]
    run_ranks(lambda r: run_rank(models[r], opts[r], batches(r, steps),
                                 losses[r]))
    assert [o.clock for o in opts] == [steps, steps]
    shards = status_of(cluster)
    assert len(shards) == 2
    for shard in shards:
        # Every push applied once: one version per push under async and ssp.
        assert int(shard["version"]) == 2 * steps, shard
        assert int(shard["pushes"]) == 2 * steps, shard
    for m in models:
        for p in m.parameters():
            assert torch.isfinite(p).all()


def test_a_traced_framework_step_is_on_the_timeline(tmp_path, servers):
    """With a tracing section, a framework worker records each traced
    step: the framework's compute since the step before, its push+pull and
    each shard's call (push, wait, pull), in order."""
    steps = 6
    trace_dir = tmp_path / "trace"
    cluster = write_job(
        tmp_path, servers, make_model(), policy="async",
        extra=f"tracing:\n  dir: {trace_dir}\n  from_step: 2\n  steps: 3\n")
    model = make_model()
    opt = pt.DistributedOptimizer(model, context(cluster, 0))
    run_rank(model, opt, batches(0, steps), [])
    lines = (trace_dir / "worker-0.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    steps_seen = {}
    for e in events:
        if e["ph"] != "X":
            continue
        assert 2 <= e["args"]["clock"] < 5, e
        steps_seen.setdefault(e["args"]["clock"], {})[(e["tid"], e["name"])] = e
    assert sorted(steps_seen) == [2, 3, 4]
    for clock, seen in steps_seen.items():
        step = seen[(0, "step")]
        compute = seen[(0, "compute")]
        exchange = seen[(0, "push+pull")]
        assert step["ts"] <= compute["ts"]
        assert compute["ts"] + compute["dur"] <= exchange["ts"]
        assert exchange["ts"] + exchange["dur"] <= step["ts"] + step["dur"]
        for shard in (1, 2):
            push, wait, pull = (seen[(shard, n)] for n in ("push", "wait",
                                                          "pull"))
            assert push["ts"] >= exchange["ts"]
            assert push["ts"] + push["dur"] <= wait["ts"]
            assert wait["ts"] + wait["dur"] <= pull["ts"]
            assert (pull["ts"] + pull["dur"] <=
                    exchange["ts"] + exchange["dur"])


def test_report_epoch_reaches_status(tmp_path, servers):
    cluster = write_job(tmp_path, servers, make_model(), policy="async")
    model = make_model()
    ctx = context(cluster, 0)
    opt = pt.DistributedOptimizer(model, ctx)
    run_rank(model, opt, batches(0, 3), [])
    opt.report_epoch(loss=0.5, correct=30, total=40)
    shards = status_of(cluster)
    epochs = shards[0].get("epochs", [])
    assert epochs, shards[0]
    assert int(epochs[0]["epoch"]) == 1


def test_a_binary_classifiers_scores_give_the_jobs_auc(tmp_path, servers):
    cluster = write_job(tmp_path, servers, make_model(), policy="async")
    model = make_model()
    ctx = context(cluster, 0)
    opt = pt.DistributedOptimizer(model, ctx)
    run_rank(model, opt, batches(0, 3), [])
    # Bad scores are refused naming what is wrong, and nothing is filed.
    with pytest.raises(ValueError, match="together"):
        opt.report_epoch(loss=0.5, scores=[0.5])
    with pytest.raises(ValueError, match="not both"):
        opt.report_epoch(loss=0.5, scores=[0.5], labels=[1], correct=1,
                         total=1)
    with pytest.raises(ValueError, match="labels: every label must be 0 or 1"):
        opt.report_epoch(loss=0.5, scores=[0.5], labels=[0.5])
    with pytest.raises(ValueError, match=r"scores\[1\]: 1.5 is not a "
                                         r"probability"):
        opt.report_epoch(loss=0.5, scores=[0.5, 1.5], labels=[0, 1])
    with pytest.raises(ValueError, match="2 of them for 1 labels"):
        opt.report_epoch(loss=0.5, scores=[0.5, 0.5], labels=[0])
    assert not status_of(cluster)[0].get("epochs")
    # Positives at 0.9 and 0.4, negatives at 0.2 and 0.6: 3 of 4 pairs.
    scores = torch.tensor([0.9, 0.2, 0.4, 0.6])
    labels = torch.tensor([1, 0, 1, 0])
    opt.report_epoch(loss=0.5, scores=scores, labels=labels)
    (epoch,) = status_of(cluster)[0]["epochs"]
    assert epoch["test_scored"]
    assert epoch["test_auc"] == pytest.approx(0.75)
    assert int(epoch["test_total"]) == 4
    assert epoch["test_accuracy"] == pytest.approx(0.5)  # 0.9 and 0.2 right
    expected = -sum(math.log(p) for p in (0.9, 0.8, 0.4, 0.4)) / 4
    # (The scores were float32.)
    assert epoch["test_log_loss"] == pytest.approx(expected, rel=1e-6)


def test_report_epoch_defaults_to_the_mean_step_loss_and_the_clocks_epoch(
        tmp_path, servers):
    pt_spec.write_tensors(make_model(), str(tmp_path / "model.tensors.yaml"))
    cluster = servers(job_yaml("model.tensors.yaml", policy="async").replace(
        "epochs: 1", "epochs: 2"))
    model = make_model()
    ctx = context(cluster, 0)
    opt = pt.DistributedOptimizer(model, ctx)
    with pytest.raises(ValueError, match="no step was given a loss"):
        opt.report_epoch(correct=1, total=2)
    # 2 ranks of 48 samples, batches of 16: 3 steps an epoch, 2 epochs.
    sampler = pt.DistributedSampler(96, opt, ctx)
    assert opt.steps_per_epoch == 3
    data = batches(0, 6)
    losses = []
    for _ in sampler:
        x, y = data[opt.clock]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step(loss=loss)
        losses.append(float(loss))
        if sampler.epoch_ended and sampler.epoch == 2:
            opt.report_epoch(correct=30, total=40)  # epoch 1 not reported
    opt.finish()
    epochs = {int(e["epoch"]): e for e in status_of(cluster)[0]["epochs"]}
    assert list(epochs) == [2]  # numbered by the clock, not by reports
    assert epochs[2]["train_loss"] == pytest.approx(sum(losses) / 6,
                                                    rel=1e-6)


def test_rank_0s_values_become_the_servers_initial_state(tmp_path, servers):
    steps = 4
    cluster = write_job(tmp_path, servers, make_model(), lr=0.1, momentum=0.9,
                        initial_values="rank0")
    models = [make_model(), make_model()]
    with torch.no_grad():
        for p in models[0].parameters():
            p.mul_(3.0)  # Nothing the servers could have drawn.
        for p in models[1].parameters():
            p.add_(1.0)
    initial = [p.detach().clone() for p in models[0].parameters()]
    opts = [None, None]
    rank1_ready = threading.Event()

    def rank1():
        opts[1] = pt.DistributedOptimizer(models[1], context(cluster, 1))
        rank1_ready.set()

    t = threading.Thread(target=rank1)
    t.start()
    # Rank 1 waits inside its pull until rank 0 has sent its values: the
    # servers' status shows the pull waiting for them.
    deadline = time.monotonic() + 60
    while not any(w["rank"] == 1 and "rank 0's initial values" in
                  w["waiting_on"] for shard in status_of(cluster)
                  for w in shard["waiting"]):
        assert time.monotonic() < deadline, status_of(cluster)
    assert not rank1_ready.is_set()
    ctx0 = context(cluster, 0)
    pt.broadcast_parameters(models[0], ctx0)
    assert rank1_ready.wait(timeout=60)
    t.join()
    opts[0] = pt.DistributedOptimizer(models[0], ctx0)
    for m in models:
        for p, want in zip(m.parameters(), initial):
            assert torch.equal(p.detach(), want)
    # Training goes on from them, as torch SGD from rank 0's values.
    reference = make_model()
    with torch.no_grad():
        for r, want in zip(reference.parameters(), initial):
            r.copy_(want)
    data = [batches(0, steps), batches(1, steps)]
    train_both(models, opts, data, [[], []])
    torch_on_averaged_gradients(reference, data, steps)
    for ref, got in zip(reference.parameters(), models[0].parameters()):
        scale = ref.detach().abs().max().item()
        assert (got - ref).abs().max().item() <= 1e-6 * scale


def test_broadcast_needs_a_job_that_asks_for_it(tmp_path, servers):
    cluster = write_job(tmp_path, servers, make_model())
    with pytest.raises(ValueError, match="model.initial_values"):
        pt.broadcast_parameters(make_model(), context(cluster, 0))


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device (and Debian's torch is CPU-only)")
def test_a_cuda_model_steps_as_the_cpu_one(tmp_path, servers):
    steps = 3
    cluster = write_job(tmp_path, servers, make_model(), lr=0.1, momentum=0.9)
    models = [make_model().cuda(), make_model()]
    opts = [pt.DistributedOptimizer(m, context(cluster, r))
            for r, m in enumerate(models)]
    data = [batches(0, steps), batches(1, steps)]

    def run(r):
        device = next(models[r].parameters()).device
        for x, y in data[r]:
            opts[r].zero_grad()
            loss = torch.nn.functional.cross_entropy(
                models[r](x.to(device)), y.to(device))
            loss.backward()
            opts[r].step(loss=loss)
        opts[r].finish()

    run_ranks(run)
    # Both ranks hold the servers' parameters of the last clock.
    for gpu, cpu in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(gpu.detach().cpu(), cpu.detach())
