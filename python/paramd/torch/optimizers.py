"""A torch.optim optimizer (and learning-rate scheduler) as the job file's
`optimizer` section, which the servers run: the hyperparameters are read
from the script's own optimizer instead of translated by hand.

    section = pt.optimizer_section(torch.optim.AdamW(model.parameters(),
                                                     lr=1e-3,
                                                     weight_decay=0.01))
    # "optimizer:\\n  type: adamw\\n  learning_rate: 0.001\\n ..."

What the servers cannot run the same way
is refused naming it (a ValueError): another optimizer class, an option
they do not have (amsgrad, dampening, centered, lr_decay, maximize, ...),
parameter groups with different settings (the servers run one optimizer
for the job), a scheduler other than StepLR and CosineAnnealingLR
(the latter equal to torch's for T_max + 1 steps: then the servers' rate
stays at eta_min where torch's rises again).
"""

import math

import torch

__all__ = ["optimizer_config", "optimizer_section"]

# Per torch class: the job file's type, and for each torch option that
# maps, its key (None: must keep torch's default, which is also the
# servers'). Options not listed must keep their defaults.
_TYPES = {
    torch.optim.SGD: ("sgd", {"momentum": "momentum",
                              "weight_decay": "weight_decay",
                              "nesterov": "nesterov"}),
    torch.optim.Adam: ("adam", {"betas": ("beta1", "beta2"), "eps": "eps",
                                "weight_decay": "weight_decay"}),
    torch.optim.AdamW: ("adamw", {"betas": ("beta1", "beta2"), "eps": "eps",
                                  "weight_decay": "weight_decay"}),
    torch.optim.RMSprop: ("rmsprop", {"alpha": "alpha", "eps": "eps",
                                      "momentum": "momentum",
                                      "weight_decay": "weight_decay"}),
    torch.optim.Adagrad: ("adagrad", {"eps": "eps",
                                      "weight_decay": "weight_decay"}),
}

# Options the servers do not have, and the value that means "off".
_OFF = {"amsgrad": False, "dampening": 0, "centered": False, "lr_decay": 0,
        "initial_accumulator_value": 0, "maximize": False}
# Options that change how torch computes, not what: any value is fine.
_HOW = {"foreach", "differentiable", "capturable", "fused"}


def optimizer_config(optimizer, scheduler=None, scheduler_every=1):
    """The `optimizer` section as a dict of the job file's keys.

    `scheduler_every`: optimizer steps per scheduler.step() call (1 when
    the script steps it every batch, the steps of an epoch when every
    epoch): the servers' schedules count optimizer steps."""
    kind = type(optimizer)
    if kind not in _TYPES:
        names = ", ".join(sorted(t.__name__ for t in _TYPES))
        raise ValueError(f"optimizer: {kind.__name__} is not one the servers "
                         f"run (they run {names})")
    name, keys = _TYPES[kind]
    groups = optimizer.param_groups
    first = {k: v for k, v in groups[0].items() if k != "params"}
    for i, group in enumerate(groups[1:], start=1):
        for key, value in first.items():
            if group.get(key) != value and key not in _HOW:
                raise ValueError(
                    f"optimizer: param_groups[{i}]'s {key} {group.get(key)!r} "
                    f"differs from group 0's {value!r} (the servers run one "
                    "optimizer for the job)")
    out = {"type": name, "learning_rate": float(first["lr"])}
    for key, value in first.items():
        if key in ("params", "lr", "initial_lr") or key in _HOW:
            continue
        if key in keys:
            to = keys[key]
            if isinstance(to, tuple):
                for k, v in zip(to, value):
                    out[k] = float(v)
            elif isinstance(value, bool):
                out[to] = value
            else:
                out[to] = float(value)
        elif key in _OFF:
            if value != _OFF[key]:
                raise ValueError(f"optimizer: {kind.__name__}'s {key}="
                                 f"{value!r} is not one the servers run "
                                 f"(they need {key}={_OFF[key]!r})")
        else:
            raise ValueError(f"optimizer: {kind.__name__}'s option {key} is "
                             "not one the servers know")
    if name == "sgd" and out.get("nesterov") is False:
        del out["nesterov"]
    if scheduler is not None:
        out["schedule"] = _schedule(scheduler, scheduler_every)
    return out


def _schedule(scheduler, every):
    if every < 1:
        raise ValueError("scheduler_every: optimizer steps per scheduler "
                         "step, at least 1")
    kind = type(scheduler)
    if kind is torch.optim.lr_scheduler.StepLR:
        return {"type": "step", "step_size": scheduler.step_size * every,
                "gamma": float(scheduler.gamma)}
    if kind is torch.optim.lr_scheduler.CosineAnnealingLR:
        if every != 1:
            raise ValueError("scheduler: CosineAnnealingLR maps only when "
                             "stepped every optimizer step (scheduler_every "
                             "1): the servers' cosine is smooth")
        # torch's rate reaches eta_min after T_max steps, at the step
        # numbered T_max + 1 (the servers count steps from 1); past it
        # torch's rises again and the servers' stays at min_lr.
        return {"type": "cosine", "total_steps": int(scheduler.T_max) + 1,
                "min_lr": float(scheduler.eta_min)}
    raise ValueError(f"scheduler: {kind.__name__} is not one the servers run "
                     "(they run StepLR and CosineAnnealingLR)")


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "nan"
    return str(v)


def optimizer_section(optimizer, scheduler=None, scheduler_every=1):
    """optimizer_config as the job file's YAML text."""
    config = optimizer_config(optimizer, scheduler, scheduler_every)
    lines = ["optimizer:"]
    for key, value in config.items():
        if isinstance(value, dict):
            lines.append(f"  {key}:")
            lines += [f"    {k}: {_value(v)}" for k, v in value.items()]
        else:
            lines.append(f"  {key}: {_value(value)}")
    return "\n".join(lines) + "\n"
