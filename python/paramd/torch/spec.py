"""Writes a model's tensor list for a model.type tensors job.

    python3 -m paramd.torch.spec examples/pytorch/model.py:Net -o model.tensors.yaml

MODEL is FILE.py:FACTORY or MODULE:FACTORY, a callable returning the
nn.Module (called with no arguments, after torch.manual_seed(--seed)).
The job file then says `model: {type: tensors, tensors_file:
model.tensors.yaml}`. Each tensor's initialiser describes the module's own
initial values: `constant` when they are all equal (batch norm's ones and
zeros), else `uniform` in ±(the largest magnitude), which is PyTorch's
default for linear and convolution layers (uniform in ±1/sqrt(fan_in)).
The servers draw the initial state from it. The module's floating-point
buffers (batch norm's running statistics) follow the parameters, marked
`kind: statistic`.
"""

import argparse
import importlib
import importlib.util
import os
import sys

import torch

from . import declared_tensors


def load_factory(target):
    """FILE.py:NAME or MODULE:NAME → the callable."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"model: expected FILE.py:FACTORY or MODULE:FACTORY, "
                         f"got '{target}'")
    if where.endswith(".py"):
        path = os.path.abspath(where)
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(
            os.path.splitext(os.path.basename(path))[0], path)
        if spec is None:
            raise ValueError(f"model: cannot load '{where}'")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValueError(f"model: '{where}' has no callable '{name}'")
    return factory


def tensor_entries(model):
    """One dict per tensor the servers hold: name, shape, its initialiser
    and, for a buffer, kind statistic."""
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    entries = []
    for name, shape, kind in declared_tensors(model):
        values = tensors[name].detach().reshape(-1).float()
        entry = {"name": name, "shape": list(shape)}
        if kind == "statistic":
            entry["kind"] = kind
        first = values[0].item() if values.numel() else 0.0
        if values.numel() == 0 or bool((values == first).all()):
            entry["init"] = "constant"
            entry["value"] = first
        else:
            entry["init"] = "uniform"
            entry["bound"] = float(f"{values.abs().max().item():.6g}")
        entries.append(entry)
    return entries


def format_tensors(entries, source=""):
    """The tensors file's YAML text."""
    lines = [f"# The tensors of {source or 'a PyTorch model'}, written by "
             "python3 -m paramd.torch.spec.", "tensors:"]
    for e in entries:
        shape = ", ".join(str(d) for d in e["shape"])
        init = (f"init: constant, value: {e['value']!r}" if e["init"] == "constant"
                else f"init: uniform, bound: {e['bound']!r}")
        kind = f", kind: {e['kind']}" if "kind" in e else ""
        lines.append(f"  - {{name: {e['name']}, shape: [{shape}], {init}{kind}}}")
    return "\n".join(lines) + "\n"


def write_tensors(model, path, source=""):
    """Writes `model`'s tensors file to `path`."""
    text = format_tensors(tensor_entries(model), source)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m paramd.torch.spec",
        description="Writes the tensors file of a PyTorch model for a "
                    "model.type tensors job.")
    parser.add_argument("model", help="FILE.py:FACTORY or MODULE:FACTORY")
    parser.add_argument("-o", "--output", help="the file (default: stdout)")
    parser.add_argument("--seed", type=int, default=0,
                        help="torch.manual_seed before the factory (default 0)")
    args = parser.parse_args(argv)
    try:
        factory = load_factory(args.model)
    except (ValueError, ImportError, OSError) as e:
        parser.error(str(e))
    torch.manual_seed(args.seed)
    model = factory()
    if not isinstance(model, torch.nn.Module):
        parser.error(f"model: '{args.model}' returned {type(model).__name__}, "
                     "not an nn.Module")
    if not declared_tensors(model):
        parser.error(f"model: '{args.model}' has no parameter that requires "
                     "a gradient")
    if args.output:
        write_tensors(model, args.output, args.model)
    else:
        sys.stdout.write(format_tensors(tensor_entries(model), args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
