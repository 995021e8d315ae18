"""A framework job whose file lists no tensors and has no optimizer
section: the first worker's DistributedOptimizer declares the model and
the script's torch.optim optimizer, the servers take that declaration and
run it, every later worker is checked against it, and a server restarted
with its checkpoints keeps it. Against real paramd-server processes."""

import os
import subprocess

import pytest
import torch

from conftest import BIN, DATA, Servers, run_ranks
from test_torch_worker import (batches, context, make_model,
                               torch_on_averaged_gradients)

import paramd.torch as pt


def job_text(servers=2, checkpoint_dir=None, optimizer=""):
    """A 2-worker sync job on ports 0 with no tensor list."""
    addresses = ", ".join('"127.0.0.1:0"' for _ in range(servers))
    checkpoint = (f"checkpoint:\n  dir: {checkpoint_dir}\n  every_steps: 1\n"
                  if checkpoint_dir else "")
    return f"""job: {{id: declared-test, seed: 3}}
cluster: {{servers: [{addresses}], workers: 2}}
model: {{type: tensors}}
data: {{dir: {DATA}}}
training: {{epochs: 1, batch_size: 16}}
policy: {{type: sync}}
partition: {{chunk_bytes: 1024}}
{optimizer}{checkpoint}"""


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def test_the_first_workers_model_and_optimizer_run_on_the_servers(tmp_path,
                                                                  servers):
    steps = 5
    cluster = servers(job_text())
    for log in cluster.logs:
        assert "waits for its workers to declare the model" in open(log).read()
    models = [make_model(), make_model()]
    opts = [None, None]

    def start(rank):
        opts[rank] = pt.DistributedOptimizer(models[rank], sgd(models[rank]),
                                             context(cluster, rank))

    run_ranks(start)  # Both declare at once: one is taken, one compared.
    for log in cluster.logs:
        text = open(log).read()
        assert "took the model rank" in text
        assert "4 tensor(s), optimizer sgd" in text
    reference = make_model()
    with torch.no_grad():
        for r, p in zip(reference.parameters(), models[0].parameters()):
            r.copy_(p)
    data = [batches(0, steps), batches(1, steps)]

    def run(rank):
        for x, y in data[rank]:
            opts[rank].zero_grad()
            torch.nn.functional.cross_entropy(models[rank](x), y).backward()
            opts[rank].step()
        opts[rank].finish()

    run_ranks(run)
    torch_on_averaged_gradients(reference, data, steps)
    for (name, ref), got in zip(reference.named_parameters(),
                                models[1].parameters()):
        err = (got - ref).abs().max().item()
        assert err <= 1e-6 * ref.abs().max().item(), f"{name}: off by {err}"


def test_a_worker_declaring_another_model_is_refused_naming_it(tmp_path,
                                                              servers):
    cluster = servers(job_text())
    first = make_model()
    pt.DistributedOptimizer(first, sgd(first), context(cluster, 0))
    wider = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    with pytest.raises(RuntimeError,
                       match=r"FAILED_PRECONDITION: .*shard 0: rank 1: the "
                             r"declared model's tensor 0 is '0.weight' "
                             r"\[32, 20\] but the job's is '0.weight' "
                             r"\[16, 20\]"):
        pt.DistributedOptimizer(wider, sgd(wider), context(cluster, 1))
    other = make_model()
    adam = torch.optim.Adam(other.parameters(), lr=0.01)
    with pytest.raises(RuntimeError,
                       match=r"rank 1: the declared optimizer \{.*adam.*\} "
                             r"is not the job's \{.*sgd.*\}"):
        pt.DistributedOptimizer(other, adam, context(cluster, 1))


def test_what_cannot_be_declared_is_refused_before_any_server(tmp_path,
                                                              servers):
    cluster = servers(job_text())
    model = make_model()
    with pytest.raises(ValueError, match="no optimizer section: pass the "
                                         "script's torch.optim optimizer"):
        pt.DistributedOptimizer(model, context(cluster, 0))
    damped = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                             dampening=0.5)
    with pytest.raises(ValueError, match="dampening"):
        pt.DistributedOptimizer(model, damped, context(cluster, 0))
    for log in cluster.logs:
        assert "took the model" not in open(log).read()


def test_a_job_with_an_optimizer_section_refuses_a_torch_optimizer(tmp_path,
                                                                   servers):
    section = "optimizer: {type: sgd, learning_rate: 0.1}\n"
    cluster = servers(job_text(optimizer=section))
    model = make_model()
    with pytest.raises(ValueError, match="leave that section out of the job "
                                         "file to run this torch optimizer"):
        pt.DistributedOptimizer(model, sgd(model), context(cluster, 0))
    # Without one, the model alone is declared and the section runs.
    opt = pt.DistributedOptimizer(model, context(cluster, 0))
    assert opt.clock == 0


def test_a_restarted_server_keeps_the_declared_model(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    job = tmp_path / "job.yaml"
    job.write_text(job_text(servers=1, checkpoint_dir=checkpoints))
    cluster = Servers(str(job), 1, str(tmp_path))
    try:
        model = make_model()
        pt.DistributedOptimizer(model, sgd(model), context(cluster, 0))
        kept = checkpoints / "shard-0-declared-model.yaml"
        assert "0.weight" in kept.read_text()
        assert "momentum: 0.9" in kept.read_text()
    finally:
        cluster.stop()
    (tmp_path / "again").mkdir()
    again = Servers(str(job), 1, str(tmp_path / "again"))
    try:
        log = open(again.logs[0]).read()
        assert "serves the model its workers declared" in log
        assert "waits for its workers" not in log
        wider = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 4))
        with pytest.raises(RuntimeError, match="the declared model's tensor 0 "
                                               "is '0.weight' \\[32, 20\\]"):
            pt.DistributedOptimizer(wider, sgd(wider), context(again, 1))
    finally:
        again.stop()


def test_status_says_the_shard_waits_for_the_model(tmp_path, servers):
    cluster = servers(job_text(servers=1), 1)
    status = subprocess.run(
        [os.path.join(BIN, "tools", "paramctl"), "status", "--job",
         cluster.job, "--servers", cluster.addresses[0]],
        capture_output=True, text=True, timeout=60)
    # It answers status (so paramctl run sees it alive while the workers
    # start) and says why it serves nothing else yet.
    assert status.returncode == 0, status.stdout + status.stderr
    assert "AWAITING THE MODEL" in status.stdout
    assert ("shard 0 waits for its workers to declare the model"
            in status.stdout)
