"""pt.DistributedSampler: a rank's share, batch by batch from the
optimizer's clock — disjoint shares of equal size, the same batch for the
same clock (so a restarted worker resumes where the servers are), epochs
that end where the clock says."""

import types

import numpy as np
import pytest

import paramd.torch as pt


class Clock:
    """An optimizer as the sampler sees it: its clock, moved by step()."""

    def __init__(self, clock=0):
        self.clock = clock

    def step(self):
        self.clock += 1

    # The optimizer's epoch count, from the clock the sampler set it up for.
    epochs = pt.DistributedOptimizer.epochs


def context(rank, workers=3, batch_size=4, epochs=2, shuffle=True, seed=5):
    return types.SimpleNamespace(rank=rank, workers=workers, seed=seed,
                                 batch_size=batch_size, epochs=epochs,
                                 data={"shuffle": shuffle})


def run(sampler, opt):
    """Every batch the sampler hands out, stepping after each."""
    batches = []
    for idx in sampler:
        batches.append(idx.tolist())
        opt.step()
    return batches


def test_shares_are_disjoint_equal_and_cover_whole_batches():
    length = 101  # 33 a rank (the last two samples go to nobody): 8 steps
    epochs = {}
    for rank in range(3):
        opt = Clock()
        sampler = pt.DistributedSampler(length, opt, context(rank))
        assert sampler.steps_per_epoch == 8 and sampler.total_steps == 16
        batches = run(sampler, opt)
        assert len(batches) == 16 and opt.clock == 16
        for b in batches:
            assert len(b) == 4 and b == sorted(b)
            assert all(i % 3 == rank for i in b)  # every workers-th sample
        first = [i for b in batches[:8] for i in b]
        assert len(set(first)) == 32  # an epoch repeats no sample
        epochs[rank] = set(first)
    assert not (epochs[0] & epochs[1] or epochs[0] & epochs[2] or
                epochs[1] & epochs[2])


def test_a_restart_resumes_at_the_clock_with_the_same_batches():
    opt = Clock()
    straight = run(pt.DistributedSampler(64, opt, context(1)), opt)
    resumed_opt = Clock(clock=5)  # the servers' clock of a restarted rank
    resumed = run(pt.DistributedSampler(64, resumed_opt, context(1)),
                  resumed_opt)
    assert len(straight) == 10
    assert resumed == straight[5:]


def test_shuffle_orders_each_epoch_by_the_seed():
    def batches(**kw):
        opt = Clock()
        return run(pt.DistributedSampler(48, opt, context(0, **kw)), opt)
    shuffled = batches()
    assert shuffled == batches()              # a function of the seed
    assert shuffled != batches(seed=6)
    assert shuffled[:4] != shuffled[4:]       # epochs differ in order
    plain = batches(shuffle=False)
    assert plain[:4] == plain[4:]
    assert plain[0] == [0, 3, 6, 9]


def test_the_example_loop_gets_the_batches_it_computed_itself():
    # examples/pytorch/train.py dealt its batches this way before it used
    # the sampler; the runs it reported stay the same.
    length, workers, batch, seed = 1000, 2, 64, 42
    for rank in range(workers):
        share = length // workers
        mine = np.arange(rank, length, workers)[:share]
        steps = share // batch
        opt = Clock()
        sampler = pt.DistributedSampler(
            length, opt, context(rank, workers, batch, 3, True, seed))
        got = run(sampler, opt)
        for clock, idx in enumerate(got):
            epoch, step = divmod(clock, steps)
            order = np.random.default_rng([seed, epoch, rank]).permutation(
                mine)
            assert idx == np.sort(order[step * batch:(step + 1) * batch]
                                  ).tolist()


def test_epoch_ended_and_len_follow_the_clock():
    opt = Clock()
    sampler = pt.DistributedSampler(24, opt, context(0, batch_size=4))
    assert sampler.steps_per_epoch == 2 and len(sampler) == 4
    ended = []
    for _ in sampler:
        assert not sampler.epoch_ended  # before the step is taken
        opt.step()
        ended.append((sampler.epoch_ended, sampler.epoch))
    assert ended == [(False, 0), (True, 1), (False, 1), (True, 2)]
    assert len(sampler) == 0


def test_per_epoch_passes_under_epochs_resume_and_end_with_the_job():
    opt = Clock()
    whole = run(pt.DistributedSampler(24, opt, context(1)), opt)
    # 8 samples a rank, batches of 4: 2 steps an epoch, 2 epochs.
    opt = Clock()
    sampler = pt.DistributedSampler(24, opt, context(1), per_epoch=True)
    passes = [(epoch, run(sampler, opt)) for epoch in opt.epochs()]
    assert [epoch for epoch, _ in passes] == [0, 1]
    assert [b for _, batches in passes for b in batches] == whole
    assert list(opt.epochs()) == [] and run(sampler, opt) == []
    # A rank restarted at clock 3 (inside epoch 1) takes its last batch.
    opt = Clock(3)
    sampler = pt.DistributedSampler(24, opt, context(1), per_epoch=True)
    assert list(opt.epochs()) == [1] and len(sampler) == 1
    assert run(sampler, opt) == whole[3:]


def test_epochs_needs_a_sampler_first():
    with pytest.raises(RuntimeError, match="make a DistributedSampler"):
        pt.DistributedOptimizer.epochs(
            types.SimpleNamespace(clock=0, steps_per_epoch=None))


def test_a_dataset_too_small_for_one_batch_a_rank_is_refused():
    with pytest.raises(ValueError, match="cannot give each of 3 rank"):
        pt.DistributedSampler(11, Clock(), context(0))
