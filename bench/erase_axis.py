"""Write a sub-e-graph of a saturated `.efir` e-graph module: the e-nodes
whose type has one of the given parallel axes (partitioned or replicated,
not partial) are dropped, then every e-node that reads a class left without
e-nodes, until none does.

A diagnostic for `--compact` (docs/passes.md, "Where that time goes"): the
candidates of the sub-e-graph are candidates of the whole one, so where
`early` finds as many classes on both, the classes of the whole e-graph
are all reachable without those axes, and the search spends the difference
in time on partial programs that find nothing new.

With `--no-recompute` instead of axes, it keeps, in every class whose
state replicates an axis and has another axis, only the `par.replicate`
e-nodes: such a value is computed once under the other axes and replicated,
never computed again in each tile of the replicated axis (docs/passes.md,
"Where that time goes": this loses classes, so it is no pruning rule).

With `--no-matmul-recompute`, it keeps, in every class whose state
replicates an axis and whose value needs a matmul (a class with a
`tile.matmul` or `tensor.matmul` e-node, or an e-node reading such a
class), only the `par.replicate` e-nodes (a class without one is left
empty, and what reads it goes): a value made with a matmul is never
computed again in each tile of a replicated axis (docs/passes.md, "Where
that time goes", session 16: it keeps the number of classes of every
workload, but it is not a rule).

Usage:
    python3 bench/erase_axis.py IN.efir OUT.efir AXIS [AXIS ...]
    python3 bench/erase_axis.py IN.efir OUT.efir --no-recompute
    python3 bench/erase_axis.py IN.efir OUT.efir --no-matmul-recompute
    (AXIS as in the types, without `@`: n4096)

Prints the e-nodes and e-classes before and after on stderr. Fails when a
root's class is left without e-nodes.
"""

import re
import sys

NODE = re.compile(r'^\s*%n\d+ = egraph\.node<(\d+), "([^"]+)", \[([0-9, ]*)\]>')
STATE = re.compile(r"@(\w+): (part|repl|partial)")
ROOT = re.compile(r"^\s*%r\d+ = egraph\.root<(\d+)>")


def erase(lines, axes):
    """The lines to keep, and (nodes, classes) before and after."""
    marks = [re.compile(rf"@{re.escape(a)}: (part|repl)") for a in axes]
    return keep(lines, lambda op, ty, _c: not any(p.search(ty) for p in marks))


def no_recompute(lines):
    """`erase` for `--no-recompute`: in a class whose state replicates an
    axis and has another one, only `par.replicate` e-nodes stay."""

    def kept(op, ty, _c):
        st = STATE.findall(ty)
        repl = any(s == "repl" for _, s in st)
        return op == "par.replicate" or not (repl and len(st) >= 2)

    return keep(lines, kept)


def no_matmul_recompute(lines):
    """`erase` for `--no-matmul-recompute`: in a class whose state
    replicates an axis and whose value needs a matmul, only `par.replicate`
    e-nodes stay."""
    nodes = []  # (class, op, operand classes)
    for line in lines:
        m = NODE.match(line)
        if m:
            kids = [int(x) for x in m.group(3).replace(" ", "").split(",") if x]
            nodes.append((int(m.group(1)), m.group(2), kids))
    matmul = set()
    changed = True
    while changed:
        changed = False
        for c, op, kids in nodes:
            if c not in matmul and (
                op in ("tile.matmul", "tensor.matmul") or any(k in matmul for k in kids)
            ):
                matmul.add(c)
                changed = True
    return keep(
        lines,
        lambda op, ty, c: op == "par.replicate"
        or c not in matmul
        or not any(s == "repl" for _, s in STATE.findall(ty)),
    )


def keep(lines, kept):
    """The lines left when the e-nodes `kept(op, type, class)` rejects are dropped,
    then every e-node that reads a class left without e-nodes, until none
    does; and (nodes, classes) before and after."""
    nodes = []  # (line, class, operand classes, type)
    roots = []
    alive = set()
    for i, line in enumerate(lines):
        m = NODE.match(line)
        if m:
            kids = [int(x) for x in m.group(3).replace(" ", "").split(",") if x]
            ty = line.split(" : ", 1)[1]
            nodes.append((i, int(m.group(1)), kids, ty))
            if kept(m.group(2), ty, int(m.group(1))):
                alive.add(i)
            continue
        m = ROOT.match(line)
        if m:
            roots.append(int(m.group(1)))
    while True:
        classes = {c for (i, c, _, _) in nodes if i in alive}
        drop = {i for (i, _, kids, _) in nodes if i in alive and any(k not in classes for k in kids)}
        if not drop:
            break
        alive -= drop
    lost = [r for r in roots if r not in classes]
    if lost:
        raise SystemExit(f"erase_axis: the class of root(s) {lost} has no e-node left")
    dead = {i for (i, _, _, _) in nodes} - alive
    before = (len(nodes), len({c for (_, c, _, _) in nodes}))
    after = (len(alive), len(classes))
    return [line for i, line in enumerate(lines) if i not in dead], before, after


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    src, out, axes = sys.argv[1], sys.argv[2], sys.argv[3:]
    lines = open(src).read().split("\n")
    if axes == ["--no-recompute"]:
        kept, (n0, c0), (n1, c1) = no_recompute(lines)
    elif axes == ["--no-matmul-recompute"]:
        kept, (n0, c0), (n1, c1) = no_matmul_recompute(lines)
    else:
        kept, (n0, c0), (n1, c1) = erase(lines, axes)
    with open(out, "w") as f:
        f.write("\n".join(kept))
    print(f"{n0} -> {n1} e-nodes, {c0} -> {c1} e-classes", file=sys.stderr)


if __name__ == "__main__":
    main()
