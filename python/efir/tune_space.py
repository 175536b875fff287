"""The schedule space the tuner (`efir.tune`) searches: the moves and
samples it draws from a module's CONFIG_SPACE (`neighbours`, `samples`,
`whole_rows`), and which parameters belong to which kernel of a generated
module (`structure`, `groups`), so that a program of several kernels is
searched one group of parameters at a time. Plain Python (no torch): the
GPU scripts in bench/gpu import it through `efir.tune` without a device.
"""

import re

MAX_BLOCK = 256  # sampled BLOCK_* values at most this
WARPS = (2, 4, 8)
REG_CAP = 128  # the registers a thread the register-cap move tries at 8 warps
STAGES = (2, 3, 4, 5)


def _warps_key(k):
    return k == "num_warps" or k.startswith("num_warps_")


def _stages_key(k):
    return k == "num_stages" or k.startswith("num_stages_")


def neighbours(cfg, space, keys=None):
    """Schedules one step from cfg: one BLOCK_* value doubled or halved
    (within its domain), and the same with num_warps doubled or halved with
    it (a tile twice as large for twice the warps: on the H200 attention
    prefill at B=16 ran query blocks of 128 at 4 warps in 603 us, of 64 at 4
    warps in 468 us, and a block-only move never reaches 128 at 8 warps), a
    num_warps or num_stages value (the program's, or one kernel's
    `num_warps_*`/`num_stages_*`) changed by one step, and at 8 warps the
    registers capped at REG_CAP (`maxnreg`, `maxnreg_k<i>`; not in
    CONFIG_SPACE) or the cap lifted. `keys`, if given: only those
    parameters move (the cap with its warps)."""
    out = []
    # num_warps moving with a block: 0 (no joint move) where it cannot.
    wspace = space.get("num_warps") or ()
    warps = int(cfg["num_warps"]) if wspace and "num_warps" in cfg and (keys is None or "num_warps" in keys) else 0
    for k, v in space.items():
        if keys is not None and k not in keys:
            continue
        if k.startswith("BLOCK_"):
            vs = sorted({int(x) for x in v})
            if len(vs) < 2 or k not in cfg:
                continue
            b = int(cfg[k])
            for x, w in ((b * 2, warps * 2), (b // 2, warps // 2)):
                if x in vs:
                    out.append({**cfg, k: x})
                    if w in WARPS and w in wspace:
                        out.append({**cfg, k: x, "num_warps": w})
        elif _warps_key(k):
            w = int(cfg.get(k, 4))
            for x in (w * 2, w // 2):
                if x in WARPS and x in v:
                    out.append({**cfg, k: x})
            # At 8 warps, registers capped at 128 a thread (two programs an
            # SM; `maxnreg`, `maxnreg_k<i>` of the generated module), or the
            # cap lifted: Llama's prefill gate projection, 173 registers,
            # ran 156.7 us uncapped and 140.5 capped on the H100.
            if w == 8:
                cap = "maxnreg" + k[len("num_warps"):]
                if cap in cfg:
                    out.append({c: x for c, x in cfg.items() if c != cap})
                else:
                    out.append({**cfg, cap: REG_CAP})
        elif _stages_key(k):
            st = int(cfg.get(k, 2))
            for x in (st + 1, st - 1):
                if x in STAGES and x in v:
                    out.append({**cfg, k: x})
        elif k == "pdl":
            # programmatic dependent launch of a program of several launches, toggled
            out.extend({**cfg, k: x} for x in v if x != int(cfg.get(k, 0)))
    return out


WHOLE_ROW = 2048  # a BLOCK_* domain reaching past this holds whole rows


def whole_rows(default, space):
    """Structured schedules that random samples (BLOCK_* at most MAX_BLOCK)
    never reach: every BLOCK_* whose domain reaches past WHOLE_ROW (an axis
    of a row that a statistic reduces, efir-translate's domains stop matmul
    dims at 1024) and every statistics loops' block (`BLOCK_<axis>__r<i>`)
    at its largest value, the other blocks unchanged, at num_warps 8 and 4. On the H200, ngpt at B=1 (one kernel, two statistics
    over rows of 4096) measured 1.85 us so and 4.2 us at its default of loop
    blocks of 1024 over 32-wide column tiles. [] where no domain reaches."""
    big = {}
    for k, v in space.items():
        vs = sorted({int(x) for x in v})
        if k.startswith("BLOCK_") and vs and (vs[-1] > WHOLE_ROW or re.search(r"__r\d+$", k)):
            big[k] = vs[-1]
    if not big:
        return []
    out = []
    for w in (8, 4):
        if w in space.get("num_warps", (w,)):
            out.append({**default, **big, "num_warps": w})
    return out


# A kernel that streams its split of an axis in sub-blocks takes its
# sub-block from the configuration thus (efir-translate's run()).
_SUB = re.compile(r'SUB_\w+=min\(cfg\.get\("(BLOCK_(\w+?)__k\d+)"')


def split_k_start(default, space, src):
    """The schedule a split-K module of a few rows measured best at on the
    H100 (sessions 40-42: rmsnorm_mlp, lora, gated_mlp at B=1-16), which
    one-parameter moves and random samples rarely reach (four parameters
    at once): each split axis in blocks of 1024 streamed by sub-blocks of
    64, every row block of a dim of at most 16 (domain [1, 16]) at 16 (the
    tensor cores), 3 stages; the other parameters the default's. None where
    the module has no such kernel or its space lacks those values."""
    subs = set(_SUB.findall(src))
    if not subs:
        return None
    c = dict(default)
    for key, axis in sorted(subs):
        block = f"BLOCK_{axis}"
        if 1024 not in space.get(block, ()) or 64 not in space.get(key, ()):
            return None
        c[block] = 1024
        c[key] = 64
    for k, v in space.items():
        if k.startswith("BLOCK_") and sorted({int(x) for x in v}) == [1, 16]:
            c[k] = 16
    if 3 in space.get("num_stages", ()):
        c["num_stages"] = 3
    return None if _key(c) == _key(default) else c


def samples(default, space, n, rng, fixed=()):
    """The default schedule, the default at num_warps 2 and 8, the
    whole-row points (see `whole_rows`), then
    up to n distinct schedules in all with random ones of the space
    (BLOCK_* values at most MAX_BLOCK, or a domain's smallest); the
    parameters in `fixed` (those no kernel uses) keep their defaults."""
    out, seen = [dict(default)], {_key(default)}
    # The default's blocks at other warp counts (attn_decode B=16 c0 at its
    # default blocks: 247 us at 2 warps, 470-478 us at 4), then whole rows.
    warps = [{**default, "num_warps": w} for w in (2, 8) if w in space.get("num_warps", ()) and w != default.get("num_warps")]
    for c in warps + whole_rows(default, space):
        if len(out) < n and _key(c) not in seen and not any(k in fixed and c[k] != default.get(k) for k in c):
            seen.add(_key(c))
            out.append(c)
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        c = dict(default)
        for k, v in space.items():
            if k in fixed:
                continue
            vs = sorted({int(x) for x in v})
            if k.startswith("BLOCK_"):
                c[k] = rng.choice([x for x in vs if x <= MAX_BLOCK] or vs[:1])
            elif _warps_key(k):
                c[k] = rng.choice([x for x in vs if x in WARPS] or vs)
            elif _stages_key(k):
                c[k] = rng.choice([x for x in vs if x in STAGES] or vs)
            elif k == "pdl":
                c[k] = rng.choice(vs)
        if _key(c) not in seen:
            seen.add(_key(c))
            out.append(c)
    return out


_JIT = re.compile(r"^@triton\.jit[^\n]*\ndef (\w+)\(", re.M)
_LAUNCH = re.compile(r"^[ \t]+(\w+)\[\((.*),\)\]\((.*)\)[ \t]*$", re.M)
_EMPTY = re.compile(r"^[ \t]+\w+ = torch\.empty\(\((.*?)\), dtype=", re.M)


def structure(src, space):
    """How a generated module's schedule parameters map to its kernels:
    {"kernels": [(kernel, keys)], "shaping": keys, "inert": keys}. A
    kernel's keys are the BLOCK_* parameters its body uses (every kernel
    takes all of them), those of its launch grid, and the config entries
    its launch reads (num_warps, num_stages); `shaping` are the BLOCK_*
    parameters that shape a buffer (`torch.empty` in `run`: a buffer of
    partial results has one slot per tile of a split axis); `inert` are
    parameters that nothing uses."""
    bodies = {}
    ms = list(_JIT.finditer(src))
    for i, m in enumerate(ms):
        end = ms[i + 1].start() if i + 1 < len(ms) else len(src)
        chunk = src[m.end():end]
        sig = re.search(r"\)\s*(?:->[^:\n]*)?:[ \t]*\n", chunk)  # end of the def line
        body = chunk[sig.end():] if sig else chunk
        bodies[m.group(1)] = re.split(r"\n(?=\S)", body, maxsplit=1)[0]  # to the next top-level line

    def axis_keys(text, pattern):
        return {f"BLOCK_{a}" for a in re.findall(pattern, text)} & set(space)

    # Host variables read from the configuration before a launch (a
    # kernel's own block, `kb0_k = cfg.get("BLOCK_k__k0", block_k)`, or its
    # statistics loops', `rb0_k = cfg.get("BLOCK_k__r0", block_k)`).
    local = dict(re.findall(r"^\s*(\w+) = cfg\.get\(\"(\w+)\"", src, re.M))
    # A launch group's members are launched over grids named before it
    # (`pg0_1 = nt_k * nt_n`).
    grids = dict(re.findall(r"^\s*(pg\d+_\d+) = (.*)$", src, re.M))
    kernels = []
    for m in _LAUNCH.finditer(src):
        name, grid, args = m.groups()
        grid = grids.get(grid.strip(), grid)
        # (A launch group's kernel `_h<i>_<j>` runs kernels whose own
        # launches follow it in run(): they are counted there.)
        if name not in bodies or re.fullmatch(r"_h\d+(?:_\d+)+", name):
            continue
        keys = axis_keys(bodies[name], r"\b(?:BLOCK|NT|NTP|EVEN)_(\w+)")
        keys |= axis_keys(grid, r"\bnt_(\w+)")
        keys |= set(re.findall(r"cfg(?:\[|\.get\()\"(\w+)\"", args)) & set(space)
        keys |= {local[v] for v in re.findall(r"\b(\w+)\b", args) if v in local} & set(space)
        # `pdl` (programmatic dependent launch) chains every launch
        keys |= {"pdl"} & set(space)
        kernels.append((name, keys))
    shaping = set()
    for shape in _EMPTY.findall(src):
        shaping |= axis_keys(shape, r"\b(?:nt|ntp|block)_(\w+)")
    used = set().union(*(k for _, k in kernels)) if kernels else set(space)
    return {"kernels": kernels, "shaping": shaping, "inert": set(space) - used - shaping}


def groups(src, space):
    """The groups of parameters the search moves one at a time: for a
    program of several kernels, first the shared ones (those that shape a
    buffer between kernels, or that several kernels use: num_warps and
    num_stages unless the module has per-kernel ones), then each kernel's
    own; for one kernel, all its parameters. Returns (groups, inert)."""
    st = structure(src, space)
    ks = st["kernels"]
    if len(ks) < 2:
        live = [k for k in space if k not in st["inert"]]
        return ([live] if live else []), st["inert"]
    count = {}
    for _, keys in ks:
        for k in keys:
            count[k] = count.get(k, 0) + 1
    shared = [k for k in space if k in st["shaping"] or count.get(k, 0) > 1]
    out = [shared] if shared else []
    for _, keys in ks:
        own = [k for k in space if k in keys and k not in shared]
        if own:
            out.append(own)
    return out, st["inert"]


def _key(cfg):
    return tuple(sorted(cfg.items()))
