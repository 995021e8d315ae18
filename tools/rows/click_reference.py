#!/usr/bin/python3
"""The click-through reference: rows_bench's model in plain PyTorch, one
process, the whole table in memory.

Reads the click-log files rows_bench writes (`rows_bench --keep_dir`:
train.tsv, test.tsv — a label, then with --dense D that many counts in
decimal, then each field's value as 8 hex digits, tab-separated) and
trains what rows_bench's job file says, as paramd's sync
policy computes it: each field's value is a row of one embedding table
(dim 16, normal(0, init_scale) initial values, Adagrad), the rows side by
side (embedding_concat) followed by the counts as log(1 + c) (through a
bottom MLP with --bottom W1,W2: linear + ReLU layers, DLRM's), a dense
layer, ReLU, a dense layer of 2 and softmax cross-entropy; dense layers under Adam. paramd's sync round
averages its workers' gradients of their mean losses, so W workers of
batch B step as one process on batches of W x B consecutive lines: this
takes --batch as that global batch. Prints the progressive log loss (each
batch's loss before it is trained on, over the pass), the test log loss,
accuracy and exact AUC (ties counted half) — the figures rows_bench prints
for paramd on the same files.

With --paramd_job FILE it writes instead a job file that trains the same
model through paramd from PyTorch (2 servers x 2 workers, sync, batches
of --batch / 2 per rank): the table's rows on the servers as a
paramd.torch.EmbeddingBag, the dense layers' Adam taken from the script's
torch.optim.Adam, each rank evaluating its share of the test file and
reporting its scores, from which the servers give the job's AUC. paramctl
run FILE runs this script as each worker (with --paramd).

    /usr/bin/python3 tools/rows/click_reference.py DIR [--batch 2048]
    /usr/bin/python3 tools/rows/click_reference.py DIR --paramd_job J.yaml
    paramctl run J.yaml
"""

import argparse
import os
import sys
import time

import numpy as np
import torch


def read_log(path, fields, dense=0):
    """Labels [n] and the fields' values [n, fields] as int64, and the
    dense features [n, dense] as log(1 + max(c, 0)) in float32."""
    if dense > 0:
        return read_dense_log(path, fields, dense)
    raw = np.fromfile(path, dtype=np.uint8)
    width = 1 + 9 * fields + 1  # label, tab + 8 hex digits per field, \n
    if raw.size % width != 0 or raw.size == 0:
        raise SystemExit(f"{path}: not a click log of {fields} fields in "
                         f"fixed-width lines of {width} bytes")
    lines = raw.reshape(-1, width)
    if not (np.all(lines[:, -1] == ord("\n")) and
            np.all(lines[:, 1:-1:9] == ord("\t"))):
        raise SystemExit(f"{path}: a line is not label<TAB>8 hex digits x "
                         f"{fields}")
    labels = (lines[:, 0] - ord("0")).astype(np.int64)
    if labels.min() < 0 or labels.max() > 1:
        raise SystemExit(f"{path}: a label is not 0 or 1")
    digits = lines[:, 1:-1].reshape(-1, fields, 9)[:, :, 1:].astype(np.int64)
    if not np.all(((digits >= ord("0")) & (digits <= ord("9"))) |
                  ((digits >= ord("a")) & (digits <= ord("f")))):
        raise SystemExit(f"{path}: a value is not 8 lowercase hex digits "
                         f"(rows_bench's layout; other tokens are not read "
                         f"here)")
    nibbles = np.where(digits >= ord("a"), digits - ord("a") + 10,
                       digits - ord("0"))
    values = np.zeros(nibbles.shape[:2], dtype=np.int64)
    for k in range(8):
        values = values * 16 + nibbles[:, :, k]
    return labels, values, np.zeros((labels.size, 0), dtype=np.float32)


def read_dense_log(path, fields, dense):
    """read_log's lines with `dense` decimal counts after the label."""
    labels, counts, values = [], [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 1 + dense + fields:
                raise SystemExit(f"{path}:{number}: {len(cols) - 1} columns "
                                 f"after the label, not {dense} + {fields}")
            labels.append(int(cols[0]))
            counts.append([float(c) if c else 0.0 for c in cols[1:1 + dense]])
            values.append([int(v, 16) for v in cols[1 + dense:]])
    x = np.log1p(np.maximum(np.array(counts), 0.0)).astype(np.float32)
    return (np.array(labels, dtype=np.int64), np.array(values, dtype=np.int64),
            x)


def exact_auc(scores, labels):
    """Area under the ROC curve, ties counted half (mean ranks)."""
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(scores.size, dtype=np.float64)
    # Mean 1-based rank of each run of equal scores.
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], scores.size]
    run_rank = (starts + 1 + ends) / 2.0
    ranks[order] = np.repeat(run_rank, ends - starts)
    positives = labels.sum()
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    rank_sum = ranks[labels == 1].sum()
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


# The paramd job's table: ids hashed into 2^32 rows (as paramd-worker's
# click logs are), rows and optimizer as rows_bench's.
PARAMD_ROWS = 1 << 32


def paramd_job(args, path):
    """The job file that runs this script under paramctl run."""
    script = os.path.abspath(__file__)
    folder = os.path.abspath(args.dir)
    return f"""# The click-through reference through paramd from PyTorch (written by
# tools/rows/click_reference.py --paramd_job).
job: {{id: click-torch, seed: {args.seed}}}
cluster: {{servers: ["127.0.0.1:0", "127.0.0.1:0"], workers: 2}}
model:
  type: tensors
  embeddings:
    - name: clicks
      rows: {PARAMD_ROWS}
      dim: {args.dim}
      init: normal
      init_scale: {args.init_scale}
      optimizer: {{type: adagrad, learning_rate: {args.table_lr}}}
training: {{epochs: 1, batch_size: {args.batch // 2}, shuffle: false}}
policy: {{type: sync}}
liveness: {{lease_seconds: 60, heartbeat_seconds: 1}}
worker:
  command: ["/usr/bin/python3", "{script}", "{folder}", "--paramd",
            "--dim", "{args.dim}", "--hidden", "{args.hidden}",
            "--dense_lr", "{args.dense_lr}", "--fields", "{args.fields}",
            "--dense", "{args.dense}", "--bottom", "{args.bottom}",
            "--threads", "1"]
"""


def widths(text):
    """--bottom's widths: "64,16" → [64, 16]; "" → []."""
    return [int(w) for w in text.split(",") if w]


def row_ids(values):
    """(field, value) → a row of the paramd table: a 64-bit mix of both."""
    fields = np.arange(values.shape[1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = values.astype(np.uint64) | (fields << np.uint64(32))
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return torch.from_numpy((h % np.uint64(PARAMD_ROWS)).astype(np.int64))


class ClickModel(torch.nn.Module):
    """The fields' rows side by side, then the dense features (through
    the bottom MLP's linear + ReLU layers of widths `bottom`, if any), a
    dense layer, ReLU, 2 logits."""

    def __init__(self, table, fields, dim, hidden, dense=0, bottom=()):
        super().__init__()
        self.table = table
        layers, width = [], dense
        for out in bottom:
            layers += [torch.nn.Linear(width, out), torch.nn.ReLU()]
            width = out
        self.bottom = torch.nn.Sequential(*layers)
        self.dense = torch.nn.Sequential(
            torch.nn.Linear(fields * dim + width, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, 2))

    def forward(self, ids, x):
        n, fields = ids.shape
        if isinstance(self.table, torch.nn.Embedding):
            rows = self.table(ids)
        else:  # One id per bag: the rows themselves, in order.
            rows = self.table(ids.reshape(-1),
                              torch.arange(0, n * fields, dtype=torch.int64))
        return self.dense(torch.cat([rows.reshape(n, -1), self.bottom(x)], 1))

    def mlp_parameters(self):
        """The bottom and top MLPs' parameters: what Adam trains."""
        return list(self.bottom.parameters()) + list(self.dense.parameters())


def train_on_paramd(args):
    """One worker rank of the --paramd_job job."""
    import paramd.torch as pt

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    y_train, v_train, x_train = read_log(
        os.path.join(args.dir, "train.tsv"), args.fields, args.dense)
    y_test, v_test, x_test = read_log(
        os.path.join(args.dir, "test.tsv"), args.fields, args.dense)
    x_train, x_test = torch.from_numpy(x_train), torch.from_numpy(x_test)
    ctx = pt.init()  # The job and rank paramctl run gives.
    model = ClickModel(pt.EmbeddingBag("clicks", mode="sum"), args.fields,
                       args.dim, args.hidden, args.dense, widths(args.bottom))
    opt = pt.DistributedOptimizer(
        model, torch.optim.Adam(model.mlp_parameters(), lr=args.dense_lr,
                                eps=1e-8))
    ids_train, labels = row_ids(v_train), torch.from_numpy(y_train)
    for batch in pt.DistributedSampler(len(y_train), opt):
        batch = torch.as_tensor(batch, dtype=torch.int64)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            model(ids_train[batch], x_train[batch]), labels[batch])
        loss.backward()
        opt.step(loss=loss)
    # This rank's share of the test file, scored for the job's AUC.
    share = torch.arange(ctx.rank, len(y_test), ctx.workers)
    ids_test, x_share = row_ids(v_test)[share], x_test[share]
    with torch.no_grad():
        z = torch.cat([model(ids_test[at: at + 4096], x_share[at: at + 4096])
                       for at in range(0, len(share), 4096)])
    opt.report_epoch(scores=torch.softmax(z.double(), 1)[:, 1],
                     labels=torch.from_numpy(y_test)[share])
    opt.finish()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="rows_bench --keep_dir's folder")
    ap.add_argument("--fields", type=int, default=26)
    ap.add_argument("--dense", type=int, default=0,
                    help="count features before the fields (rows_bench --dense)")
    ap.add_argument("--bottom", default="",
                    help="the bottom MLP's widths, e.g. 64,16 (rows_bench "
                         "--bottom)")
    ap.add_argument("--batch", type=int, default=2048,
                    help="global batch: paramd's workers x batch_size")
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--init_scale", type=float, default=0.01)
    ap.add_argument("--table_lr", type=float, default=0.05)
    ap.add_argument("--dense_lr", type=float, default=0.001)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--paramd_job", metavar="FILE",
                    help="write the job file that trains through paramd")
    ap.add_argument("--paramd", action="store_true",
                    help="run as a worker of that job (paramctl run does)")
    args = ap.parse_args()
    if args.paramd_job:
        with open(args.paramd_job, "w") as f:
            f.write(paramd_job(args, args.paramd_job))
        print(f"wrote {args.paramd_job}: paramctl run {args.paramd_job}")
        return 0
    if args.paramd:
        return train_on_paramd(args)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    began = time.time()
    y_train, v_train, x_train = read_log(
        os.path.join(args.dir, "train.tsv"), args.fields, args.dense)
    y_test, v_test, x_test = read_log(
        os.path.join(args.dir, "test.tsv"), args.fields, args.dense)
    x_train, x_test = torch.from_numpy(x_train), torch.from_numpy(x_test)
    # One row per (field, value) in either file: a test value never trained
    # keeps its initial value, as an untouched row does on the servers.
    keys = np.concatenate([v_train, v_test]) | (
        np.arange(args.fields, dtype=np.int64) << 32)
    distinct, ids = np.unique(keys, return_inverse=True)
    ids = ids.reshape(keys.shape)
    ids_train = torch.from_numpy(ids[: len(y_train)])
    ids_test = torch.from_numpy(ids[len(y_train):])
    print(f"read {len(y_train)} training and {len(y_test)} test samples, "
          f"{distinct.size} distinct rows, in {time.time() - began:.1f} s",
          flush=True)

    table = torch.nn.Embedding(distinct.size, args.dim, sparse=True)
    torch.nn.init.normal_(table.weight, 0.0, args.init_scale)
    model = ClickModel(table, args.fields, args.dim, args.hidden, args.dense,
                       widths(args.bottom))
    table_opt = torch.optim.Adagrad(table.parameters(), lr=args.table_lr,
                                    eps=1e-10)
    dense_opt = torch.optim.Adam(model.mlp_parameters(), lr=args.dense_lr,
                                 eps=1e-8)
    logits = model

    labels = torch.from_numpy(y_train)
    loss_sum = 0.0
    began = time.time()
    for at in range(0, len(y_train), args.batch):
        batch = slice(at, at + args.batch)
        loss = torch.nn.functional.cross_entropy(
            logits(ids_train[batch], x_train[batch]), labels[batch])
        table_opt.zero_grad()
        dense_opt.zero_grad()
        loss.backward()
        table_opt.step()
        dense_opt.step()
        loss_sum += loss.item() * len(labels[batch])
    seconds = time.time() - began

    with torch.no_grad():
        z = torch.cat([logits(ids_test[at: at + 8192], x_test[at: at + 8192])
                       for at in range(0, len(y_test), 8192)])
    test_labels = torch.from_numpy(y_test)
    test_loss = torch.nn.functional.cross_entropy(z, test_labels).item()
    accuracy = (z.argmax(1) == test_labels).double().mean().item()
    p_click = torch.softmax(z.double(), 1)[:, 1].numpy()
    print(f"training: {len(y_train)} samples in {seconds:.1f} s "
          f"({len(y_train) / seconds:.0f} samples/s), batch {args.batch}")
    print(f"log loss (progressive, the whole pass): "
          f"{loss_sum / len(y_train):.4f}")
    print(f"test accuracy: {accuracy:.4f}")
    print(f"test AUC: {exact_auc(p_click, y_test):.4f} (exact); test log loss "
          f"{test_loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
