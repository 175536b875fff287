"""Candidates checked against eager PyTorch (issue 30). Every candidate is
equal to the source program in real arithmetic, not always in floating
point: a reformulation can overflow (exp(a - b) as exp(a) / exp(b)). So the
candidate that `efir.compile` chose without tuning is run once on the
example inputs (a family: on the first call's inputs at each size) against
eager PyTorch, and where it fails, the next by static estimate is tried
(`choose`), up to CHECK_TRIES candidates; which one was chosen and why goes
to the `efir` logger at INFO and into the compile's report."""

import logging

import torch

from .stages import CompileError

log = logging.getLogger("efir")

# Relative L2 error above which a candidate's outputs on the example inputs
# disagree with eager PyTorch's (f16 rounding of a reordered sum stays far
# below it; an overflow, a NaN or a wrong kernel far above).
CHECK_TOL = 5e-2
# Candidates tried, best static estimate first, before the compile fails.
CHECK_TRIES = 3


def _listed(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def compare(got, expected, program):
    """CompileError when candidate `program`'s outputs `got` disagree with
    eager PyTorch's `expected`: an output of another shape, one that is not
    finite where PyTorch's is, or one whose relative L2 error (over the
    elements where PyTorch's are finite) is over CHECK_TOL."""
    for i, (r, o) in enumerate(zip(_listed(expected), _listed(got))):
        if not isinstance(r, torch.Tensor) or not isinstance(o, torch.Tensor):
            continue
        r64 = r.detach().to("cpu", torch.float64)
        o64 = o.detach().to("cpu", torch.float64)
        if r64.shape != o64.shape:
            raise CompileError(f"candidate @{program} gives output {i} of shape {tuple(o64.shape)}, PyTorch {tuple(r64.shape)}")
        finite = torch.isfinite(r64)
        if bool((finite & ~torch.isfinite(o64)).any()):
            raise CompileError(f"candidate @{program} gives non-finite values in output {i} where PyTorch's are finite (a reformulation overflowed on the example inputs)")
        diff = torch.where(finite, o64 - r64, torch.zeros_like(r64))
        norm = float(torch.where(finite, r64, torch.zeros_like(r64)).norm())
        err = float(diff.norm()) / max(norm, 1e-30)
        if err > CHECK_TOL:
            raise CompileError(f"candidate @{program} disagrees with PyTorch on the example inputs: output {i} relative L2 error {err:.3g} > {CHECK_TOL}")


def check_outputs(mod, module, inputs, args, config, program):
    """Run generated module `mod` (candidate `program`) once on `inputs`
    (the program's arguments: `args(inputs)`) against eager `module`:
    CompileError as `compare` says."""
    with torch.no_grad():
        expected = module(*inputs)
        got = mod.run(*args(inputs), config=config)
    compare(got, expected, program)


def verifier(reference, inputs, args, config=None):
    """`verify(mod, program)` for `choose`: runs a candidate's module on
    `args(inputs)` against `reference(*inputs)` (eager PyTorch, run once,
    on first use). A candidate whose kernels fail to compile or run (a
    Triton error, resources past the device's) fails the check too."""
    expected = []

    def verify(mod, program):
        if not expected:
            with torch.no_grad():
                expected.append(reference(*inputs))
        try:
            with torch.no_grad():
                got = mod.run(*args(inputs), config=config)
        except Exception as e:  # noqa: BLE001 (generated code, Triton: many types; the reason is kept)
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise CompileError(f"candidate @{program} fails to run: {type(e).__name__}: {first}") from e
        compare(got, expected[0], program)

    return verify


class Choice:
    """What `choose` chose: `program`, `source` and loaded `module`, and
    the candidates `rejected` before it ((program, reason) pairs)."""

    def __init__(self, program, source, module, rejected):
        self.program, self.source, self.module, self.rejected = program, source, module, rejected

    def why(self):
        """Why this candidate, in one line."""
        if not self.rejected:
            return f"@{self.program}: the best static estimate"
        tried = ", ".join(f"@{p} ({r})" for p, r in self.rejected)
        return f"@{self.program}: the next by static estimate after {len(self.rejected)} that failed the check against PyTorch: {tried}"


def choose(programs, load, verify, tries=CHECK_TRIES, what=""):
    """The first of `programs` ((name, source) pairs, best static estimate
    first) whose module (`load(name, source)`) passes `verify(module,
    name)` (None: no check, the first), trying at most `tries`, as a
    `Choice`; logged at INFO (`what`: the compile, for the message).
    CompileError naming each candidate tried and why it failed when none
    passes."""
    rejected = []
    for name, source in programs[: max(1, tries)]:
        mod = load(name, source)
        if verify is not None:
            try:
                verify(mod, name)
            except CompileError as e:
                reason = str(e).splitlines()[0]
                log.info("%scandidate @%s failed the check against PyTorch: %s", what, name, reason)
                rejected.append((name, reason))
                continue
        choice = Choice(name, source, mod, rejected)
        log.info("%schose %s", what, choice.why())
        return choice
    tried = "; ".join(r for _, r in rejected)
    raise CompileError(f"no candidate agrees with PyTorch on the example inputs ({len(rejected)} tried, best static estimate first): {tried}")
