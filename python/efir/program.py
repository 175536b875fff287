"""The PyTorch side of `efir.compile`: what it accepts (`check_arguments`,
`check_dtypes`), a function as a module (`as_module`), the export
(`export`) and the program's arguments from a call's inputs (`Args`)."""

import collections.abc
import operator

import torch

from .importer import DTYPES
from .stages import CompileError


def accepted():
    return ", ".join(str(d).removeprefix("torch.") for d in DTYPES)


def check_arguments(inputs, config):
    """`compile`'s arguments that would otherwise fail only when the
    compiled function is called: every example input a tensor (else
    CompileError), `config` None or a dict of schedule parameters, names to
    positive integers (else TypeError or ValueError)."""
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise CompileError(f"import failed: example input {i} ({type(x).__name__}) is not a torch.Tensor: efir compiles functions of tensors (bind other arguments first, e.g. with functools.partial)")
    if config is None:
        return
    if not isinstance(config, collections.abc.Mapping):
        raise TypeError(f"config must be a dict of schedule parameters such as {{'num_warps': 4}}, got a {type(config).__name__}")
    for k, v in config.items():
        if not isinstance(k, str):
            raise TypeError(f"config keys are schedule parameter names (str), got {k!r}")
        try:
            ok = not isinstance(v, bool) and operator.index(v) >= 1
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"config[{k!r}] must be a positive integer, got {v!r}")


def check_dtypes(module, inputs):
    """Refuse tensors of a dtype efir has no type for, naming it (before
    the export, which would take long for nothing)."""
    named = [(f"input {i}", x) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    named += [(f"parameter `{n}`", t) for n, t in module.named_parameters()]
    named += [(f"buffer `{n}`", t) for n, t in module.named_buffers()]
    for what, t in named:
        if t.dtype not in DTYPES:
            raise CompileError(f"import failed: {what} has dtype {t.dtype}, which efir does not support (accepted: {accepted()})")


def as_module(fn):
    """A torch.nn.Module calling function `fn`, whose forward takes `fn`'s
    positional parameters by name, so that the exported program (and the
    .efir) names its inputs as the user did (`%x`, not `%xs_0`); a function
    with `*args` or without a readable signature takes `*xs`."""
    import inspect
    import keyword

    try:
        ps = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        ps = None
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in ps or []]
    if ps and all(p.kind in plain and p.default is p.empty for p in ps) and all(n.isidentifier() and not keyword.iskeyword(n) and n not in ("self", "_fn") for n in names):
        # (names are identifiers, checked above: nothing else reaches the code)
        args = ", ".join(names)
        ns = {"_fn": fn}
        exec(f"def forward(self, {args}):\n    return _fn({args})\n", ns)  # noqa: S102
        forward = ns["forward"]
    else:

        def forward(self, *xs):
            return fn(*xs)

    return type("Function", (torch.nn.Module,), {"forward": forward})()


def export(module, inputs):
    """torch.export of `module` on `inputs`; its failures (of many kinds:
    unsupported Python, data-dependent control flow, an op that fails on
    the inputs) become CompileError, with the original as the cause."""
    try:
        return torch.export.export(module, tuple(inputs))
    except Exception as e:  # noqa: BLE001 (torch.export raises many types; reclassified, not hidden)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CompileError(f"export failed: {type(e).__name__}: {first}", diagnostic=str(e)) from e


def _state(ep):
    """The exported program's parameters, buffers and constants by name."""
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    return state


class Args:
    """The program's arguments from the user's inputs: parameters, buffers
    and constants in the program's argument order, then the user inputs.
    The state is moved to the inputs' device once per device (on its own
    device it is the module's own tensor, so in-place updates are seen);
    that device is the first one off the CPU, and 0-d or empty CPU inputs
    move to it (PyTorch mixes them with GPU tensors)."""

    def __init__(self, ep):
        state = _state(ep)
        self.order = [state[s.target] if s.target else None for s in ep.graph_signature.input_specs]
        self.n_user = sum(1 for t in self.order if t is None)
        self.on = {}

    def __call__(self, user):
        if len(user) != self.n_user:
            raise TypeError(f"the compiled program takes {self.n_user} inputs, got {len(user)}")
        tensors = [u for u in user if isinstance(u, torch.Tensor)]
        # the device of the first input off the CPU: a 0-d or empty CPU tensor
        # (a constant torch.export lifted, a scalar) mixes with GPU tensors in
        # PyTorch, so it moves to that device here rather than choosing it
        dev = next((u.device for u in tensors if u.device.type != "cpu"), tensors[0].device if tensors else None)
        user = [u.to(dev) if isinstance(u, torch.Tensor) and u.device != dev and (u.dim() == 0 or u.numel() == 0) else u for u in user]
        fixed = self.on.get(dev)
        if fixed is None:
            fixed = self.on[dev] = [t.to(dev) if isinstance(t, torch.Tensor) and dev is not None else t for t in self.order]
        it = iter(user)
        return [next(it) if t is None else t for t in fixed]
