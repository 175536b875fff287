"""The adversarial campaign of issue 30, by concern (`campaign.py` is its
command line):

- `model`: `Case`, `Res`, the outcomes and tools;
- `programs`: the .efir texts (malformed, ill-typed, hostile, deep, wide,
  mutated);
- `cases_common`, `cases_opt`, `cases_translate`, `cases_run`,
  `cases_python`: the cases of each tool (`make_cases` makes them all, in
  a fixed order from one seeded generator, so a run is repeatable);
- `proc`: one command line under a timeout; `checks`: classifying its
  outcome and checking a success; `runner`: running the cases in parallel;
- `report`: the Markdown results file.
"""

from .cases_opt import cases_opt
from .cases_python import cases_python
from .cases_run import cases_run
from .cases_translate import cases_translate
from .model import TOOLS

MAKERS = {"efir-opt": cases_opt, "efir-translate": cases_translate, "efir-run": cases_run, "python": cases_python}


def make_cases(rng, only=None):
    """Every tool's cases, from `rng` (each tool's generator runs, in TOOLS
    order, whether or not it is selected, so that `only` does not change the
    others' cases); those of the tools in `only` (default all)."""
    cases = []
    for t in TOOLS:
        cs = MAKERS[t](rng)
        if not only or t in only:
            cases += cs
    return cases
