"""Train a PyTorch nn.Module through paramd servers.

    import paramd.torch as pt
    ctx = pt.init(job="job.yaml")           # rank from PARAMD_RANK & co.
    opt = pt.DistributedOptimizer(model)     # pulls the servers' parameters
                                             # (rank 0's with
                                             # model.initial_values: rank0)
    for x, y in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step(loss=loss)                  # one PushPull: push, then pull
    opt.report_epoch(loss=..., correct=..., total=...)
    opt.finish()

The job file's optimizer runs on the servers (model.type tensors; its
tensor list is written from the model by `python3 -m paramd.torch.spec`).
A step pushes every gradient and writes the parameters the servers send
back straight into the module's parameters: they are views into one flat
float32 buffer that the native client reads and fills in place (CPU
tensors), or staged through a pinned host buffer (CUDA tensors). The
module's floating-point buffers (batch norm's running mean and variance)
live on the servers too, as statistic tensors: a step pushes the change
the forward passes made to each, the servers add those changes (their
mean under sync), and the pull brings the result back, so every rank
evaluates with the same statistics under sync and checkpoints carry
them. The policy (sync, async, ssp), clocks, retries and exactly-once
pushes are the servers' and the client's, as for paramd-worker.
"""

import time

import numpy as np
import torch

from .context import RANK_VARIABLES, Context, _current, init  # noqa: F401
from .optimizers import optimizer_config, optimizer_section  # noqa: F401
from .sampler import DistributedSampler  # noqa: F401

def _numbers(values, what):
    """A tensor (any device) or array-like as a 1-D NumPy array."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().reshape(-1).numpy()
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as e:
        raise ValueError(f"report_epoch: {what}: {e}") from None
    if array.ndim != 1:
        raise ValueError(f"report_epoch: {what}: expected one value per "
                         f"test sample, got shape {array.shape}")
    return array


__all__ = [
    "init",
    "Context",
    "DistributedOptimizer",
    "DistributedSampler",
    "declaration",
    "optimizer_config",
    "optimizer_section",
    "EmbeddingBag",
    "broadcast_parameters",
    "declared_tensors",
]

def _trained(model):
    """The (name, parameter) pairs the servers train, in order: every
    parameter that requires a gradient, as named_parameters gives them."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def _statistics(model):
    """The (name, buffer) pairs the servers keep as statistics, in order:
    every floating-point buffer, as named_buffers gives them (batch norm's
    running_mean and running_var; its integer num_batches_tracked stays
    with the rank, counting the rank's own steps)."""
    return [(n, b) for n, b in model.named_buffers()
            if b is not None and torch.is_floating_point(b)]


def _held(model):
    """Every tensor the servers hold for `model`, in the job's order: the
    trained parameters, then the statistics."""
    return _trained(model) + _statistics(model)


def _sum_rows(ids, grads, dim):
    """Row gradients summed per id: (sorted distinct ids, their sums)."""
    unique, inverse = torch.unique(ids, sorted=True, return_inverse=True)
    summed = torch.zeros(unique.numel(), dim)
    summed.index_add_(0, inverse, grads)
    return unique, summed


def broadcast_parameters(model, context=None):
    """Makes rank 0's values of `model` the servers' initial state; every
    rank's DistributedOptimizer then starts from them (the servers hold
    pulls until they have them). Needs model.initial_values: rank0 in the
    job file. On other ranks it does nothing; DistributedOptimizer calls it
    on rank 0 when the script did not. A server that has values already (a
    restarted rank 0) keeps them."""
    ctx = _current(context)
    if ctx.worker.tensors_declared and ctx.worker.total == 0:
        raise RuntimeError("the job's workers declare the model: create the "
                           "DistributedOptimizer, which declares it and "
                           "broadcasts rank 0's values")
    if not ctx.worker.initial_values_from_rank0:
        raise ValueError("model.initial_values: the job's servers draw the "
                         "initial values; set model.initial_values: rank0 "
                         "for rank 0's to become them")
    ctx.worker.check_tensors(declared_tensors(model))
    if ctx.rank != 0:
        return
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1).float().cpu()
                          for _, p in _held(model)]).contiguous()
    ctx.worker.send_initial_values(flat.numpy())
    ctx.sent_initial_values = True


def declared_tensors(model):
    """The (name, shape, kind) of each tensor the servers hold, in order:
    every parameter that requires a gradient, as named_parameters gives
    them ("trainable"), then every floating-point buffer, as named_buffers
    gives them ("statistic")."""
    return ([(name, tuple(p.shape), "trainable")
             for name, p in _trained(model)] +
            [(name, tuple(b.shape), "statistic")
             for name, b in _statistics(model)])


class EmbeddingBag(torch.nn.Module):
    """torch.nn.EmbeddingBag whose rows live on the servers: the table
    `table` (model.embeddings, by name or index) of the job, held row by
    row across every server. forward(input, offsets=None) takes what
    torch.nn.EmbeddingBag takes (a 2-D batch of bags, or 1-D ids with
    offsets), pulls only the rows the batch uses, and pools them by `mode`
    ("mean" or "sum"). The DistributedOptimizer pushes those rows'
    gradients with the step; the table's own optimizer
    (model.embeddings[i].optimizer) applies them on the servers."""

    def __init__(self, table, mode="mean", context=None):
        super().__init__()
        ctx = _current(context)
        if mode not in ("mean", "sum"):
            raise ValueError(f"mode: expected mean or sum, got '{mode}'")
        tables = ctx.worker.tables
        names = [t[0] for t in tables]
        if isinstance(table, str):
            if table not in names:
                raise ValueError(f"table: '{table}' is not in the job's "
                                 f"model.embeddings ({', '.join(names) or 'none'})")
            table = names.index(table)
        if not 0 <= table < len(tables):
            raise ValueError(f"table: {table} is not in the job's "
                             f"{len(tables)} model.embeddings")
        self.table = table
        self.name, self.num_embeddings, self.embedding_dim = tables[table]
        self.mode = mode
        self._worker = ctx.worker
        self._pulled = []  # (ids, rows leaf) of each forward since the step.

    def forward(self, input, offsets=None):
        ids = input.reshape(-1) if input.dim() == 2 else input
        if ids.numel() and (int(ids.min()) < 0 or
                            int(ids.max()) >= self.num_embeddings):
            raise ValueError(f"ids of table '{self.name}' must be in "
                             f"[0, {self.num_embeddings})")
        unique, inverse = torch.unique(ids, sorted=True, return_inverse=True)
        rows = torch.empty(unique.numel(), self.embedding_dim,
                           dtype=torch.float32)
        self._worker.pull_rows(self.table,
                               unique.to(torch.int64).numpy().astype("uint64"),
                               rows.numpy())
        if self.training and torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._pulled.append((unique, rows))
        local = inverse.reshape(input.shape) if input.dim() == 2 else inverse
        return torch.nn.functional.embedding_bag(local, rows, offsets,
                                                 mode=self.mode)

    def _take_gradients(self):
        """(ids, grads) pairs of the rows each forward since the last step
        used and that got a gradient; the optimizer sums them per row."""
        pulled, self._pulled = self._pulled, []
        return [(u, r.grad) for u, r in pulled if r.grad is not None]


def declaration(model, optimizer=None, scheduler=None, scheduler_every=1):
    """The YAML a worker declares its model with (a job file without a
    tensor list, or without an optimizer section): the model's tensors as
    the spec tool lists them and, given `optimizer`, the optimizer section
    optimizer_section makes of it (and of `scheduler`)."""
    from .spec import format_tensors, tensor_entries
    text = format_tensors(tensor_entries(model))
    if optimizer is not None:
        text += optimizer_section(optimizer, scheduler, scheduler_every)
    return text


def _declare_or_check(worker, model, optimizer, scheduler, scheduler_every):
    """Declares the model (and the optimizer) where the job leaves them to
    its workers; else checks the model against the job's tensor list."""
    if worker.optimizer_declared and optimizer is None:
        raise ValueError("optimizer: the job file has no optimizer section: "
                         "pass the script's torch.optim optimizer, "
                         "DistributedOptimizer(model, optimizer)")
    if optimizer is not None and not worker.optimizer_declared:
        raise ValueError("optimizer: the servers run the job file's "
                         "optimizer section; leave that section out of the "
                         "job file to run this torch optimizer instead")
    if worker.tensors_declared or worker.optimizer_declared:
        worker.declare(declaration(model, optimizer, scheduler,
                                   scheduler_every))
    else:
        worker.check_tensors(declared_tensors(model))


class DistributedOptimizer(torch.optim.Optimizer):
    """Steps `model` through paramd servers, which run the optimizer.

    `optimizer`: the script's torch.optim optimizer (and `scheduler`, its
    learning-rate scheduler, stepped every `scheduler_every` steps), for a
    job file without an optimizer section: its type and hyperparameters
    become the servers' (optimizer_config; what they cannot run is
    refused naming it). With an optimizer section, leave it out: the
    section's optimizer runs.

    Creating it declares the model to the servers (a job file without a
    tensor list: the first worker's declaration is the job's, and every
    later worker's must be the same) or checks the model against the
    job's tensors (the first that differs is named), registers with every
    server and loads the servers' parameters and statistics into the
    model. Then each step() pushes the gradients of this rank's batch, and
    the change its forward passes made to each buffer, and pulls the
    parameters and statistics of the next clock into the module.
    """

    def __init__(self, model, optimizer=None, context=None, scheduler=None,
                 scheduler_every=1):
        if isinstance(optimizer, Context):  # (model, context), as before.
            optimizer, context = None, optimizer
        ctx = _current(context)
        self._worker = ctx.worker
        named = _trained(model)
        for name, p in _held(model):
            if p.dtype != torch.float32:
                raise ValueError(f"tensor '{name}': paramd holds float32 "
                                 f"tensors, this one is {p.dtype}")
        _declare_or_check(self._worker, model, optimizer, scheduler,
                          scheduler_every)
        super().__init__([p for _, p in named], {})
        self._named = named
        self._stats = _statistics(model)
        total = self._worker.total
        device = named[0][1].device
        self._cuda = device.type == "cuda"
        # The buffers the native client reads and writes in place.
        pin = self._cuda
        self._flat_params = torch.zeros(total, dtype=torch.float32,
                                        pin_memory=pin)
        self._flat_grads = torch.zeros(total, dtype=torch.float32,
                                       pin_memory=pin)
        self._params_np = self._flat_params.numpy()
        self._grads_np = self._flat_grads.numpy()
        self._slices = []
        offset = 0
        for _, p in named:
            n = p.numel()
            self._slices.append((offset, n))
            offset += n
        # The statistics follow the parameters: [offset, total) of the flat
        # buffers, and the values last pulled, against which a step's
        # change is taken.
        self._stat_begin = offset
        self._stat_slices = []
        for _, b in self._stats:
            self._stat_slices.append((offset, b.numel()))
            offset += b.numel()
        if (self._worker.initial_values_from_rank0 and ctx.rank == 0
                and not ctx.sent_initial_values):
            broadcast_parameters(model, ctx)
        self._worker.start(self._params_np)
        with torch.no_grad():
            for (_, p), (off, n) in zip(named, self._slices):
                if self._cuda:
                    p.copy_(self._flat_params[off:off + n].view_as(p),
                            non_blocking=False)
                else:
                    # The parameter becomes a view of the flat buffer, its
                    # gradient one of the flat gradient buffer.
                    p.data = self._flat_params[off:off + n].view_as(p)
                    p.grad = self._flat_grads[off:off + n].view_as(p)
            for (_, b), (off, n) in zip(self._stats, self._stat_slices):
                if self._cuda:
                    b.copy_(self._flat_params[off:off + n].view_as(b))
                else:  # The buffer becomes a view of the flat buffer.
                    b.data = self._flat_params[off:off + n].view_as(b)
        self._pulled_stats = self._flat_params[self._stat_begin:].clone()
        self._bags = [m for m in model.modules() if isinstance(m, EmbeddingBag)]
        self._loss = 0.0
        self._steps_since_report = 0
        self._loss_sum, self._losses = 0.0, 0  # Step losses since a report.
        self._epoch = 0
        # Steps in an epoch and epochs in the job, when known (a
        # DistributedSampler over this optimizer sets them): report_epoch
        # then numbers epochs by the clock, and epochs() counts them.
        self.steps_per_epoch = None
        self.total_epochs = None
        self._since = time.monotonic()
        self._finished = False

    @property
    def clock(self):
        """The rank's clock: the number of steps the servers accepted."""
        return self._worker.clock

    def epochs(self):
        """The epochs (0-based) left to train, from the one the clock is in
        to the job's last: `for epoch in opt.epochs():` around a pass over
        a per_epoch DistributedSampler resumes where a restarted worker
        left off, and ends with the job (training.epochs)."""
        if not self.steps_per_epoch:
            raise RuntimeError("epochs(): make a DistributedSampler over "
                               "this optimizer first")
        return range(min(self.clock // self.steps_per_epoch,
                         self.total_epochs), self.total_epochs)

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients (kept as views of the flat buffer on CPU;
        set_to_none is accepted and treated as zeroing)."""
        self._flat_grads.zero_()
        if not self._cuda:
            for (_, p), (off, n) in zip(self._named, self._slices):
                view = self._flat_grads[off:off + n]
                if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                    p.grad = view.view_as(p)

    def _gather_grads(self):
        for (_, p), (off, n) in zip(self._named, self._slices):
            view = self._flat_grads[off:off + n]
            if p.grad is None:
                view.zero_()
            elif self._cuda or p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad.detach().reshape(-1))
        # A statistic's push is its change since the pull.
        if self._cuda:
            for (_, b), (off, n) in zip(self._stats, self._stat_slices):
                self._flat_params[off:off + n].copy_(b.detach().reshape(-1))
        torch.sub(self._flat_params[self._stat_begin:], self._pulled_stats,
                  out=self._flat_grads[self._stat_begin:])

    def _set_row_gradients(self):
        """Each table's row gradients of this step (from every EmbeddingBag
        of the model that reads it), summed per row, ride with the push."""
        by_table = {}
        for bag in self._bags:
            parts = by_table.setdefault(bag.table, (bag.embedding_dim, []))[1]
            parts.extend(bag._take_gradients())
        for table, (dim, parts) in by_table.items():
            if parts:
                ids, grads = _sum_rows(torch.cat([p[0] for p in parts]),
                                       torch.cat([p[1] for p in parts]), dim)
            else:  # No row this step: clear the last step's.
                ids, grads = torch.empty(0, dtype=torch.int64), torch.empty(0)
            self._worker.set_row_gradients(
                table, ids.to(torch.int64).numpy().astype("uint64"),
                grads.contiguous().reshape(-1).numpy())

    @torch.no_grad()
    def step(self, closure=None, loss=None):
        """Pushes this rank's gradients and pulls the next parameters into
        the model. `loss` (a tensor or float: the batch's mean loss) is
        what status shows; a closure's return value serves as well.
        Returns the closure's loss, as torch optimizers do."""
        result = None
        if closure is not None:
            with torch.enable_grad():
                result = closure()
            if loss is None:
                loss = result
        if loss is not None:
            self._loss = float(loss)
            self._loss_sum += self._loss
            self._losses += 1
        self._gather_grads()
        self._set_row_gradients()
        self._worker.step(self._grads_np, self._loss, self._params_np)
        self._pulled_stats.copy_(self._flat_params[self._stat_begin:])
        if self._cuda:
            for (_, p), (off, n) in zip(self._named + self._stats,
                                        self._slices + self._stat_slices):
                p.copy_(self._flat_params[off:off + n].view_as(p))
        self._steps_since_report += 1
        return result

    def report_epoch(self, loss=None, correct=None, total=None, samples=None,
                     seconds=None, epoch=None, scores=None, labels=None):
        """Reports a finished epoch: its mean training `loss` and this
        rank's test result (`correct` of `total`). A binary classifier
        (a click model) passes instead `scores`, each test sample's
        predicted probability of class 1, and its `labels` (0 or 1):
        correct and total come from them (p > 1/2 predicts 1), and the
        servers give the job's AUC and log loss over every rank's share
        (docs/sparse-tables.md, "Evaluation"). `loss` defaults to the
        mean of the losses step() was given since the last report,
        `samples` to the steps since then × the job's batch size,
        `seconds` to the time since then, and `epoch` (1-based) to the
        epoch the clock just ended when steps_per_epoch is known (a
        DistributedSampler sets it: a restarted worker then reports the
        epoch it is in), else to one more than the last report's.
        paramctl status and the run's summary show the job's figures."""
        if (scores is None) != (labels is None):
            raise ValueError("report_epoch: pass scores= and labels= "
                             "together")
        if scores is not None:
            if correct is not None or total is not None:
                raise ValueError("report_epoch: pass correct= and total=, "
                                 "or scores= and labels=, not both")
            scores = _numbers(scores, "scores").astype(np.float64)
            labels = _numbers(labels, "labels")
            if not np.isin(labels, (0, 1)).all():
                raise ValueError("report_epoch: labels: every label must be "
                                 "0 or 1")
            labels = labels.astype(np.int64)
            correct, total = 0, len(scores)
        elif correct is None or total is None:
            raise ValueError("report_epoch: pass correct= and total= (this "
                             "rank's test result), or a binary "
                             "classifier's scores= and labels=")
        if loss is None:
            if self._losses == 0:
                raise ValueError("report_epoch: no step was given a loss "
                                 "since the last report: pass loss=")
            loss = self._loss_sum / self._losses
        if epoch is None and self.steps_per_epoch:
            epoch = -(-self.clock // self.steps_per_epoch)  # ceil
        # Kept only once the report is taken: a refused one numbers nothing.
        epoch = self._epoch + 1 if epoch is None else int(epoch)
        now = time.monotonic()
        if samples is None:
            samples = self._steps_since_report * self._worker.batch_size
        if seconds is None:
            seconds = now - self._since
        self._worker.report_epoch(epoch, float(loss) * samples, int(samples),
                                  float(seconds), int(correct), int(total),
                                  scores, labels)
        self._epoch = epoch
        self._steps_since_report = 0
        self._loss_sum, self._losses = 0.0, 0
        self._since = now

    def finish(self):
        """Tells the servers this rank is done (a sync round no longer
        waits for it)."""
        if not self._finished:
            self._finished = True
            self._worker.finish()
