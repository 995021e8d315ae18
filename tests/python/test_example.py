"""examples/pytorch ships a tensors file that is what the spec tool writes
from its model, and a job file that validates."""

import os
import subprocess
import sys

from conftest import BIN, PACKAGE, ROOT

EXAMPLE = os.path.join(ROOT, "examples", "pytorch")


def test_the_shipped_tensors_file_is_the_models():
    out = subprocess.run(
        [sys.executable, "-m", "paramd.torch.spec",
         "examples/pytorch/model.py:Net"], cwd=ROOT, check=True,
        capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=PACKAGE)).stdout
    with open(os.path.join(EXAMPLE, "model.tensors.yaml")) as f:
        shipped = f.read()
    # The bounds are the module's initial values, drawn after
    # torch.manual_seed(0): the same file every time.
    assert out == shipped


def test_the_example_job_validates():
    run = subprocess.run(
        [os.path.join(BIN, "tools", "paramctl"), "validate",
         os.path.join(EXAMPLE, "job.yaml")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "8 tensor(s) of a framework's model" in run.stdout
    assert "421642 parameters" in run.stdout
