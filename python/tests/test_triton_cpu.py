"""Generated Triton kernels, run with TRITON_INTERPRET=1 and torch on the CPU,
against the efir interpreter (relative L2 <= 1e-2, fresh seeded inputs).

Covers the candidates of every examples/small workload (the first CANDIDATES
of `--saturate --compact`), each under its default configuration and under
the largest legal block sizes, plus the hand-tiled examples and the
derivations. Needs torch and triton (`.ci/run` puts them in a cached venv);
without them the module is skipped unless EFIR_REQUIRE_TRITON=1.
"""

import os
import pathlib
import re

import pytest
import triton_harness as h

torch = h.interpreted_triton()

ROOT = h.ROOT
CANDIDATES = int(os.environ.get("EFIR_TRITON_CANDIDATES", "6"))
TOL = 1e-2
SMALL = sorted(p.stem for p in (ROOT / "examples" / "small").glob("*.efir"))


def largest(space):
    return {k: max(v) for k, v in space.items() if k.startswith("BLOCK_")}


def smallest(space):
    """The smallest legal blocks: the most tiles per loop and grid axis (a
    kernel that confuses two bindings of one axis can still be right when
    every loop has one tile)."""
    return {k: min(v) for k, v in space.items() if k.startswith("BLOCK_")}


def translate(src, out):
    r = h.sh(h.tool("efir-translate"), "--to-triton", str(src), "--output-dir", str(out), check=False)
    assert r.returncode == 0, r.stderr
    mods = []
    for py in sorted(pathlib.Path(out).glob("*.py")):
        mod = h.load_module(py)
        mods.append((py, mod, mod.__doc__.split("`@")[1].split("`")[0]))
    return mods


@pytest.mark.parametrize("workload", SMALL)
def test_candidates_match_interpreter(workload, tmp_path):
    src = ROOT / "examples" / "small" / f"{workload}.efir"
    cand = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(src), "--saturate", f"--compact=max-candidates={CANDIDATES}", "-o", str(cand))
    mods = translate(cand, tmp_path / "py")
    # CANDIDATES of them, or every class where there are fewer (ngpt has 4).
    assert 4 <= len(mods) <= CANDIDATES
    for py, mod, fname in mods:
        for config in (None, largest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, cand, fname, tmp_path / f"ref_{fname}", config=config)
            assert max(errs) <= TOL, (fname, config, errs)


HAND = sorted((ROOT / "examples" / "tiled").glob("*.efir")) + sorted((ROOT / "examples" / "derivations").glob("*.efir"))


@pytest.mark.parametrize("src", HAND, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_hand_tiled_and_derived_programs(src, tmp_path):
    mods = translate(src, tmp_path / "py")
    assert mods
    for py, mod, fname in mods:
        for config in (None, largest(mod.CONFIG_SPACE), smallest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, src, fname, tmp_path / f"ref_{fname}", config=config)
            assert max(errs) <= TOL, (fname, config, errs)


def test_a_wrong_kernel_is_caught(tmp_path):
    """The comparison can fail: a module whose kernel is edited to compute
    something else is reported."""
    src = ROOT / "examples" / "tiled" / "attn_decode.efir"
    (py, mod, fname), = translate(src, tmp_path / "py")
    # The softmax's final division (by the normalizer) gets 1 added.
    text = re.sub(r"= (\w+) / (\w+)\n", r"= \1 / (\2 + 1.0)\n", py.read_text(), count=1)
    assert text != py.read_text()
    bad = tmp_path / "bad.py"
    bad.write_text(text)
    errs = h.check_module(bad, src, fname, tmp_path / "ref")
    assert max(errs) > TOL


def test_inputs_are_checked(tmp_path):
    src = ROOT / "examples" / "tiled" / "attn_decode.efir"
    (py, mod, fname), = translate(src, tmp_path / "py")
    with pytest.raises(ValueError, match="expected"):
        mod.run(torch.zeros(1), torch.zeros(1), torch.zeros(1))
    with pytest.raises(TypeError):
        mod.run()


def block_configs(space):
    """Small mixed block sizes: query tiles longer, shorter and equal to key
    tiles, so that causal loops stop at, before and inside the diagonal."""
    def pick(k, n):
        legal = sorted(space[k])
        fits = [x for x in legal if x <= n]
        return fits[-1] if fits else legal[0]

    out = []
    for rows, cols in ((8, 4), (4, 8), (4, 4)):
        cfg = {}
        for k in space:
            if not k.startswith("BLOCK_"):
                continue
            cfg[k] = pick(k, cols if k.startswith(("BLOCK_k", "BLOCK_n")) else rows)
        out.append(cfg)
    return out


def test_causal_loops_stop_at_the_diagonal(tmp_path):
    """Causal prefill: loops over key tiles stop after the last tile a query
    tile can see (`range(0, hi)`), and the result still matches the
    interpreter for block shapes on either side of the diagonal."""
    src = ROOT / "examples" / "small" / "attn_prefill.efir"
    cand = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(src), "--saturate", "--compact=max-candidates=40", "-o", str(cand))
    mods = translate(cand, tmp_path / "py")
    def stops(text):
        # `range(0, hi)`, or split into the tiles below the diagonal and
        # the diagonal ones: `range(0, lo)` then `range(lo, hi)`.
        return "in range(0, hi" in text or re.search(r"in range\(lo\d+, hi\d+\)", text) is not None

    clipped = [(py, mod, f) for py, mod, f in mods if stops(py.read_text())]
    assert len(clipped) >= 3, [py.name for py, _, _ in mods]
    # The online-softmax derivation (M2): the running max, normalizer and
    # weighted sum in one loop, which stops at the diagonal too.
    m2 = ROOT / "examples" / "derivations" / "attn_prefill.efir"
    (py2, mod2, f2), = translate(m2, tmp_path / "m2")
    text2 = py2.read_text()
    assert re.search(r"in range\(0, lo\d+\)", text2) and re.search(r"in range\(lo\d+, hi\d+\)", text2)
    assert "tl.full([1, 1], 1, tl.int1)" in text2  # the mask below the diagonal
    for py, mod, fname, src in [(py, mod, f, cand) for py, mod, f in clipped[:4]] + [(py2, mod2, f2, m2)]:
        for config in block_configs(mod.CONFIG_SPACE):
            errs = h.check_module(py, src, fname, tmp_path / f"ref_{fname}", config=config)
            assert max(errs) <= TOL, (fname, config, errs)


def smallest(space):
    return {k: min(v) for k, v in space.items() if k.startswith("BLOCK_")}


def test_slice_and_concat_candidates_match_interpreter(tmp_path):
    """Slices and concatenations are masked loads at shifted offsets: the
    candidates of a rotary embedding + log-softmax program, under the
    default, largest and smallest blocks."""
    src = ROOT / "crates" / "registry" / "tests" / "seeds" / "slices.efir"
    cand = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(src), "--saturate", f"--compact=max-candidates={CANDIDATES}", "-o", str(cand))
    mods = translate(cand, tmp_path / "py")
    assert len(mods) == CANDIDATES
    for py, mod, fname in mods:
        assert "tl.where(" in py.read_text()
        for config in (None, largest(mod.CONFIG_SPACE), smallest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, cand, fname, tmp_path / f"ref_{fname}", config=config)
            assert max(errs) <= TOL, (fname, config, errs)


def test_strided_and_composed_slices(tmp_path):
    """Slices of slices (composed offsets and steps) and a concatenation of
    a stored value with a slice of a parameter; the file's third program is
    E0801 and skipped."""
    src = ROOT / "lit-tests" / "Translate" / "triton-slice.efir"
    out = tmp_path / "py"
    r = h.sh(h.tool("efir-translate"), "--to-triton", str(src), "--skip-unsupported", "--output-dir", str(out), check=False)
    assert r.returncode == 0 and "E0801" in r.stderr, r.stderr
    mods = sorted(out.glob("*.py"))
    assert [p.stem for p in mods] == ["rot", "strided"]
    for py in mods:
        mod = h.load_module(py)
        for config in (None, largest(mod.CONFIG_SPACE), smallest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, src, py.stem, tmp_path / f"ref_{py.stem}", config=config)
            assert max(errs) <= TOL, (py.stem, config, errs)


ODD = """// gated MLP at extents that most blocks do not divide (N = 48, K = 40, M = 3)
func @odd(%x: tensor<3x40xf16>, %w1: tensor<40x48xf16>, %w2: tensor<40x48xf16>) -> tensor<3x48xf16> {
  %g = tensor.matmul %x, %w1 : tensor<3x48xf16>
  %u = tensor.matmul %x, %w2 : tensor<3x48xf16>
  %gs = ew.sigmoid %g : tensor<3x48xf16>
  %silu = ew.mul %g, %gs : tensor<3x48xf16>
  %y = ew.mul %silu, %u : tensor<3x48xf16>
  return %y : tensor<3x48xf16>
}
"""


def test_blocks_that_do_not_divide_their_extents(tmp_path):
    """Masks only where a block may not divide its extent: a constexpr
    `EVEN_<axis>` picks the unmasked path where it does. Every candidate is
    right under blocks that divide (16 of 48, 1 of 3) and blocks that do not
    (32 and 64 of 48, 2 and 4 of 3), and the kernels accumulate matmul tiles
    in fp32 (`tl.dot(a, b, acc)`)."""
    src = tmp_path / "odd.efir"
    src.write_text(ODD)
    cand = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(src), "--saturate", "--compact=max-candidates=6", "-o", str(cand))
    mods = translate(cand, tmp_path / "py")
    assert len(mods) >= 4
    texts = [py.read_text() for py, _, _ in mods]
    assert any("if EVEN_" in t for t in texts)
    assert any(re.search(r"(acc\d+) = tl\.dot\(\w+, \w+, \1\)", t) for t in texts)
    seen_even = set()
    for py, mod, fname in mods:
        space = mod.CONFIG_SPACE
        configs = [None]
        for pick in (min, max, lambda d: sorted(d)[len(d) // 2]):
            configs.append({k: pick(v) for k, v in space.items() if k.startswith("BLOCK_")})
        for config in configs:
            cfg = dict(mod.DEFAULT_CONFIG, **(config or {}))
            if "BLOCK_n48" in cfg:
                seen_even.add(48 % cfg["BLOCK_n48"] == 0)
            errs = h.check_module(py, cand, fname, tmp_path / f"ref_{fname}", config=config)
            assert max(errs) <= TOL, (fname, config, errs)
    assert seen_even == {True, False}


def test_a_hostile_file_name_stays_in_the_docstring(tmp_path):
    """The input's path is escaped in the module's docstring: a name that
    closes the docstring and starts a statement, or holds a backslash, is
    text, and the module imports and runs."""
    name = 'a"""\nraise SystemExit("injected")\n"""\\b\u2028.efir'
    src = tmp_path / name
    src.write_text((ROOT / "examples" / "tiled" / "attn_decode.efir").read_text())
    (py, mod, fname), = translate(src, tmp_path / "py")
    assert 'raise SystemExit("injected")' not in py.read_text()
    assert 'a\\"\\"\\"\\x0araise SystemExit(\\"injected\\")' in py.read_text()
    assert "a\"\"\"\nraise SystemExit(\"injected\")\n\"\"\"\\b\u2028.efir" in mod.__doc__
    errs = h.check_module(py, src, fname, tmp_path / "ref")
    assert max(errs) <= TOL


def test_names_that_differ_only_in_punctuation_stay_apart(tmp_path):
    """Value names that differ only in `.`, `$` or `_` (`%l.weight` and
    `%l_weight`, `%a$1` and `%a_1`) become distinct Python identifiers: the
    kernel takes both parameters and computes the program's result."""
    src = tmp_path / "coll.efir"
    src.write_text(
        "func @coll(%l.weight: tensor<4x8xf32>, %l_weight: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
        "  %a$1 = ew.add %l.weight, %l_weight : tensor<4x8xf32>\n"
        "  %a_1 = ew.mul %a$1, %l_weight : tensor<4x8xf32>\n"
        "  %a__1 = ew.sub %a_1, %a$1 : tensor<4x8xf32>\n"
        "  return %a__1 : tensor<4x8xf32>\n"
        "}\n"
    )
    (py, mod, fname), = translate(src, tmp_path / "py")
    import ast

    tree = ast.parse(py.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            names = [a.arg for a in node.args.args]
            assert len(names) == len(set(names)), (node.name, names)
    errs = h.check_module(py, src, fname, tmp_path / "ref")
    assert max(errs) <= TOL


def test_split_and_merge_reshapes_of_buffers(tmp_path):
    """Reshapes that split or merge dims of a buffer, through transposes,
    are loads at computed offsets: equal to the interpreter under the
    default, largest and smallest blocks (masks where blocks overhang)."""
    src = ROOT / "lit-tests" / "Translate" / "triton-views.efir"
    out = tmp_path / "py"
    h.sh(h.tool("efir-translate"), "--to-triton", str(src), "--output-dir", str(out))
    mods = sorted(out.glob("*.py"))
    assert [p.stem for p in mods] == ["flat", "heads", "merge"]
    for py in mods:
        mod = h.load_module(py)
        for config in (None, largest(mod.CONFIG_SPACE), smallest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, src, py.stem, tmp_path / f"ref_{py.stem}", config=config)
            assert max(errs) <= TOL, (py.stem, config, errs)


def test_slices_through_reshapes_and_transposes(tmp_path):
    """Slices and concatenations that read a buffer through a splitting or
    merging reshape and a transpose (the rotary half-rotation of a head
    split, strided rows of a transposed matmul result, halves of merged
    heads, heads of a split into 3 joined after a transpose) compose the
    index arithmetic instead of storing the view: two kernels each, equal
    to the interpreter under the default, largest and smallest blocks."""
    src = ROOT / "lit-tests" / "Translate" / "triton-slice-views.efir"
    out = tmp_path / "py"
    h.sh(h.tool("efir-translate"), "--to-triton", str(src), "--output-dir", str(out))
    mods = sorted(out.glob("*.py"))
    assert [p.stem for p in mods] == ["merge", "rot", "split3", "tr"]
    for py in mods:
        mod = h.load_module(py)
        assert mod.ESTIMATE["kernels"] == 2, (py.stem, mod.ESTIMATE)
        for config in (None, largest(mod.CONFIG_SPACE), smallest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, src, py.stem, tmp_path / f"ref_{py.stem}", config=config)
            assert max(errs) <= TOL, (py.stem, config, errs)


ROW_VARIANTS = {
    # One row (B=1): the row's unit dim may be padded to a 16-row dot block,
    # and the statistics reshaped around it (a reshape of a tiled unit dim
    # was E0801 here).
    "layernorm_gemm": [("tensor<2x", "tensor<1x"), ("tensor<2xf", "tensor<1xf")],
    "gated_mlp": [("tensor<2x", "tensor<1x"), ("tensor<2xf", "tensor<1xf")],
    # Rows of 512 and 3 rows: both row statistics computed inside the kernel
    # that applies them (one whole-row block per program, a fused plan).
    "ngpt": [("2x64", "3x512"), ("64.0", "512.0"), ("tensor<2xf", "tensor<3xf"), ("tensor<2x1x", "tensor<3x1x")],
}


@pytest.mark.parametrize("workload", sorted(ROW_VARIANTS))
def test_row_variants_match_interpreter(workload, tmp_path):
    """Small workloads at other row counts and widths than examples/small."""
    text = (ROOT / "examples" / "small" / f"{workload}.efir").read_text()
    for a, b in ROW_VARIANTS[workload]:
        text = text.replace(a, b)
    src = tmp_path / f"{workload}_rows.efir"
    src.write_text(text)
    cand = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(src), "--saturate", "--compact=max-candidates=4", "-o", str(cand))
    mods = translate(cand, tmp_path / "py")
    assert len(mods) >= 3
    for py, mod, fname in mods:
        for config in (None, largest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, cand, fname, tmp_path / f"ref_{fname}", config=config)
            assert max(errs) <= TOL, (fname, config, errs)


def test_bf16_arithmetic_matches_interpreter(tmp_path):
    """bf16 pointwise arithmetic is computed in f32 and rounded once (Triton's
    CPU interpreter computed bf16 products wrongly: x*2 was off by up to 5)."""
    src = tmp_path / "bf16.efir"
    src.write_text(
        "func @f(%x: tensor<4x64xbf16>, %y: tensor<4x64xbf16>) -> tensor<4x64xbf16> {\n"
        "  %c = tensor.full<2.0> : tensor<bf16>\n"
        "  %a = ew.mul %x, %c : tensor<4x64xbf16>\n"
        "  %b = ew.sub %a, %y : tensor<4x64xbf16>\n"
        "  %d = ew.div %b, %c : tensor<4x64xbf16>\n"
        "  %e = ew.max %d, %y : tensor<4x64xbf16>\n"
        "  %n = ew.neg %e : tensor<4x64xbf16>\n"
        "  %r = ew.add %n, %x : tensor<4x64xbf16>\n"
        "  return %r : tensor<4x64xbf16>\n"
        "}\n"
    )
    (py, mod, fname), = translate(src, tmp_path / "py")
    assert "tl.bfloat16" in py.read_text()
    for config in (None, largest(mod.CONFIG_SPACE)):
        errs = h.check_module(py, src, fname, tmp_path / "ref", config=config)
        assert max(errs) <= TOL, (config, errs)


@pytest.mark.parametrize("lit", ["triton-online-softmax-gqa-bf16", "triton-epilogue-load-after-loop",
                                 "triton-acc-unit-batch"])
def test_bf16_kernels_match_interpreter(lit, tmp_path):
    """Kernels of lit-tests/Translate (bf16 where the models use it):
    grouped-query attention whose weighted sum of V is a tl.dot of bf16
    operands (probabilities rounded to bf16), a projection whose residual is
    loaded after its K loop, and matmuls of unit batch dims accumulating in
    a matrix (one of them with its programs' order remapped, the rows' axis
    fastest), within tolerance of the interpreter."""
    src = tmp_path / f"{lit}.efir"
    src.write_text((ROOT / "lit-tests" / "Translate" / f"{lit}.efir").read_text())
    mods = translate(src, tmp_path / "py")
    assert mods
    for py, mod, fname in mods:
        text = py.read_text()
        assert "tl.dot(" in text
        for config in (None, largest(mod.CONFIG_SPACE)):
            errs = h.check_module(py, src, fname, tmp_path / "ref", config=config)
            assert max(errs) <= TOL, (fname, config, errs)


KERNEL_BLOCKS = """
func @twok(%x: tensor<2x96xf32>) -> (tensor<2xf32>, tensor<2x96xf32>) {
  %p = par.partition<1, @k> %x : tensor<2x96xf32, @k: part(1)>
  %s = tensor.reduce<#red.sum, 1> %p : tensor<2xf32, @k: partial(#red.sum)>
  %r = par.reduce<#red.sum, @k> %s : tensor<2xf32>
  %e = ew.exp %p : tensor<2x96xf32, @k: part(1)>
  %c = par.combine<1, @k> %e : tensor<2x96xf32>
  return %r, %c : tensor<2xf32>, tensor<2x96xf32>
}
"""


def test_a_kernel_block_of_its_own(tmp_path):
    """A kernel that only loops over an axis takes its own block of it
    (`BLOCK_k__k0`) while another kernel splits the axis by the shared one:
    right whether the two agree, differ, or divide the extent or not."""
    src = tmp_path / "twok.efir"
    src.write_text(KERNEL_BLOCKS)
    (py, mod, fname), = translate(src, tmp_path / "py")
    assert "BLOCK_k__k0" in mod.CONFIG_SPACE and "BLOCK_k__k1" not in mod.CONFIG_SPACE
    for shared, own in ((16, 16), (16, 128), (128, 32), (64, 16)):
        config = {"BLOCK_k": shared, "BLOCK_k__k0": own}
        errs = h.check_module(py, src, fname, tmp_path / "ref", config=config)
        assert max(errs) <= TOL, (config, errs)


SPLITK_SUB = """
func @sk(%x: tensor<3x100xf32>, %w: tensor<100x24xf32>) -> tensor<3x24xf32> {
  %xk = par.partition<1, @k> %x : tensor<3x100xf32, @k: part(1)>
  %ex = ew.exp %xk : tensor<3x100xf32, @k: part(1)>
  %wk = par.partition<0, @k> %w : tensor<100x24xf32, @k: part(0)>
  %p = tile.matmul %ex, %wk : tensor<3x24xf32, @k: partial(#red.sum)>
  %c = par.collect<@k> %p : tensor<|@k|x3x24xf32>
  %r = tensor.reduce<#red.sum, 0> %c : tensor<3x24xf32>
  return %r : tensor<3x24xf32>
}
"""


def test_split_k_tiles_streamed_in_sub_blocks(tmp_path):
    """A split-K program loops over sub-blocks of its tile of the collected
    axis (`BLOCK_k__k0`, at most the tile): right with one trip, several,
    a sub-block asked larger than the tile, and tiles past the extent (100
    is no multiple of the blocks)."""
    src = tmp_path / "sk.efir"
    src.write_text(SPLITK_SUB)
    (py, mod, fname), = translate(src, tmp_path / "py")
    assert "for i_sub_k in range(0, BLOCK_k // SUB_k):" in py.read_text()
    assert "BLOCK_k__k0" in mod.CONFIG_SPACE
    for tile, sub in ((16, 16), (64, 16), (128, 32), (32, 64)):
        config = {"BLOCK_k": tile, "BLOCK_k__k0": sub}
        errs = h.check_module(py, src, fname, tmp_path / "ref", config=config)
        assert max(errs) <= TOL, (config, errs)


STAT_LOOPS = """
func @lg(%x: tensor<3x100xf32>, %w: tensor<100x24xf32>) -> tensor<3x24xf32> {
  %xm = par.partition<0, @m> %x : tensor<3x100xf32, @m: part(0)>
  %xk = par.partition<1, @k> %xm : tensor<3x100xf32, @k: part(1), @m: part(0)>
  %s = tensor.reduce<#red.sum, 1> %xk : tensor<3xf32, @k: partial(#red.sum), @m: part(0)>
  %sm = par.reduce<#red.sum, @k> %s : tensor<3xf32, @m: part(0)>
  %m1 = tensor.reshape %sm : tensor<3x1xf32, @m: part(0)>
  %n = tensor.full<100.0> : tensor<f32, @m: repl>
  %mean = ew.div %m1, %n : tensor<3x1xf32, @m: part(0)>
  %xc = ew.sub %xm, %mean : tensor<3x100xf32, @m: part(0)>
  %sq = ew.mul %xc, %xc : tensor<3x100xf32, @m: part(0)>
  %sqk = par.partition<1, @k> %sq : tensor<3x100xf32, @k: part(1), @m: part(0)>
  %v = tensor.reduce<#red.sum, 1> %sqk : tensor<3xf32, @k: partial(#red.sum), @m: part(0)>
  %vs = par.reduce<#red.sum, @k> %v : tensor<3xf32, @m: part(0)>
  %vs1 = tensor.reshape %vs : tensor<3x1xf32, @m: part(0)>
  %var = ew.div %vs1, %n : tensor<3x1xf32, @m: part(0)>
  %r = ew.rsqrt %var : tensor<3x1xf32, @m: part(0)>
  %h = ew.mul %xc, %r : tensor<3x100xf32, @m: part(0)>
  %hk = par.partition<1, @k> %h : tensor<3x100xf32, @k: part(1), @m: part(0)>
  %wm = par.replicate<@m> %w : tensor<100x24xf32, @m: repl>
  %wk = par.partition<0, @k> %wm : tensor<100x24xf32, @k: part(0), @m: repl>
  %p = tile.matmul %hk, %wk : tensor<3x24xf32, @k: partial(#red.sum), @m: part(0)>
  %ym = par.reduce<#red.sum, @k> %p : tensor<3x24xf32, @m: part(0)>
  %y = par.combine<0, @m> %ym : tensor<3x24xf32>
  return %y : tensor<3x24xf32>
}
"""


def test_statistics_loops_take_blocks_of_their_own(tmp_path):
    """A kernel that loops over @k for a normalization's mean and variance
    and again for the matmul over @k: the statistics loops run on blocks of
    their own (`BLOCK_k__r0`, default the kernel's block of @k), right with
    blocks above, equal to and below the matmul's and past the extent (100
    is no multiple of them)."""
    src = tmp_path / "lg.efir"
    src.write_text(STAT_LOOPS)
    (py, mod, fname), = translate(src, tmp_path / "py")
    text = py.read_text()
    assert text.count("in range(0, RNT_k):") == 2 and text.count("in range(0, NT_k):") == 1
    assert "BLOCK_k__r0" in mod.CONFIG_SPACE
    for k, rb in ((16, 128), (32, 32), (64, 16), (128, 64)):
        config = {"BLOCK_k": k, "BLOCK_k__r0": rb}
        errs = h.check_module(py, src, fname, tmp_path / "ref", config=config)
        assert max(errs) <= TOL, (config, errs)


def test_flash_decoding_twins_match_the_source(tmp_path):
    """Attention decode with 2 heads over 1,024 keys: one program per head
    would stream every key while the GPU idles, so compaction appends to each
    candidate with such an online-softmax loop its flash-decoding twin (the
    key blocks' partial states collected, merged in a second kernel; rule
    split.collect-repair-states applied to the candidate). Each twin's
    kernels, run on the source program's inputs, give the source program's
    output (not only the twin's own interpretation)."""
    src = ROOT / "examples" / "derivations" / "attn_decode_split.source.efir"
    cand = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(src), "--saturate", "--compact=max-candidates=4", "-o", str(cand))
    text = cand.read_text()
    funcs = re.findall(r"^func @(attn_decode\.c\d+)\(", text, re.M)
    bodies = dict(zip(funcs, re.split(r"^func @attn_decode\.c\d+\(", text, flags=re.M)[1:]))
    twins = [f for f in funcs if int(f.split(".c")[1]) >= 4]
    assert twins, funcs
    for f in twins:
        body = bodies[f].split("\n}\n")[0]
        assert "par.reduce<#red.repair" not in body and "par.collect<@k1024>" in body, body
    mods = {fname: (py, mod) for py, mod, fname in translate(cand, tmp_path / "py")}
    looped = 0
    for f in twins:
        py, mod = mods[f]
        assert len(re.findall(r"^def _k\d+", py.read_text(), re.M)) >= 2
        configs = [None, largest(mod.CONFIG_SPACE), smallest(mod.CONFIG_SPACE)]
        # A split of 256 keys streamed in 4 blocks of 64 (the loop over
        # sub-blocks of the program's tile, the state merged by the
        # online softmax), with the query row padded into the dots and not.
        subs = [k for k in mod.CONFIG_SPACE if re.fullmatch(r"BLOCK_k1024__k\d+", k)]
        if subs:
            looped += 1
            assert "for i_sub_k1024 in range(0, BLOCK_k1024 // SUB_k1024):" in py.read_text()
            rows = [k for k in mod.CONFIG_SPACE if k.startswith("BLOCK_g") and 16 in mod.CONFIG_SPACE[k] and 1 in mod.CONFIG_SPACE[k]]
            for pad in (1, 16):
                configs.append(dict({"BLOCK_k1024": 256, **{k: 64 for k in subs}}, **{k: pad for k in rows}))
        for config in configs:
            errs = h.check_module(py, src, "attn_decode", tmp_path / f"ref_{f}", config=config)
            assert max(errs) <= TOL, (f, config, errs)
    assert looped, "no twin streams its split in sub-blocks"


def test_independent_kernels_share_a_launch(tmp_path):
    """The gate kernel and the split-K partial products of the up
    projection read only the inputs: one launch runs both (a group kernel
    dispatching on the program id, the second member's ids offset by
    PID_OFF), equal to the interpreter by default, at the largest and
    smallest blocks, and when different warps or stages for the members
    make run() launch them one by one. The partials are stored at f32."""
    src = ROOT / "lit-tests" / "Translate" / "triton-launch-group.efir"
    (py, mod, fname), = translate(src, tmp_path / "py")
    text = py.read_text()
    assert "def _h0_1(" in text and "_h0_1[(pg0_0 + pg0_1,)](" in text
    assert "dtype=torch.float32" in text
    configs = [None, largest(mod.CONFIG_SPACE), smallest(mod.CONFIG_SPACE), {"num_warps_k1": 2}, {"num_stages_k0": 3}]
    for config in configs:
        errs = h.check_module(py, src, fname, tmp_path / "ref", config=config)
        assert max(errs) <= TOL, (config, errs)


def test_a_group_out_of_resources_launches_its_members(tmp_path, monkeypatch):
    """Where the group kernel does not fit the GPU (its members' shared
    memory together: Triton's OutOfResources at launch), run() launches
    the members one by one, and no longer tries the group at that
    schedule."""
    import triton

    src = ROOT / "lit-tests" / "Translate" / "triton-launch-group.efir"
    (py, _, fname), = translate(src, tmp_path / "py")
    mod = h.load_module(py)
    tries = []

    class Full:
        def __getitem__(self, grid):
            def launch(*a, **k):
                tries.append(grid)
                raise triton.runtime.errors.OutOfResources(248832, 232448, "shared memory")
            return launch

    monkeypatch.setattr(mod, "_h0_1", Full())
    monkeypatch.setattr(h, "load_module", lambda _: mod)
    for _ in range(2):
        errs = h.check_module(py, src, fname, tmp_path / "ref")
        assert max(errs) <= TOL, errs
    assert len(tries) == 1 and len(mod._UNGROUPED) == 1


def test_decode_query_row_padded_into_dots(tmp_path):
    """Attention decode has one query row: its automatic grid axis offers a
    block of 16 (the row padded, masked), which makes both products
    `tl.dot`s (Triton pipelines the K/V loads that feed a dot; the
    one-row multiply-and-sum reads them with plain loads). Every candidate
    of the small decode, at that block, with the largest and smallest other
    blocks, equals the interpreter."""
    src = ROOT / "examples" / "small" / "attn_decode.efir"
    cand = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(src), "--saturate", "--compact=max-candidates=4", "-o", str(cand))
    mods = translate(cand, tmp_path / "py")
    padded = 0
    for py, mod, fname in mods:
        space = mod.CONFIG_SPACE
        rows = [k for k in space if k.startswith("BLOCK_g") and k.endswith("_2") and 16 in space[k] and 1 in space[k]]
        if not rows:
            continue
        padded += 1
        text = py.read_text()
        assert "tl.dot(" in text and "< 1)" in text, fname
        for base in ({}, largest(space), smallest(space)):
            config = dict(base, **{k: 16 for k in rows})
            errs = h.check_module(py, src, "attn_decode", tmp_path / f"ref_{fname}", config=config)
            assert max(errs) <= TOL, (fname, config, errs)
    assert padded, [m[2] for m in mods]


def test_grouped_query_decode_row_padded_through_views(tmp_path):
    """Grouped-query decode as a Llama layer's attention chunk computes it:
    the query split into key/value heads and groups, the result merged
    back, both views of buffers read and written through index arithmetic,
    with the query row padded to a block of 16 (its default) and at 1:
    both equal the interpreter (a padded row read through a view once
    loaded a 1-row block under a 16-row mask)."""
    src = ROOT / "lit-tests" / "Translate" / "triton-gqa-decode-padded-row.efir"
    py = tmp_path / "gqa.py"
    h.sh(h.tool("efir-translate"), "--to-triton", str(src), "--func", "gqa_decode", "-o", str(py))
    mod = h.load_module(py)
    assert mod.DEFAULT_CONFIG["BLOCK_g0_3"] == 16
    for config in ({}, {"BLOCK_g0_3": 1}, dict(largest(mod.CONFIG_SPACE), BLOCK_g0_3=16)):
        errs = h.check_module(py, src, "gqa_decode", tmp_path / "ref", config=config)
        assert max(errs) <= TOL, (config, errs)
