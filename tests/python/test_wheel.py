"""The wheel (bazel build //python:wheel) installs into a fresh venv that
sees Debian's torch, and the PyTorch example trains from a folder outside
the repository with the installed package: its workers run the venv's
interpreter isolated (-I: no PYTHONPATH), so `paramctl run` cannot hand
them the Bazel-built package instead."""

import glob
import os
import shutil
import subprocess
import sys

from conftest import BIN, DATA, ROOT

PARAMCTL = os.path.join(BIN, "tools", "paramctl")
EXAMPLE = os.path.join(ROOT, "examples", "pytorch")


def wheel():
    found = glob.glob(os.path.join(BIN, "python", "paramd-*.whl"))
    assert len(found) == 1, (
        f"one wheel expected in {BIN}/python, found {found}: "
        "bazel build //python:wheel")
    return found[0]


def install(venv):
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                    str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--no-index",
                    "--no-deps", "--quiet", wheel()], check=True)
    return python


def test_the_wheel_installs_and_the_example_trains_from_outside(tmp_path):
    python = install(tmp_path / "venv")
    # The package comes from the venv, native module included.
    where = subprocess.run(
        [python, "-I", "-c",
         "import paramd, paramd.torch, paramd._native as n; "
         "print(paramd.__file__); print(n.__file__)"],
        cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    site = str(tmp_path / "venv" / "lib")
    assert all(line.startswith(site) for line in where.split()), where

    job = tmp_path / "job"
    job.mkdir()
    for name in ("train.py", "model.py", "model.tensors.yaml"):
        shutil.copy(os.path.join(EXAMPLE, name), job / name)
    (job / "job.yaml").write_text(f"""job:
  id: wheel-example
  seed: 42
cluster:
  servers: ["127.0.0.1:0", "127.0.0.1:0"]
  workers: 2
model:
  type: tensors
  tensors_file: model.tensors.yaml
data:
  dir: {DATA}
  train_limit: 1024
  test_limit: 256
training:
  epochs: 1
  batch_size: 64
optimizer:
  type: sgd
  learning_rate: 0.05
  momentum: 0.9
policy:
  type: sync
worker:
  command: ["{python}", "-I", "train.py"]
""")
    run = subprocess.run([PARAMCTL, "run", str(job / "job.yaml")],
                         cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    for rank in (0, 1):
        assert f"rank {rank}: epoch 1/1: loss" in out, out[-3000:]
    assert "paramctl: epoch 1/1" in out, out[-3000:]


def test_the_converted_script_trains_from_outside(tmp_path):
    """examples/pytorch-convert: a job file without tensors or optimizer;
    the installed package declares both from the script's model and
    torch.optim optimizer."""
    python = install(tmp_path / "venv")
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(os.path.join(ROOT, "examples", "pytorch-convert", "train.py"),
                job / "train.py")
    # One epoch of big batches: a short run of the same script.
    (job / "job.yaml").write_text(f"""job: {{id: wheel-converted, seed: 1}}
cluster: {{servers: ["127.0.0.1:0", "127.0.0.1:0"], workers: 2}}
model: {{type: tensors}}
training: {{epochs: 1, batch_size: 256}}
policy: {{type: sync}}
worker: {{command: ["{python}", "-I", "train.py"]}}
""")
    run = subprocess.run([PARAMCTL, "run", str(job / "job.yaml")],
                         cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "took the model rank" in out, out[-3000:]
    assert "optimizer sgd" in out, out[-3000:]
    accuracy = float(out.split("paramctl: epoch 1/1")[1].split(
        "test accuracy")[1].split()[0])
    assert accuracy > 0.7, out[-3000:]
