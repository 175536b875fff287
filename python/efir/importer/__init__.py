"""Import PyTorch programs into efir's tensor-level IR (`.efir` text).

`import_program(ep)` walks a `torch.export.ExportedProgram` and writes one
`func` whose parameters are the program's parameters and buffers (with their
real names, e.g. `%l.weight`) followed by its user inputs. Each call is
lowered by its entry in a table of lowerings (`core.LOWERINGS`: ATen op ->
function of a `Call`, registered with `@lowers`), grouped by family:

- `tensor_ops`: arithmetic, casts, reductions, norms, softmax, views,
  slices, concatenations, splits and matmuls;
- `attention`: `scaled_dot_product_attention` and `einsum`;
- `everyday`: the everyday ops of docs/import.md (activations, clamps,
  comparisons, selects, extremes, arange, fills, channel norms, no-ops,
  in-place forms).

Composite ops are expanded into matmuls, reductions and pointwise ops so
that saturation can optimize inside them. Constants are values of their
dtype: an element count that is not (262144 in f16) is computed in f32.

An op that is not supported raises `ImportError_` naming the op and the
Python source line it came from.
"""

import torch

from . import attention, everyday, tensor_ops  # noqa: F401  (they fill the table)
from .core import DTYPES, LOWERINGS, Builder, ImportError_, Value, lower, ty, where

__all__ = ["DTYPES", "LOWERINGS", "ImportError_", "Value", "import_program", "unsupported"]


def _scalar_dtype(v):
    """The efir dtype of a Python (or symbolic) scalar input."""
    if isinstance(v, (bool, torch.SymBool)):
        return "i1"
    if isinstance(v, (int, torch.SymInt)):
        return "i64"
    return "f32"


def ir_name(name):
    """`name` as a value name of the IR (letters, digits, `_`, `.`, `$`),
    injectively: every other character, and `$` itself, becomes `$` and the
    two hex digits of each of its UTF-8 bytes (`a b` -> `a$20b`, `é` ->
    `$c3$a9`). A parameter registered as `a b` or `é` gave a program the
    parser rejects (issue 30)."""
    ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
    return "".join(c if c in ok else "".join(f"${b:02x}" for b in c.encode()) for c in name) or "$"


def import_program(ep, name="main"):
    """The `.efir` text of an exported program (one function `@name`)."""
    if not isinstance(ep, torch.export.ExportedProgram):
        raise TypeError("import_program takes a torch.export.ExportedProgram")
    b = Builder()
    names = {spec.arg.name: spec.target if spec.target else spec.arg.name for spec in ep.graph_signature.input_specs}
    params = []
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        v = node.meta.get("val")
        pname = "%" + ir_name(str(names.get(node.name, node.name)))
        if isinstance(v, (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)):
            # A Python scalar input: a rank-0 parameter (torch.export bakes a
            # specialized scalar's value into the graph, which then leaves
            # the parameter unread; a symbolic one is read as a tensor).
            sdt = _scalar_dtype(v)
            params.append(f"{pname}: {ty((), sdt)}")
            b.env[node] = Value(pname, (), sdt)
            continue
        if not isinstance(v, torch.Tensor):
            raise ImportError_(f"input `{node.name}` is neither a tensor nor a number ({type(v).__name__})")
        if not all(isinstance(d, int) for d in v.shape):
            raise ImportError_(f"input `{node.name}` has a dynamic shape {tuple(v.shape)}; efir needs static shapes")
        x = Value(pname, tuple(v.shape), DTYPES[v.dtype])
        params.append(f"{pname}: {ty(x.shape, x.dtype)}")
        b.env[node] = x
    results = []
    for node in ep.graph.nodes:
        if node.op == "call_function":
            try:
                out = lower(b, node)
            except ImportError_:
                raise
            except Exception as e:  # noqa: BLE001
                raise ImportError_(f"cannot import `{node.target}` ({e}) at {where(node)}") from e
            if out is not None:
                b.env[node] = out
        elif node.op == "output":
            results.extend(b.env[o] for o in node.args[0])
        elif node.op == "get_attr":
            raise ImportError_(f"constant `{node.target}` is not supported at {where(node)}")
    b.flush(" ".join(r.name for r in results))
    ret_types = ", ".join(ty(r.shape, r.dtype) for r in results)
    ret_vals = ", ".join(r.name for r in results)
    header = f"func @{name}({', '.join(params)}) -> " + (f"({ret_types})" if len(results) > 1 else ret_types) + " {"
    return "\n".join([header, *b.lines, f"  return {ret_vals} : {ret_types}", "}", ""])


def unsupported(node):
    """Why the importer cannot lower the call `node` of an exported graph
    (the `ImportError_` message, naming the op and its source line), or None
    where it can. Asks the importer's own lowering, on stand-ins for the
    node's operands (their `meta["val"]`); the torch.compile backend's
    partial compilation uses it to choose what efir compiles."""
    if node.op != "call_function":
        return f"`{node.target}` ({node.op}) is not supported at {where(node)}"
    b = Builder()

    def stand_in(n, v):
        if isinstance(v, (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)):
            return Value(f"%{n.name}", (), _scalar_dtype(v))
        if isinstance(v, (tuple, list)):
            return [stand_in(n, e) if e is not None else None for e in v]
        if not isinstance(v, torch.Tensor) or v.dtype not in DTYPES or not all(isinstance(d, int) for d in v.shape):
            raise ImportError_(f"operand `{n.name}` of `{node.target}` ({v!r:.60}) is not supported at {where(node)}")
        return Value(f"%{n.name}", tuple(v.shape), DTYPES[v.dtype])

    try:
        for n in node.all_input_nodes:
            b.env[n] = stand_in(n, n.meta.get("val"))
        lower(b, node)
    except ImportError_ as e:
        return str(e)
    except Exception as e:  # noqa: BLE001
        return f"cannot import `{node.target}` ({e}) at {where(node)}"
    return None
