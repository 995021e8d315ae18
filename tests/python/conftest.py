"""Fixtures of the PyTorch worker's tests: real paramd-server processes on
ports they pick (port 0, read from their log), the paramd package
from Bazel's output, and job files in a fresh folder.

PARAMD_BIN (default: the repository's bazel-bin) holds server/paramd-server
and python/package; scripts/test.sh builds both first.
"""

import os
import re
import subprocess
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("PARAMD_BIN", os.path.join(ROOT, "bazel-bin"))
SERVER = os.path.join(BIN, "server", "paramd-server")
PACKAGE = os.path.join(BIN, "python", "package")
if PACKAGE not in sys.path:
    sys.path.insert(0, PACKAGE)

DATA = "/usr/share/datasets/fashion-mnist"


def run_ranks(run, ranks=2, timeout=120):
    """run(rank) for each rank, each on a thread of its own (a sync step
    waits for the other ranks' pushes); every thread must end in time."""
    threads = [threading.Thread(target=run, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
        assert not t.is_alive()


def job_yaml(tensors_file, servers=2, workers=2, policy="sync", lr=0.1,
             momentum=0.9, chunk_bytes=1024, extra="", initial_values=None):
    """A model.type tensors job on ports 0 (the servers pick theirs)."""
    addresses = ", ".join('"127.0.0.1:0"' for _ in range(servers))
    staleness = "\n  staleness: 2" if policy == "ssp" else ""
    initial = (f"\n  initial_values: {initial_values}" if initial_values
               else "")
    return f"""job:
  id: torch-test
  seed: 3
cluster:
  servers: [{addresses}]
  workers: {workers}
model:
  type: tensors
  tensors_file: {tensors_file}{initial}
data:
  dir: {DATA}
training:
  epochs: 1
  batch_size: 16
optimizer:
  type: sgd
  learning_rate: {lr}
  momentum: {momentum}
policy:
  type: {policy}{staleness}
partition:
  chunk_bytes: {chunk_bytes}
{extra}"""


class Servers:
    """paramd-server processes for every shard of a job file. Each one's
    output is read by a thread of its own (into shard-K.log); the port it
    bound comes from its "listening on port N" line."""

    def __init__(self, job, count, folder, extra_args=()):
        self.job = job
        self.procs = []
        self.addresses = []
        self.logs = []
        found = []
        for k in range(count):
            proc = subprocess.Popen(
                [SERVER, "--job", job, "--shard", str(k), "--log_level",
                 "info", *extra_args],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.procs.append(proc)
            log = os.path.join(folder, f"shard-{k}.log")
            self.logs.append(log)
            port = {"event": threading.Event(), "value": None}
            found.append(port)
            threading.Thread(target=_drain, args=(proc, log, port),
                             daemon=True).start()
        for k, port in enumerate(found):
            if not port["event"].wait(timeout=60) or port["value"] is None:
                self.stop()
                raise RuntimeError(f"paramd-server shard {k} did not listen: "
                                   + open(self.logs[k]).read())
            self.addresses.append(f"127.0.0.1:{port['value']}")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _drain(proc, log_path, port):
    """Copies a server's output to its log; sets port once it listens (or
    with None when it exits first)."""
    pattern = re.compile(r"listening on port (\d+)")
    with open(log_path, "w") as log:
        for line in proc.stdout:
            log.write(line)
            log.flush()
            m = pattern.search(line)
            if m and port["value"] is None:
                port["value"] = int(m.group(1))
                port["event"].set()
    port["event"].set()


@pytest.fixture
def servers(tmp_path):
    """servers(job_text, count) → a running Servers (stopped after)."""
    started = []

    def start(job_text, count=2, extra_args=()):
        job = tmp_path / "job.yaml"
        job.write_text(job_text)
        s = Servers(str(job), count, str(tmp_path), extra_args)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
