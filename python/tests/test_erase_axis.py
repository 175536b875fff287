"""bench/erase_axis.py: the sub-e-graph without a parallel axis."""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("erase_axis", ROOT / "bench" / "erase_axis.py")
erase_axis = importlib.util.module_from_spec(spec)
spec.loader.exec_module(erase_axis)

# Class 2 holds the result two ways: a whole matmul, and tiles over @n8
# combined; class 3 only reads the tiles (so it goes with them), class 4 is
# partial over @k8 (partial axes are not erased).
EGRAPH = """func @f(%a: tensor<4x8xf16>, %b: tensor<8x8xf16>) -> tensor<4x8xf16> {
  %n0 = egraph.node<0, "arg", []> {param = 0} : tensor<4x8xf16>
  %n1 = egraph.node<1, "arg", []> {param = 1} : tensor<8x8xf16>
  %n2 = egraph.node<2, "tensor.matmul", [0, 1]> : tensor<4x8xf16>
  %n3 = egraph.node<2, "par.combine", [3]> {dim = 1, axis = @n8} : tensor<4x8xf16>
  %n4 = egraph.node<3, "tile.matmul", [0, 5]> : tensor<4x8xf16, @n8: part(1)>
  %n5 = egraph.node<5, "par.partition", [1]> {dim = 1, axis = @n8} : tensor<8x8xf16, @n8: part(1)>
  %n6 = egraph.node<6, "ew.cast", [4]> : tensor<4x8xf32>
  %n7 = egraph.node<4, "tile.matmul", [0, 1]> : tensor<4x8xf16, @k8: partial(#red.sum)>
  %r0 = egraph.root<2> : tensor<4x8xf16>
  return %r0 : tensor<4x8xf16>
}"""


def test_drops_the_axis_and_what_reads_only_it():
    lines = EGRAPH.split("\n")
    kept, before, after = erase_axis.erase(lines, ["n8"])
    text = "\n".join(kept)
    assert before == (8, 7)
    assert after == (5, 5)
    assert "@n8" not in text
    assert '"tensor.matmul"' in text and "egraph.root<2>" in text
    # Partial axes stay.
    assert "@k8: partial" in text


def test_other_axes_keep_everything():
    lines = EGRAPH.split("\n")
    kept, before, after = erase_axis.erase(lines, ["m4"])
    assert kept == lines and before == after


def test_a_root_left_empty_is_an_error():
    lines = EGRAPH.replace('%n2 = egraph.node<2, "tensor.matmul", [0, 1]> : tensor<4x8xf16>\n', "").split("\n")
    with pytest.raises(SystemExit, match="root"):
        erase_axis.erase(lines, ["n8"])


# Class 3 is `exp(a)` tiled over @m4 and replicated over @n8: computed again
# in each @n8 tile (`ew.exp` of class 4) or computed once and replicated
# (class 2). Class 5 replicates over @n8 only, with nothing else to keep.
RECOMPUTE = """func @g(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %n0 = egraph.node<0, "arg", []> {param = 0} : tensor<4x8xf16>
  %n1 = egraph.node<1, "par.partition", [0]> {dim = 0, axis = @m4} : tensor<4x8xf16, @m4: part(0)>
  %n2 = egraph.node<2, "ew.exp", [1]> : tensor<4x8xf16, @m4: part(0)>
  %n3 = egraph.node<3, "par.replicate", [2]> {axis = @n8} : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n4 = egraph.node<3, "ew.exp", [4]> : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n5 = egraph.node<4, "par.replicate", [1]> {axis = @n8} : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n6 = egraph.node<5, "ew.exp", [6]> : tensor<4x8xf16, @n8: repl>
  %n7 = egraph.node<6, "par.replicate", [0]> {axis = @n8} : tensor<4x8xf16, @n8: repl>
  %n8 = egraph.node<7, "par.combine", [2]> {dim = 0, axis = @m4} : tensor<4x8xf16>
  %r0 = egraph.root<7> : tensor<4x8xf16>
  return %r0 : tensor<4x8xf16>
}"""


def test_no_recompute_keeps_only_replicates_of_values_under_other_axes():
    lines = RECOMPUTE.split("\n")
    kept, before, after = erase_axis.no_recompute(lines)
    text = "\n".join(kept)
    assert before == (9, 8)
    assert after == (8, 8)
    # The `ew.exp` computed again in each @n8 tile is gone, its replicated
    # form stays; `par.replicate` of the argument stays too.
    assert '%n4 = egraph.node<3, "ew.exp"' not in text
    assert '%n3 = egraph.node<3, "par.replicate"' in text
    assert '%n5 = egraph.node<4, "par.replicate"' in text
    # Replicated over one axis only: kept as it is.
    assert '%n6 = egraph.node<5, "ew.exp"' in text


# Class 3 is `a @ b` tiled over @m4 and replicated over @n8: computed again
# in each @n8 tile (`tile.matmul` of classes 5 and 6) or computed once and
# replicated (class 2); class 7 (`exp` of it, replicated) needs the matmul
# too and has no `par.replicate` e-node, so it is left empty and the
# combine reading it goes. Class 8 is replicated but needs no matmul.
MATMUL_RECOMPUTE = """func @h(%a: tensor<4x8xf16>, %b: tensor<8x8xf16>) -> tensor<4x8xf16> {
  %n0 = egraph.node<0, "arg", []> {param = 0} : tensor<4x8xf16>
  %n1 = egraph.node<1, "arg", []> {param = 1} : tensor<8x8xf16>
  %n2 = egraph.node<4, "par.partition", [0]> {dim = 0, axis = @m4} : tensor<4x8xf16, @m4: part(0)>
  %n3 = egraph.node<2, "tile.matmul", [4, 1]> : tensor<4x8xf16, @m4: part(0)>
  %n4 = egraph.node<3, "par.replicate", [2]> {axis = @n8} : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n5 = egraph.node<3, "tile.matmul", [5, 6]> : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n6 = egraph.node<5, "par.replicate", [4]> {axis = @n8} : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n7 = egraph.node<6, "par.replicate", [1]> {axis = @n8} : tensor<8x8xf16, @n8: repl>
  %n8 = egraph.node<7, "ew.exp", [3]> : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n9 = egraph.node<8, "ew.exp", [5]> : tensor<4x8xf16, @m4: part(0), @n8: repl>
  %n10 = egraph.node<9, "par.combine", [2]> {dim = 0, axis = @m4} : tensor<4x8xf16>
  %n11 = egraph.node<9, "par.combine", [7]> {dim = 0, axis = @m4} : tensor<4x8xf16>
  %r0 = egraph.root<9> : tensor<4x8xf16>
  return %r0 : tensor<4x8xf16>
}"""


def test_no_matmul_recompute_keeps_only_replicates_of_values_that_need_a_matmul():
    lines = MATMUL_RECOMPUTE.split("\n")
    kept, before, after = erase_axis.no_matmul_recompute(lines)
    text = "\n".join(kept)
    assert before == (12, 10)
    assert after == (9, 9)
    # The matmul computed again in each @n8 tile is gone, its replicated
    # form stays.
    assert '%n5 = egraph.node<3, "tile.matmul"' not in text
    assert '%n4 = egraph.node<3, "par.replicate"' in text
    # `exp` of the replicated matmul has no replicate form: gone, with the
    # combine that reads it.
    assert '%n8 = egraph.node<7' not in text and "%n11 =" not in text
    # Replicated values that need no matmul stay as they are.
    assert '%n9 = egraph.node<8, "ew.exp"' in text
    assert '%n6 = egraph.node<5, "par.replicate"' in text
