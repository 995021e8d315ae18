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

With per_epoch=True each iteration yields only the rest of the epoch the
clock is in, as a torch DataLoader's batch_sampler (one pass per epoch):

    loader = DataLoader(dataset, batch_sampler=pt.DistributedSampler(
        len(dataset), opt, per_epoch=True))
    for epoch in opt.epochs():            # the job's, from the clock's
        for x, y in loader:               # a restarted worker resumes here
            ...

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
                 shuffle=None, epochs=None, per_epoch=False):
        """`length` samples; `optimizer` is the rank's DistributedOptimizer
        (its `clock` drives the batches); `context` the rank's Context
        (default: the one init() made). batch_size, shuffle and epochs
        default to the job's training section. per_epoch: an iteration
        ends with the clock's epoch (else it runs to the job's end)."""
        if context is None:
            from . import _current
            context = _current()
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
        optimizer.total_epochs = self.epochs
        self._yielded = None  # The clock of the last batch handed out.
        self.per_epoch = per_epoch

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

    def _end(self):
        """The clock an iteration begun now ends at."""
        clock = self._optimizer.clock
        if not self.per_epoch:
            return self.total_steps
        return min(self.total_steps,
                   (clock // self.steps_per_epoch + 1) * self.steps_per_epoch)

    def __len__(self):
        return max(0, self._end() - self._optimizer.clock)

    def __iter__(self):
        if self.per_epoch:
            # By count from the clock, so that a DataLoader whose worker
            # processes fetch ahead gets the epoch's batches in order.
            for clock in range(self._optimizer.clock, self._end()):
                self._yielded = clock
                yield self.batch(clock)
            return
        while self._optimizer.clock < self.total_steps:
            self._yielded = self._optimizer.clock
            yield self.batch(self._yielded)
