//! Sibling loops fused, as the Python build's (`crates/triton`
//! `emit/fuse.rs`): the emitter makes one `scf.for` per K loop or parallel
//! reduction, so two matmuls over the same K (an MLP's gate and up
//! projections) come out as two loops one after the other, each loading
//! the shared operand again. Two `scf.for` ops of one block with equal
//! bounds become one carrying both loops' states, when the later one reads
//! nothing the earlier one (or what depends on it) computes and neither
//! stores: the ops between them that the later loop needs move before the
//! merged loop, the others stay after it. Triton's CSE then computes the
//! shared loads and offsets once per iteration.

use super::*;
use melior::ir::operation::OperationResult;
use melior::ir::ValueLike;
use melior::IrRewriter;

fn name(op: OperationRef<'_, '_>) -> String {
    op.name()
        .as_string_ref()
        .as_str()
        .map(str::to_string)
        .unwrap_or_default()
}

fn key(op: OperationRef<'_, '_>) -> usize {
    op.to_raw().ptr as usize
}

fn ops_of<'c, 'a>(b: BlockRef<'c, 'a>) -> Vec<OperationRef<'c, 'a>> {
    let mut out = Vec::new();
    let mut o = b.first_operation();
    while let Some(x) = o {
        out.push(x);
        o = x.next_in_block();
    }
    out
}

/// The ops whose results `op` (or an op nested in it) reads.
fn read_defs(op: OperationRef<'_, '_>, out: &mut HashSet<usize>) {
    for v in op.operands() {
        if let Ok(r) = OperationResult::try_from(v) {
            out.insert(key(r.owner()));
        }
    }
    for r in op.regions() {
        let mut b = r.first_block();
        while let Some(x) = b {
            for o in ops_of(x) {
                read_defs(o, out);
            }
            b = x.next_in_region();
        }
    }
}

/// Whether `op` (or an op nested in it) writes memory.
fn writes(op: OperationRef<'_, '_>) -> bool {
    let n = name(op);
    if n == "tt.store" || n.contains("atomic") {
        return true;
    }
    op.regions().any(|r| {
        let mut b = r.first_block();
        while let Some(x) = b {
            if ops_of(x).into_iter().any(writes) {
                return true;
            }
            b = x.next_in_region();
        }
        false
    })
}

/// Whether values `a` and `b` are equal: the same value, or equal
/// `arith.constant`s.
fn same(a: Value<'_, '_>, b: Value<'_, '_>) -> bool {
    if a == b {
        return true;
    }
    let c = |v: Value<'_, '_>| {
        let op = OperationResult::try_from(v).ok()?.owner();
        (name(op) == "arith.constant")
            .then(|| op.attribute("value").ok().map(|a| a.to_string()))
            .flatten()
    };
    matches!((c(a), c(b)), (Some(x), Some(y)) if x == y)
}

fn same_bounds(a: OperationRef<'_, '_>, b: OperationRef<'_, '_>) -> bool {
    (0..3).all(|i| matches!((a.operand(i), b.operand(i)), (Ok(x), Ok(y)) if same(x, y)))
}

/// Fuse the sibling loops of `block` and of the blocks nested in it.
pub(super) fn sibling_loops(ctx: &Context, block: BlockRef<'_, '_>) -> Result<(), String> {
    while let Some((i, j)) = fusible(block) {
        let ops = ops_of(block);
        fuse(ctx, block, &ops[i..=j])?;
    }
    for o in ops_of(block) {
        for r in o.regions() {
            let mut b = r.first_block();
            while let Some(x) = b {
                sibling_loops(ctx, x)?;
                b = x.next_in_region();
            }
        }
    }
    Ok(())
}

/// The first pair of loops of `block` that can be fused (their positions).
fn fusible(block: BlockRef<'_, '_>) -> Option<(usize, usize)> {
    let ops = ops_of(block);
    for (i, l1) in ops.iter().enumerate() {
        if name(*l1) != "scf.for" || writes(*l1) {
            continue;
        }
        let mut dep = HashSet::from([key(*l1)]);
        for (j, o) in ops.iter().enumerate().skip(i + 1) {
            let mut reads = HashSet::new();
            read_defs(*o, &mut reads);
            let depends = reads.iter().any(|k| dep.contains(k));
            if writes(*o) {
                break;
            }
            if name(*o) == "scf.for" && !depends && same_bounds(*l1, *o) {
                return Some((i, j));
            }
            if depends {
                dep.insert(key(*o));
            }
        }
    }
    None
}

/// Fuse loop `ops[0]` with loop `ops[last]` (the ops between them do not
/// feed the later loop from the earlier one).
fn fuse(
    ctx: &Context,
    block: BlockRef<'_, '_>,
    ops: &[OperationRef<'_, '_>],
) -> Result<(), String> {
    let (l1, l2) = (ops[0], ops[ops.len() - 1]);
    let between = &ops[1..ops.len() - 1];
    // What the later loop needs from between them moves before the earlier.
    let mut need = HashSet::new();
    read_defs(l2, &mut need);
    for o in between.iter().rev() {
        if need.contains(&key(*o)) {
            read_defs(*o, &mut need);
        }
    }
    let rwi = IrRewriter::new(ctx);
    let rw = rwi.as_rewriter_base();
    for o in between {
        if need.contains(&key(*o)) {
            rw.move_op_before(*o, l1);
        }
    }
    let err = |e: melior::Error| e.to_string();
    let mut operands: Vec<Value> = l1.operands().collect();
    operands.extend(l2.operands().skip(3));
    let mut types: Vec<Type> = l1.results().map(|r| r.r#type()).collect();
    types.extend(l2.results().map(|r| r.r#type()));
    let b1 = l1
        .region(0)
        .map_err(err)?
        .first_block()
        .ok_or("a loop without a body")?;
    let b2 = l2
        .region(0)
        .map_err(err)?
        .first_block()
        .ok_or("a loop without a body")?;
    let loc = l1.location();
    let mut args = vec![(b1.argument(0).map_err(err)?.r#type(), loc)];
    args.extend(types.iter().map(|t| (*t, loc)));
    let region = Region::new();
    region.append_block(Block::new(&args));
    let forop = OperationBuilder::new("scf.for", loc)
        .add_operands(&operands)
        .add_results(&types)
        .add_regions([region])
        .build()
        .map_err(|e| format!("scf.for: {e}"))?;
    let new = block.insert_operation_before(l1, forop);
    let nb = new
        .region(0)
        .map_err(err)?
        .first_block()
        .ok_or("scf.for without a block")?;
    let n1 = l1.result_count();
    let arg = |i: usize| -> Result<Value, String> { Ok(nb.argument(i).map_err(err)?.into()) };
    let mut v1 = vec![arg(0)?];
    for i in 0..n1 {
        v1.push(arg(1 + i)?);
    }
    let mut v2 = vec![arg(0)?];
    for i in 0..l2.result_count() {
        v2.push(arg(1 + n1 + i)?);
    }
    rw.merge_blocks(b1, nb, &v1);
    let y1 = nb.terminator().ok_or("a loop body without a yield")?;
    rw.merge_blocks(b2, nb, &v2);
    let y2 = nb.terminator().ok_or("a loop body without a yield")?;
    let mut ys: Vec<Value> = y1.operands().collect();
    ys.extend(y2.operands());
    let y = OperationBuilder::new("scf.yield", loc)
        .add_operands(&ys)
        .build()
        .map_err(|e| format!("scf.yield: {e}"))?;
    nb.append_operation(y);
    rw.erase_op(y1);
    rw.erase_op(y2);
    for (i, r) in l1.results().chain(l2.results()).enumerate() {
        let to: Value = new.result(i).map_err(err)?.into();
        rw.replace_all_uses_with(r.into(), to);
    }
    rw.erase_op(l1);
    rw.erase_op(l2);
    Ok(())
}
