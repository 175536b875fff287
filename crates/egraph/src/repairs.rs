//! The repair functions that reduction fusion uses, as IR: for a producer
//! `max` and consumers whose inputs are `exp(x - s')` (the normalizer) and
//! `exp(x - s') * v` (a weighted sum), the repair is
//! `h(c, s, s') = c * exp(s - s')`, applied to every consumer field.
//!
//! They are ordinary functions of the output module (named `@efir.*.<dtype>`,
//! emitted only when a reducer uses them), so the interpreter evaluates them
//! like any other; `crates/registry/tests/repairs.rs` checks the repair
//! identities `h(c, s, s) = c` and the fused reduction against the
//! unfused one on random data.

use efir_ir::DType;

/// The input map of the normalizer: `f(x, s') = exp(x - s')`.
pub fn exp_f(dt: DType) -> String {
    format!("efir.exp_f.{dt}")
}

/// The repair of one consumer field: `h(c, s, s') = c * exp(s - s')`.
pub fn exp_h(dt: DType) -> String {
    format!("efir.exp_h.{dt}")
}

/// The input map of normalizer and weighted sum:
/// `f(x, v, s') = (exp(x - s'), exp(x - s') * v)`.
pub fn exp_fw(dt: DType) -> String {
    format!("efir.exp_fw.{dt}")
}

/// The repair of two consumer fields: `h(l, a, s, s') = (l * e, a * e)` with
/// `e = exp(s - s')`.
pub fn exp_h2(dt: DType) -> String {
    format!("efir.exp_h2.{dt}")
}

/// Every library function for every float dtype, as IR text. The input maps
/// are guarded like FlashAttention's: where the new producer state is still
/// the identity (`s' = -inf`, every input so far masked), a contribution is
/// 0 rather than `exp(-inf + inf)` (`exp(x - 0)` with `x = -inf`: the input
/// maps assume `x <= s'`, as the fused reduction calls them); the repair keeps `c` where the state did
/// not change (`h(c, s, s) = c`, also for `s = -inf`).
pub fn library() -> String {
    let mut s = String::new();
    for dt in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        let t = format!("tensor<{dt}>");
        let i1 = "tensor<i1>";
        // p = exp(x - select(s' == -inf, 0, s')): the guard on the state
        // (a row's maximum, broadcast along the row in a kernel), not on each
        // element's exp. Equal to select(s' == -inf, 0, exp(x - s')) for
        // every input the fused reduction gives it, where s' is the maximum
        // of the inputs so far, x among them (x <= s'; s' = -inf only where
        // every x is -inf, and exp(-inf - 0) = 0); one select per row instead
        // of one per element of an attention score tile.
        let guarded_p = format!(
            "  %ninf = tensor.full<-inf> : {t}\n  %zero = tensor.full<0.0> : {t}\n  %none = ew.cmp<eq> %m, %ninf : {i1}\n  %ms = ew.select %none, %zero, %m : {t}\n  %d = ew.sub %x, %ms : {t}\n  %p = ew.exp %d : {t}\n"
        );
        // e = select(s == s', 1, exp(s - s'))
        let guarded_e = format!(
            "  %one = tensor.full<1.0> : {t}\n  %same = ew.cmp<eq> %s, %s1 : {i1}\n  %d = ew.sub %s, %s1 : {t}\n  %x = ew.exp %d : {t}\n  %e = ew.select %same, %one, %x : {t}\n"
        );
        s.push_str(&format!(
            "func @{f}(%x: {t}, %m: {t}) -> {t} {{\n{guarded_p}  return %p : {t}\n}}\n\n\
             func @{h}(%c: {t}, %s: {t}, %s1: {t}) -> {t} {{\n{guarded_e}  %c1 = ew.mul %c, %e : {t}\n  return %c1 : {t}\n}}\n\n\
             func @{fw}(%x: {t}, %v: {t}, %m: {t}) -> ({t}, {t}) {{\n{guarded_p}  %pv = ew.mul %p, %v : {t}\n  return %p, %pv : {t}, {t}\n}}\n\n\
             func @{h2}(%l: {t}, %a: {t}, %s: {t}, %s1: {t}) -> ({t}, {t}) {{\n{guarded_e}  %l1 = ew.mul %l, %e : {t}\n  %a1 = ew.mul %a, %e : {t}\n  return %l1, %a1 : {t}, {t}\n}}\n\n",
            f = exp_f(dt),
            h = exp_h(dt),
            fw = exp_fw(dt),
            h2 = exp_h2(dt),
        ));
    }
    s
}

/// The library as a parsed module (its functions' signatures feed the type
/// analysis of every e-graph).
pub fn library_module() -> efir_ir::Module {
    library_parsed().clone()
}

/// The library parsed once per process.
fn library_parsed() -> &'static efir_ir::Module {
    static LIB: std::sync::OnceLock<efir_ir::Module> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let (m, d) = efir_ir::parse_and_verify(&library(), &crate::dialects::value_registry());
        debug_assert!(d.is_empty(), "{d:?}");
        m
    })
}

/// The signatures of the library's functions, computed once per process.
pub fn library_signatures() -> &'static efir_ir::dialect::Signatures {
    static SIGS: std::sync::OnceLock<efir_ir::dialect::Signatures> = std::sync::OnceLock::new();
    SIGS.get_or_init(|| efir_ir::verify::signatures(library_parsed()))
}

/// The library functions that `names` mentions, in the library's order.
pub fn used_funcs(names: &std::collections::BTreeSet<String>) -> Vec<efir_ir::Func> {
    library_parsed()
        .funcs
        .iter()
        .filter(|f| names.contains(&f.name))
        .cloned()
        .collect()
}

/// The text of the library functions that `names` mentions.
pub fn used_text(names: &std::collections::BTreeSet<String>) -> String {
    let used = efir_ir::Module {
        funcs: used_funcs(names),
    };
    efir_ir::print_module(
        &used,
        &crate::dialects::value_registry(),
        efir_ir::PrintOptions::default(),
    )
}
