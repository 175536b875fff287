"""Partial compilation for the torch.compile backend: where the importer
refuses an op, the graph is cut into connected groups of supported ops
(torch.fx's CapabilityBasedPartitioner), each group that does real work is
compiled by `efir.compile`, and the rest runs in PyTorch."""

import logging
import operator

import torch

from .importer import ImportError_
from .program import Args, export
from .stages import CompileError

log = logging.getLogger("efir")


# Ops that move or relabel data (and casts): a partition of these alone, or
# of one other cheap op, is left to PyTorch.
_VIEWS = {
    "view.default", "reshape.default", "_unsafe_view.default", "unsqueeze.default", "squeeze.dim", "squeeze.dims",
    "squeeze.default", "permute.default", "transpose.int", "t.default", "expand.default", "slice.Tensor",
    "select.int", "narrow.default", "alias.default", "detach.default", "clone.default", "contiguous.default",
    "lift_fresh_copy.default", "_assert_tensor_metadata.default", "_to_copy.default", "to.dtype",
    "to.dtype_layout", "numpy_T.default",
}
# Ops worth a partition on their own: contractions, normalizations,
# softmax and reductions.
_HEAVY = {
    "mm.default", "bmm.default", "matmul.default", "linear.default", "addmm.default", "einsum.default",
    "scaled_dot_product_attention.default", "_softmax.default", "softmax.int", "_log_softmax.default",
    "log_softmax.int", "layer_norm.default", "rms_norm.default", "group_norm.default", "batch_norm.default",
    "instance_norm.default", "_native_batch_norm_legit_no_training.default", "logsumexp.default",
    "mean.dim", "mean.default", "sum.dim_IntList", "sum.default", "amax.default", "amin.default",
}


def _opname(node):
    t = node.target
    return t.__name__ if isinstance(t, torch._ops.OpOverload) else getattr(t, "__name__", str(t))


def _worth(nodes):
    """Whether efir should compile a partition: two ops that compute, or one
    heavy one (a single pointwise op, or views alone, stay PyTorch)."""
    names = [_opname(n) for n in nodes if n.op == "call_function" and n.target is not operator.getitem]
    work = [n for n in names if n not in _VIEWS]
    return len(work) >= 2 or any(n in _HEAVY for n in work)


class _Compiled(torch.nn.Module):
    """A partition compiled by efir, in place of its submodule: returns a
    tuple, as the submodule (fused with `always_return_tuple`) did."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        out = self.fn(*args)
        return (out,) if isinstance(out, torch.Tensor) else tuple(out)


def partial(gm, inputs, opts, compile_fn, reuse):
    """Compile the parts of `gm` that efir supports: export it, cut its
    graph into connected groups of supported ops (torch.fx's
    CapabilityBasedPartitioner asks `importer.unsupported` of each op),
    compile each group that does real work with `compile`, and run the rest
    with PyTorch. Returns (callable, the warning's text), or (None, None)
    where no part was compiled."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    from .importer import unsupported

    ep = export(gm, inputs)
    kinds = {s.kind for s in ep.graph_signature.output_specs}
    if kinds != {torch.export.graph_signature.OutputKind.USER_OUTPUT}:
        return None, None  # mutations of inputs or buffers: not partitioned
    lifted = ep.graph_module
    reasons = {}
    order = {n: i for i, n in enumerate(lifted.graph.nodes)}

    class _Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            if node.op != "call_function":
                return False
            why = unsupported(node)
            if why is not None:
                reasons[node] = why
            return why is None

    parts = CapabilityBasedPartitioner(lifted, _Support(), allows_single_node_partition=True).propose_partitions()
    parts = [p.nodes for p in parts if _worth(p.nodes)]
    if not parts or not reasons:
        return None, None
    call, done, failed, _ = _compile_parts(ep, parts, inputs, opts, compile_fn, reuse)
    if not done:
        return None, None
    bad = sorted(reasons, key=order.get)
    why = reasons[bad[0]]
    if len(bad) > 1:
        others = sorted({_opname(n) for n in bad[1:]})
        why += f" (and {len(bad) - 1} more unsupported op(s): {', '.join(others)})"
    why += f"; efir compiled the rest ({done} part(s))"
    if failed:
        why += f"; {len(failed)} other part(s) failed to compile and run eagerly too: {failed[0]}"
    return call, why




def _compile_parts(ep, parts, inputs, opts, compile_fn, reuse):
    """Fuse each group of nodes of `ep`'s graph (convex: the fuser checks)
    into a submodule, compile each with `compile_fn` on the example inputs
    it sees when the graph runs eagerly on `inputs`, and keep PyTorch's
    code for those that fail. Returns (callable on the user's inputs,
    parts compiled, first lines of the failures, {part name: compiled})."""
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    fused = fuse_by_partitions(ep.graph_module, [dict.fromkeys(p) for p in parts], prefix="efir_", always_return_tuple=True)
    # Each partition's example inputs: the graph run eagerly on the backend's.
    seen = {}

    class _Record(torch.fx.Interpreter):
        def call_module(self, target, args, kwargs):
            seen.setdefault(target, args)
            return super().call_module(target, args, kwargs)

    args = Args(ep)
    with torch.no_grad():
        _Record(fused).run(*args(inputs))
    compiled, failed = {}, []
    for name in sorted(seen):
        try:
            fn = compile_fn(getattr(fused, name), seen[name], quiet=True, reuse=reuse, **opts)
        except (ImportError_, CompileError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            failed.append(first)
            log.debug("efir: partition %s left to PyTorch: %s", name, e)
            continue
        setattr(fused, name, _Compiled(fn))
        compiled[name] = fn
    fused.recompile()

    def call(*user):
        return tuple(fused(*args(user)))

    call.partitions = len(compiled)
    return call, len(compiled), failed, compiled


# Contractions (matmuls, attention): a graph with more of them than
# CHUNK_CONTRACTIONS is also compiled in chunks (`chunked`).
_CONTRACTIONS = {
    "mm.default", "bmm.default", "matmul.default", "linear.default", "addmm.default", "einsum.default",
    "scaled_dot_product_attention.default", "baddbmm.default",
}
CHUNK_CONTRACTIONS = 3
_ATTENTION = {"scaled_dot_product_attention.default"}


def chunked(gm, inputs, opts, compile_fn, reuse, limit=None):
    """`gm` compiled in chunks (the paper's subgraph partition, section
    5.2, in its simplest form): its exported graph's ops in topological
    order cut into contiguous runs of at most `limit` contractions each
    (a contiguous run of a topological order is convex), the ops before a
    contraction going with the run that holds it, an attention
    (`scaled_dot_product_attention`) a run of its own; each run compiled by
    `compile_fn` on its own, so that saturation and compaction search each
    small program whole instead of stopping early in a large one. Returns
    (callable on the user's inputs, {part: compiled}) or (None, None) where
    the graph has `limit` contractions or fewer, or a part fails."""
    limit = CHUNK_CONTRACTIONS if limit is None else limit
    ep = export(gm, inputs)
    kinds = {s.kind for s in ep.graph_signature.output_specs}
    if kinds != {torch.export.graph_signature.OutputKind.USER_OUTPUT}:
        return None, None
    nodes = [n for n in ep.graph_module.graph.nodes if n.op == "call_function"]
    if sum(_opname(n) in _CONTRACTIONS for n in nodes) <= limit:
        return None, None
    # torch.export's checks of a value's device and dtype at trace time
    # (`_assert_tensor_metadata`, beside a `.to()`) hold no longer once the
    # program's constants move to the inputs' device (`Args`): a 0-d CPU
    # constant that Mistral's layer creates is asserted to be on the CPU,
    # and a chunk that ran the check on the GPU failed. They compute nothing.
    g = ep.graph_module.graph
    for n in [n for n in nodes if _opname(n) == "_assert_tensor_metadata.default"]:
        g.erase_node(n)
    g.eliminate_dead_code()
    ep.graph_module.recompile()
    nodes = [n for n in g.nodes if n.op == "call_function"]
    runs, cur, heavy = [], [], 0
    for n in nodes:
        if _opname(n) in _CONTRACTIONS:
            # An attention is a run of its own (with the views after it):
            # beside a projection that reads its result, compaction finds
            # no candidate with its one-kernel online softmax (grouped-query
            # attention in Llama's prefill: 7.3 ms in a chunk with o_proj,
            # bench/results/2026-12-06-s33-h100-notes.md).
            attention = _opname(n) in _ATTENTION
            if heavy == limit or (attention and heavy > 0):
                runs.append(cur)
                cur, heavy = [], 0
            heavy = limit if attention else heavy + 1
        cur.append(n)
    runs.append(cur)
    # A relabelling or cast of the graph's inputs alone (a `to` that keeps
    # the dtype, `detach`) that a later run reads too stays in PyTorch, so
    # that no part returns what it was given (which efir does not
    # translate) and every part reads it as an input.
    where = {n: i for i, r in enumerate(runs) for n in r}
    pre = set()
    for n in nodes:
        if _opname(n) in _VIEWS | {"detach_.default"} and all(a.op == "placeholder" or a in pre for a in n.all_input_nodes):
            pre.add(n)
    shared = {n for n in pre if any(where.get(u, where[n]) != where[n] for u in n.users)}
    keep = set()
    for n in reversed(nodes):
        if n in shared or (n in pre and any(u in keep for u in n.users)):
            keep.add(n)
    runs = [[n for n in r if n not in keep] for r in runs]
    parts = [r for r in runs if _worth(r)]
    call, done, failed, compiled = _compile_parts(ep, parts, inputs, opts, compile_fn, reuse)
    if failed or done != len(parts):
        log.debug("efir: chunked compilation abandoned: %s", failed[:1])
        return None, None
    return call, compiled
