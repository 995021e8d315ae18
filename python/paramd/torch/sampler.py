"""DistributedSampler: a rank's share of a dataset, batch by batch, driven
by the servers' clock, so that a restarted worker resumes at the step the
servers are at (and a retried step gets the same batch).

    sampler = pt.DistributedSampler(len(dataset), opt)
    for idx in sampler:                   # this rank's batch of opt.clock
        x, y = dataset[idx]
        ...
        opt.step(loss=loss)
        if sampler.epoch_ended:           # the step just taken ended one
            opt.report_epoch(correct=..., total=...)  # loss: the steps' mean

The share is every workers-th sample from the rank's own index, the same
count on every rank (len // workers, so every rank takes as many steps);
an epoch is share // batch_size steps of whole batches; under
training.shuffle each epoch visits the share in the order of a generator
seeded by (job seed, epoch, rank), a function of the clock alone.
"""

import numpy as np

__all__ = ["DistributedSampler"]


class DistributedSampler:
    def __init__(self, length, optimizer, context=None, batch_size=None,
                 shuffle=None, epochs=None):
        """`length` samples; `optimizer` is the rank's DistributedOptimizer
        (its `clock` drives the batches); `context` the rank's Context
        (default: the one init() made). batch_size, shuffle and epochs
        default to the job's training section."""
        if context is None:
            from . import _context as context
            if context is None:
                raise RuntimeError(
                    "DistributedSampler: call paramd.torch.init() first")
        self._optimizer = optimizer
        self.rank = context.rank
        self.workers = context.workers
        self.seed = context.seed
        self.batch_size = batch_size or context.batch_size
        self.shuffle = (context.data["shuffle"] if shuffle is None
                        else shuffle)
        self.epochs = epochs or context.epochs
        if length < self.workers * self.batch_size:
            raise ValueError(
                f"DistributedSampler: {length} samples cannot give each of "
                f"{self.workers} rank(s) one batch of {self.batch_size}")
        self.share = length // self.workers
        self._mine = np.arange(self.rank, length, self.workers)[:self.share]
        self.steps_per_epoch = self.share // self.batch_size
        self.total_steps = self.steps_per_epoch * self.epochs
        self._order_epoch, self._order = -1, None
        # The optimizer's report_epoch numbers epochs by its clock.
        optimizer.steps_per_epoch = self.steps_per_epoch
        self._yielded = None  # The clock of the last batch handed out.

    def batch(self, clock):
        """The indices (ascending) of this rank's batch at `clock`."""
        epoch, step = divmod(clock, self.steps_per_epoch)
        if epoch != self._order_epoch:
            rng = np.random.default_rng([self.seed, epoch, self.rank])
            self._order = (rng.permutation(self._mine) if self.shuffle
                           else self._mine)
            self._order_epoch = epoch
        begin = step * self.batch_size
        return np.sort(self._order[begin:begin + self.batch_size])

    @property
    def epoch(self):
        """The epoch (0-based) of the optimizer's clock."""
        return self._optimizer.clock // self.steps_per_epoch

    @property
    def epoch_ended(self):
        """Whether the step taken since the last batch ended an epoch."""
        clock = self._optimizer.clock
        return (self._yielded is not None and clock == self._yielded + 1
                and clock % self.steps_per_epoch == 0)

    def __len__(self):
        return max(0, self.total_steps - self._optimizer.clock)

    def __iter__(self):
        while self._optimizer.clock < self.total_steps:
            self._yielded = self._optimizer.clock
            yield self.batch(self._yielded)
