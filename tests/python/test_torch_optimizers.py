"""pt.optimizer_section: a torch.optim optimizer (and scheduler) as the
job's optimizer section. Under sync the servers running it step exactly
as the torch optimizer does on the two ranks' averaged gradients; what the
servers cannot run the same way is refused naming it."""

import pytest
import torch

from conftest import job_yaml
from test_torch_worker import (batches, context, make_model,
                               torch_on_averaged_gradients, train_both)

import paramd.torch as pt
from paramd.torch import spec as pt_spec

STEPS = 6

# (name, optimizer factory, scheduler factory or None).
CASES = [
    ("sgd nesterov weight decay",
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                               weight_decay=0.01), None),
    ("adam", lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.001),
     None),
    ("adamw", lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05),
     None),
    ("rmsprop momentum",
     lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5),
     None),
    ("adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1), None),
    ("sgd with StepLR", lambda p: torch.optim.SGD(p, lr=0.2, momentum=0.9),
     lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)),
    ("adam with CosineAnnealingLR", lambda p: torch.optim.Adam(p, lr=0.01),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5,
                                                          eta_min=0.001)),
]


def with_optimizer(job_text, section):
    """The job's text with its optimizer section replaced by `section`."""
    head, rest = job_text.split("optimizer:\n", 1)
    return head + section + "policy:\n" + rest.split("policy:\n", 1)[1]


@pytest.mark.parametrize("name,make_opt,make_sched", CASES,
                         ids=[c[0] for c in CASES])
def test_the_servers_step_as_the_torch_optimizer(tmp_path, servers, name,
                                                 make_opt, make_sched):
    reference = make_model()
    ref_opt = make_opt(reference.parameters())
    sched = make_sched(ref_opt) if make_sched else None
    section = pt.optimizer_section(ref_opt, sched)
    pt_spec.write_tensors(make_model(), str(tmp_path / "model.tensors.yaml"))
    cluster = servers(with_optimizer(job_yaml("model.tensors.yaml"),
                                     section))
    models = [make_model(), make_model()]
    opts = [pt.DistributedOptimizer(m, context(cluster, r))
            for r, m in enumerate(models)]
    with torch.no_grad():
        for r, p in zip(reference.parameters(), models[0].parameters()):
            r.copy_(p)
    data = [batches(0, STEPS), batches(1, STEPS)]
    train_both(models, opts, data, [[], []])
    torch_on_averaged_gradients(reference, data, STEPS, ref_opt, sched)
    for (pname, ref), got in zip(reference.named_parameters(),
                                 models[0].parameters()):
        scale = ref.detach().abs().max().item()
        err = (got - ref).abs().max().item()
        assert err <= 1e-6 * scale, f"{name} {pname}: {err} against {scale}"


@pytest.mark.parametrize("make,named", [
    (lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True), "amsgrad"),
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
     "dampening"),
    (lambda p: torch.optim.RMSprop(p, lr=0.01, centered=True), "centered"),
    (lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01), "lr_decay"),
    (lambda p: torch.optim.Adamax(p, lr=0.01), "Adamax is not one"),
    (lambda p: torch.optim.SGD(
        [{"params": p[:1]}, {"params": p[1:], "lr": 0.01}], lr=0.1),
     "param_groups\\[1\\]'s lr 0.01"),
])
def test_what_the_servers_cannot_run_is_refused_naming_it(make, named):
    params = list(make_model().parameters())
    with pytest.raises(ValueError, match=named):
        pt.optimizer_section(make(params))


def test_a_scheduler_the_servers_cannot_run_is_refused():
    opt = torch.optim.SGD(make_model().parameters(), lr=0.1)
    with pytest.raises(ValueError, match="ExponentialLR is not one"):
        pt.optimizer_section(
            opt, torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9))
    step = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    # Stepped once an epoch of 10 steps: every 30 optimizer steps.
    assert "    step_size: 30\n" in pt.optimizer_section(opt, step, 10)
