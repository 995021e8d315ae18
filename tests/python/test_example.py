"""examples/pytorch ships tensors files that are what the spec tool writes
from their models, and job files that validate."""

import os
import subprocess
import sys

import pytest

from conftest import BIN, PACKAGE, ROOT

EXAMPLE = os.path.join(ROOT, "examples", "pytorch")


@pytest.mark.parametrize("model,tensors", [
    ("model.py:Net", "model.tensors.yaml"),
    ("resnet.py:ResNet", "resnet.tensors.yaml")])
def test_the_shipped_tensors_file_is_the_models(model, tensors):
    out = subprocess.run(
        [sys.executable, "-m", "paramd.torch.spec",
         f"examples/pytorch/{model}"], cwd=ROOT, check=True,
        capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=PACKAGE)).stdout
    with open(os.path.join(EXAMPLE, tensors)) as f:
        shipped = f.read()
    # The bounds are the module's initial values, drawn after
    # torch.manual_seed(0): the same file every time.
    assert out == shipped


@pytest.mark.parametrize("job,described", [
    ("job.yaml", ("8 tensor(s) of a framework's model", "421642 parameters")),
    ("job-resnet.yaml", ("47 tensor(s) of a framework's model", "78426 parameters"))])
def test_the_example_job_validates(job, described):
    run = subprocess.run(
        [os.path.join(BIN, "tools", "paramctl"), "validate",
         os.path.join(EXAMPLE, job)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    for text in described:
        assert text in run.stdout
