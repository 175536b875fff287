"""Schedules to try for one generated candidate module: DEFAULT_CONFIG,
structured points, random samples of CONFIG_SPACE, and streamed split-K
points (see each function). Plain Python; bench/gpu/run.py samples with it."""

import hashlib
import math
import pathlib
import random
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from efir.tune import whole_rows  # noqa: E402  (plain Python, no torch)


MAX_BLOCK = 256  # sampled BLOCK_* values at most this (or a domain's smallest)
MAX_TILE = 2**17  # a kernel's product of BLOCK_* values at most this
WARPS = (2, 4, 8)
STAGES = (2, 3, 4, 5)  # Triton takes any positive num_stages, beyond the space's list too


def kernel_blocks(text, keys):
    """The BLOCK_* keys that each @triton.jit kernel of a module's source uses
    in its body (every kernel takes all of them as parameters); one set of all
    keys where the source cannot be read so."""
    keys = set(keys)
    sets = []
    for chunk in re.split(r"@triton\.jit\s*\n", text)[1:]:
        sig = re.search(r"\)\s*(?:->[^:\n]*)?:[ \t]*\n", chunk)  # end of the def line(s)
        body = chunk[sig.end():] if sig else chunk
        body = re.split(r"\n(?=\S)", body, maxsplit=1)[0]  # up to the next top-level line
        used = {"BLOCK_" + m for m in re.findall(r"\bBLOCK_(\w+)", body)} & keys
        if used:
            sets.append(frozenset(used))
    return sets or [frozenset(keys)]


def tile_size(cfg, kernels):
    """The largest product of BLOCK_* values over the kernels."""
    return max(math.prod(int(cfg[k]) for k in ks if k in cfg) for ks in kernels) if kernels else 1


def sample_configs(default, space, seed, n, kernels=None):
    """Up to n schedules: DEFAULT_CONFIG first, then structured points, then
    random samples (deterministic in `seed`) of CONFIG_SPACE with BLOCK_*
    values <= MAX_BLOCK, num_warps in WARPS (those of the space), num_stages
    in STAGES; a random sample whose kernel tiles (the product of the BLOCK_*
    values each kernel uses, see kernel_blocks; of all BLOCK_* keys where
    kernels is None) exceed MAX_TILE elements is left out. The structured
    points: the whole-row schedules (efir.tune.whole_rows), the default with
    num_stages 3 and 4, with num_warps 8 and 2 (the
    default's blocks, kept whatever their tiles), and every BLOCK_* at
    min(its largest value <= MAX_BLOCK, cap) for caps 128, 64, 32 with
    num_warps 8 and num_stages 3 (left out like a sample past MAX_TILE)."""
    default = dict(default)
    if kernels is None:
        kernels = [frozenset(k for k in space if k.startswith("BLOCK_"))]
    dom = {}
    for k, v in space.items():
        if k.startswith("BLOCK_"):
            vs = sorted({int(x) for x in v})
            dom[k] = [x for x in vs if x <= MAX_BLOCK] or vs[:1]
    wspace = space.get("num_warps")
    wdom = [w for w in WARPS if wspace is None or w in wspace] or [default.get("num_warps", 4)]
    sdom = list(STAGES)
    others = {k: list(v) for k, v in space.items() if not k.startswith("BLOCK_") and k not in ("num_warps", "num_stages")}
    out, seen = [], set()

    def add(c, check=True):
        if len(out) >= n:
            return
        key = tuple(sorted(c.items()))
        if key in seen or (check and tile_size(c, kernels) > MAX_TILE):
            return
        seen.add(key)
        out.append(c)

    add(default, check=False)
    for c in whole_rows(default, space):
        add(c, check=False)
    for s in (3, 4):
        add({**default, "num_stages": s}, check=False)
    if 8 in wdom:
        add({**default, "num_warps": 8}, check=False)
    if 2 in wdom:
        # attn_decode B=16 c0 at its default blocks: 247 us at 2 warps,
        # 470-478 us at 4 (s21, s24 runs).
        add({**default, "num_warps": 2}, check=False)
    for cap in (128, 64, 32):
        c = dict(default)
        for k, v in dom.items():
            top = min(max(v), cap)
            c[k] = max((x for x in v if x <= top), default=v[0])
        c["num_warps"] = 8 if 8 in wdom else max(wdom)
        c["num_stages"] = 3
        add(c)
    rng = random.Random(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big"))
    tries = 0
    while len(out) < n and tries < 200 * max(n, 1):
        tries += 1
        c = dict(default)
        for k, v in dom.items():
            c[k] = rng.choice(v)
        for k, v in others.items():
            c[k] = rng.choice(v)
        c["num_warps"] = rng.choice(wdom)
        c["num_stages"] = rng.choice(sdom)
        add(c)
    return out


SUB_RE = re.compile(r'SUB_(\w+)=min\(cfg\.get\("(BLOCK_\w+__k\d+)"')


def streamed_split_k(default, space, text):
    """Structured points for split-K programs that stream their tile of the
    collected axis in sub-blocks (`SUB_<axis>`, emitted by efir-translate):
    tiles of 512 and 1024 in sub-blocks of 64, with every dim whose blocks
    are 1 or 16 (a row or a few, padded for tl.dot) at 16 and at its
    default. (Random samples stay under MAX_BLOCK and would not reach them.)"""
    subs = SUB_RE.findall(text or "")
    out = []
    for tile in (1024, 512):
        for pad in (True, False):
            c = dict(default)
            ok = False
            for axis, key in subs:
                blk = f"BLOCK_{axis}"
                if tile in space.get(blk, []) and 64 in space.get(key, []):
                    c[blk], c[key] = tile, 64
                    ok = True
            if not ok:
                continue
            if pad:
                for k, v in space.items():
                    if k.startswith("BLOCK_") and sorted(v) == [1, 16]:
                        c[k] = 16
            c["num_stages"] = 3
            if c not in out:
                out.append(c)
    return out


def configs(mod, n=24, seed=""):
    """The schedules of one loaded candidate module (see sample_configs and
    streamed_split_k)."""
    text = None
    try:
        text = pathlib.Path(mod.__file__).read_text()
        kernels = kernel_blocks(text, [k for k in mod.CONFIG_SPACE if k.startswith("BLOCK_")])
    except (OSError, TypeError, AttributeError):
        kernels = None
    out = sample_configs(mod.DEFAULT_CONFIG, mod.CONFIG_SPACE, seed or mod.__name__, n, kernels)
    extra = [c for c in streamed_split_k(mod.DEFAULT_CONFIG, mod.CONFIG_SPACE, text) if c not in out]
    if extra and n > 1:
        keep = max(1, n - len(extra))
        out = out[:keep] + extra[: n - keep]
    return out


def schedule(cfg, space=None):
    """A compact schedule: `k4096=64 n4096=32 w4 s3` (BLOCK_* keys whose space
    has one value left out)."""
    parts = []
    for k, v in cfg.items():
        if k.startswith("BLOCK_") and (space is None or len(space.get(k, (0, 0))) > 1):
            parts.append(f"{k[6:]}={v}")
    parts.append(f"w{cfg.get('num_warps', '?')}")
    parts.append(f"s{cfg.get('num_stages', '?')}")
    return " ".join(parts)
