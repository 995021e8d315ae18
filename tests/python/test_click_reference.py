"""tools/rows/click_reference.py's own parts: the click-log reader on the
files rows_bench writes, and the exact AUC against counting every pair."""

import importlib.util
import os

import numpy as np
import pytest

from conftest import ROOT

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
    labels, values = ref.read_log(str(path), 2)
    assert labels.tolist() == [1, 0]
    assert values.tolist() == [[10, 0xFFFFFFFF], [0x7B707075, 0]]


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
