"""paramd.torch workers started by `paramctl run` (worker.command): a
SIGKILLed Python worker is restarted and the job completes, over TLS with
the job token; a worker without the token is refused; with replicas, a
SIGKILLed primary costs the Python workers nothing."""

import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from conftest import BIN, DATA, PACKAGE, job_yaml

import paramd.torch as pt
from paramd import _native
from paramd.torch import spec as pt_spec

PARAMCTL = os.path.join(BIN, "tools", "paramctl")

# A worker that trains the tests' MLP on random data, running `hook`
# after every step; each rank prints its last loss exactly when done.
WORKER_TEMPLATE = r'''
import os, signal, sys
import torch
import paramd.torch as pt

ctx = pt.init()
torch.manual_seed(11)
model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(),
                            torch.nn.Linear(16, 4))
opt = pt.DistributedOptimizer(model)
steps = 8
total = steps * ctx.epochs
g = torch.Generator().manual_seed(ctx.rank)
while opt.clock < total:
    x = torch.randn(16, 20, generator=g)
    y = x[:, :4].argmax(dim=1)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step(loss=loss)
HOOK
    if opt.clock % steps == 0:
        opt.report_epoch(loss=float(loss), correct=1, total=2, samples=16 * steps)
opt.finish()
print(f"rank {ctx.rank}: done at clock {opt.clock}, loss {float(loss)!r}",
      flush=True)
'''

# Its first run as rank 1 kills itself with SIGKILL after 5 steps (the
# marker file tells a restart from the first run).
WORKER = WORKER_TEMPLATE.replace("HOOK\n", """\
    marker = f"killed-rank-{ctx.rank}"
    if ctx.rank == 1 and opt.clock == 5 and not os.path.exists(marker):
        open(marker, "w").close()
        print(f"rank 1: SIGKILL at clock {opt.clock}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
""")


def model():
    import torch
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4))


SECURITY = """security:
  token_file: secrets/token
  tls_cert: secrets/server.crt
  tls_key: secrets/server.key
"""


def test_a_killed_python_worker_is_restarted_over_tls(tmp_path):
    pt_spec.write_tensors(model(), str(tmp_path / "model.tensors.yaml"))
    (tmp_path / "train.py").write_text(WORKER)
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(
        "model.tensors.yaml", extra=SECURITY +
        f'worker:\n  command: ["{sys.executable}", "train.py"]\n'
        "restart:\n  max: 2\n  backoff_seconds: 0.1\n").replace(
            "epochs: 1", "epochs: 3"))
    summary = tmp_path / "summary.json"
    run = subprocess.run(
        [PARAMCTL, "run", str(job), "--make-secrets", "--summary",
         str(summary), "--python_path", PACKAGE],
        capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "rank 1: SIGKILL at clock 5" in out
    assert "restarted worker 1" in out, out
    assert "rank 0: done at clock 24" in out
    assert "rank 1: done at clock 24" in out
    assert (tmp_path / "secrets" / "token").exists()
    report = json.loads(summary.read_text())
    assert len(report["epoch_metrics"]) == 3, report
    assert report["restarts_by_process"].get("worker 1") == 1, report


# Its first run as rank 1 is killed in the second epoch (clock 13 of 8-step
# epochs); the optimizer knows the epoch's length, as a DistributedSampler
# tells it, so the restarted run numbers its reports by the clock.
WORKER_KILLED_IN_EPOCH_2 = WORKER_TEMPLATE.replace(
    "steps = 8\n", "steps = 8\nopt.steps_per_epoch = steps\n").replace(
        "HOOK\n", """\
    marker = f"killed-rank-{ctx.rank}"
    if ctx.rank == 1 and opt.clock == 13 and not os.path.exists(marker):
        open(marker, "w").close()
        print(f"rank 1: SIGKILL at clock {opt.clock}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_worker_restarted_mid_job_reports_the_epochs_it_is_in(tmp_path):
    pt_spec.write_tensors(model(), str(tmp_path / "model.tensors.yaml"))
    (tmp_path / "train.py").write_text(WORKER_KILLED_IN_EPOCH_2)
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(
        "model.tensors.yaml", extra=(
            f'worker:\n  command: ["{sys.executable}", "train.py"]\n'
            "restart:\n  max: 2\n  backoff_seconds: 0.1\n")).replace(
                "epochs: 1", "epochs: 3"))
    summary = tmp_path / "summary.json"
    run = subprocess.run(
        [PARAMCTL, "run", str(job), "--summary", str(summary),
         "--python_path", PACKAGE],
        capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "rank 1: SIGKILL at clock 13" in out
    assert "rank 1: done at clock 24" in out
    # paramctl counts an epoch once every rank reported it: had the
    # restarted rank counted its reports from 1, epoch 3 would lack it.
    report = json.loads(summary.read_text())
    assert [e["epoch"] for e in report["epoch_metrics"]] == [1, 2, 3], report


def test_a_worker_without_the_token_is_refused(tmp_path, servers):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token").write_text("a-job-token-of-enough-length\n")
    os.chmod(secrets / "token", 0o600)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", str(secrets / "server.key"), "-out",
         str(secrets / "server.crt"), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True)
    pt_spec.write_tensors(model(), str(tmp_path / "model.tensors.yaml"))
    cluster = servers(job_yaml("model.tensors.yaml", extra=SECURITY), 2)
    # The job's own file: TLS and the token, a step goes through.
    ctx = pt.Context(_native.Worker(cluster.job, 0, cluster.addresses))
    assert ctx.worker.total > 0
    # The same job without the token: every server refuses it.
    no_token = tmp_path / "no-token.yaml"
    no_token.write_text(open(cluster.job).read().replace(
        "  token_file: secrets/token\n", ""))
    other = pt.Context(_native.Worker(str(no_token), 1, cluster.addresses))
    with pytest.raises(RuntimeError, match="UNAUTHENTICATED"):
        pt.DistributedOptimizer(model(), other)
    m = model()
    opt = pt.DistributedOptimizer(m, ctx)
    assert opt.clock == 0


# For a replicated job: rank 0, where a fifo named pause.fifo is in its
# folder, stops after 5 steps until the test writes to it (the test
# SIGKILLs a primary meanwhile).
REPLICATED_WORKER = WORKER_TEMPLATE.replace("HOOK\n", """\
    if ctx.rank == 0 and opt.clock == 5 and os.path.exists("pause.fifo"):
        print(f"rank 0: paused at clock {opt.clock}", flush=True)
        with open("pause.fifo") as f:
            f.read()
""")


def replicated_job(folder, pause):
    folder.mkdir()
    pt_spec.write_tensors(model(), str(folder / "model.tensors.yaml"))
    (folder / "train.py").write_text(REPLICATED_WORKER)
    if pause:
        os.mkfifo(folder / "pause.fifo")
    job = folder / "job.yaml"
    job.write_text(job_yaml(
        "model.tensors.yaml", extra=
        f'worker:\n  command: ["{sys.executable}", "train.py"]\n'
        'replication:\n  factor: 2\n'
        '  backups: ["127.0.0.1:0", "127.0.0.1:0"]\n'
        "checkpoint:\n  enabled: false\n"
        "restart:\n  max: 2\n  backoff_seconds: 0.1\n").replace(
            "epochs: 1", "epochs: 3"))
    return [PARAMCTL, "run", str(job), "--python_path", PACKAGE]


def test_python_workers_carry_on_at_a_backup_bit_for_bit(tmp_path):
    """replication.factor 2 with worker.command: a primary SIGKILLed while
    rank 0 is paused, no checkpoint; under sync both ranks end on the
    undisturbed run's loss exactly."""
    plain = subprocess.run(replicated_job(tmp_path / "plain", pause=False),
                           capture_output=True, text=True, timeout=300)
    out = plain.stdout + plain.stderr
    assert plain.returncode == 0, out
    done = sorted(re.findall(r"rank \d: done at clock 24, loss \S+", out))
    assert len(done) == 2, out

    folder = tmp_path / "killed"
    proc = subprocess.Popen(replicated_job(folder, pause=True),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    watchdog = threading.Timer(300, proc.kill)
    watchdog.start()
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "rank 0: paused at clock 5" in line:
                break
        head = "".join(seen)
        pid = re.findall(r"started server 0 \(pid (\d+)\)", head)
        assert pid, head
        os.kill(int(pid[-1]), signal.SIGKILL)
        with open(folder / "pause.fifo", "w") as f:
            f.write("go")
        rest, _ = proc.communicate()
    finally:
        watchdog.cancel()
    out = head + rest
    assert proc.returncode == 0, out
    assert "server 0" in out and "killed by signal 9" in out, out
    assert sorted(re.findall(r"rank \d: done at clock 24, loss \S+", out)) == done
