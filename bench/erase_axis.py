"""Write a sub-e-graph of a saturated `.efir` e-graph module: the e-nodes
whose type has one of the given parallel axes (partitioned or replicated,
not partial) are dropped, then every e-node that reads a class left without
e-nodes, until none does.

A diagnostic for `--compact` (docs/passes.md, "Where that time goes"): the
candidates of the sub-e-graph are candidates of the whole one, so where
`early` finds as many classes on both, the classes of the whole e-graph
are all reachable without those axes, and the search spends the difference
in time on partial programs that find nothing new.

Usage:
    python3 bench/erase_axis.py IN.efir OUT.efir AXIS [AXIS ...]
    (AXIS as in the types, without `@`: n4096)

Prints the e-nodes and e-classes before and after on stderr. Fails when a
root's class is left without e-nodes.
"""

import re
import sys

NODE = re.compile(r'^\s*%n\d+ = egraph\.node<(\d+), "[^"]+", \[([0-9, ]*)\]>')
ROOT = re.compile(r"^\s*%r\d+ = egraph\.root<(\d+)>")


def erase(lines, axes):
    """The lines to keep, and (nodes, classes) before and after."""
    nodes = []  # (line, class, operand classes, type)
    roots = []
    for i, line in enumerate(lines):
        m = NODE.match(line)
        if m:
            kids = [int(x) for x in m.group(2).replace(" ", "").split(",") if x]
            nodes.append((i, int(m.group(1)), kids, line.split(" : ", 1)[1]))
            continue
        m = ROOT.match(line)
        if m:
            roots.append(int(m.group(1)))
    marks = [re.compile(rf"@{re.escape(a)}: (part|repl)") for a in axes]
    alive = {i for (i, _, _, ty) in nodes if not any(p.search(ty) for p in marks)}
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
    kept, (n0, c0), (n1, c1) = erase(lines, axes)
    with open(out, "w") as f:
        f.write("\n".join(kept))
    print(f"{n0} -> {n1} e-nodes, {c0} -> {c1} e-classes", file=sys.stderr)


if __name__ == "__main__":
    main()
