"""tools/rows/click_reference.py: the click-log reader on the files
rows_bench writes, the exact AUC against counting every pair, and the same
model trained through paramd (paramd.torch.EmbeddingBag, paramctl run)
learning as the single process does."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import BIN, PACKAGE, ROOT

PARAMCTL = os.path.join(BIN, "tools", "paramctl")

_spec = importlib.util.spec_from_file_location(
    "click_reference", os.path.join(ROOT, "tools", "rows", "click_reference.py"))
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)


def pairs_auc(scores, labels):
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (
        pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


def test_exact_auc_equals_counting_pairs_ties_half():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(2, 300))
        # Few distinct scores: many ties.
        scores = rng.integers(0, 7, n).astype(np.float64)
        labels = rng.integers(0, 2, n)
        if labels.min() == labels.max():
            continue
        assert ref.exact_auc(scores, labels) == pytest.approx(
            pairs_auc(scores, labels), abs=1e-12)
    assert np.isnan(ref.exact_auc(np.array([0.1, 0.2]), np.array([1, 1])))


def test_read_log_decodes_labels_and_hex_values(tmp_path):
    path = tmp_path / "log.tsv"
    path.write_text("1\t0000000a\tffffffff\n0\t7b707075\t00000000\n")
    labels, values, x = ref.read_log(str(path), 2)
    assert labels.tolist() == [1, 0]
    assert values.tolist() == [[10, 0xFFFFFFFF], [0x7B707075, 0]]
    assert x.shape == (2, 0)


def test_read_log_reads_dense_counts_as_paramd_worker_does(tmp_path):
    path = tmp_path / "log.tsv"
    path.write_text("1\t5\t\t-3\t0000000a\tffffffff\n"
                    "0\t0\t2.5\t1000\t7b707075\t00000000\n")
    labels, values, x = ref.read_log(str(path), 2, dense=3)
    assert labels.tolist() == [1, 0]
    assert values.tolist() == [[10, 0xFFFFFFFF], [0x7B707075, 0]]
    # log(1 + max(c, 0)), a missing count 0: worker/data/click_log_file.h.
    assert x.dtype == np.float32
    assert x.tolist() == np.float32(
        np.log1p([[5, 0, 0], [0, 2.5, 1000]])).tolist()
    path.write_text("1\t5\t0000000a\tffffffff\n")
    with pytest.raises(SystemExit, match="3 columns after the label, not 3 "
                                         r"\+ 2"):
        ref.read_log(str(path), 2, dense=3)


def test_read_log_refuses_other_layouts(tmp_path):
    path = tmp_path / "log.tsv"
    path.write_text("1\t0000000a\n")
    with pytest.raises(SystemExit, match="fixed-width lines"):
        ref.read_log(str(path), 2)
    path.write_text("2\t0000000a\t0000000b\n")
    with pytest.raises(SystemExit, match="label is not 0 or 1"):
        ref.read_log(str(path), 2)
    path.write_text("1 0000000a\t0000000b\n")
    with pytest.raises(SystemExit, match="not label<TAB>"):
        ref.read_log(str(path), 2)
    path.write_text("1\t0000000A\t0000000b\n")
    with pytest.raises(SystemExit, match="lowercase hex"):
        ref.read_log(str(path), 2)


def write_planted_log(path, samples, seed, dense=0):
    """A small click log in rows_bench's layout whose labels follow the
    first two fields' values (few values each: every row is seen often),
    and with `dense` the first count's logarithm."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 8, (samples, 4))
    counts = rng.integers(0, 60, (samples, dense))
    logit = (values[:, 0] - 3.5) * 0.8 + (values[:, 1] % 2) * 1.5 - 0.7
    if dense:
        logit += (np.log1p(counts[:, 0]) - 3) * 1.5
    labels = (rng.random(samples) < 1 / (1 + np.exp(-logit))).astype(int)
    with open(path, "w") as f:
        for y, c, v in zip(labels, counts, values):
            f.write("\t".join([str(y)] + [str(k) for k in c] +
                              [f"{x * 2654435761 % 2**32:08x}" for x in v])
                    + "\n")


# Without dense features; with two counts through a bottom MLP (DLRM's).
@pytest.mark.parametrize("dense,bottom", [(0, ""), (2, "4")])
def test_the_same_model_through_paramd_learns_as_the_single_process(
        tmp_path, dense, bottom):
    write_planted_log(tmp_path / "train.tsv", 8192, 1, dense)
    write_planted_log(tmp_path / "test.tsv", 2048, 2, dense)
    script = os.path.join(ROOT, "tools", "rows", "click_reference.py")
    common = ["--fields", "4", "--dim", "4", "--hidden", "8", "--batch", "256",
              "--table_lr", "0.2", "--dense_lr", "0.01", "--dense", str(dense),
              "--bottom", bottom]
    plain = subprocess.run(
        [sys.executable, script, str(tmp_path)] + common,
        capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    plain_auc = float(re.search(r"test AUC: ([0-9.]+)", plain.stdout).group(1))
    job = tmp_path / "job.yaml"
    subprocess.run([sys.executable, script, str(tmp_path), "--paramd_job",
                    str(job)] + common, check=True, timeout=60)
    summary = tmp_path / "summary.json"
    run = subprocess.run(
        [PARAMCTL, "run", str(job), "--summary", str(summary),
         "--python_path", PACKAGE],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    (epoch,) = json.loads(summary.read_text())["epoch_metrics"]
    # The planted rule is learnable: both well above chance, and the two
    # within what different initial values give on 2,048 test samples.
    assert plain_auc > 0.75
    assert epoch["test_auc"] > 0.75, epoch
    assert abs(epoch["test_auc"] - plain_auc) < 0.03, (epoch, plain_auc)
    assert epoch["test_auc_error"] < 0.001
