//! Pointwise ops written with other pointwise ops, for the code generators.
//!
//! An op whose target has no instruction of its own (Triton has no
//! `log1p`) is given here as a short sequence of the ops every generator
//! has (`ew.add`, `ew.log`, `ew.select`, ...), computed in f32 and rounded
//! once to the op's type. The Triton emitter and the TTIR builder emit an op
//! they have no direct lowering for through its expansion, so a new op of
//! this kind is written once, here, beside its scalar semantics (the op's
//! `fold`, which the interpreter and constant folding use); the expansion is
//! checked against that semantics by this crate's tests.

/// An argument of a [`Step`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// The expanded op's operand `i`.
    Operand(usize),
    /// The result of step `i` (an earlier one).
    Step(usize),
    /// A float constant.
    Const(f64),
}

/// One op of an expansion: `op` (an `ew` op with a direct lowering; `pred`
/// the predicate of an `ew.cmp`) over `args`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// The op.
    pub op: &'static str,
    /// The predicate of an `ew.cmp`.
    pub pred: Option<&'static str>,
    /// Its operands.
    pub args: &'static [Arg],
}

const fn step(op: &'static str, args: &'static [Arg]) -> Step {
    Step {
        op,
        pred: None,
        args,
    }
}

const fn cmp(pred: &'static str, args: &'static [Arg]) -> Step {
    Step {
        op: "ew.cmp",
        pred: Some(pred),
        args,
    }
}

use Arg::{Const, Operand as X, Step as S};

/// `log1p(x)`: with `u = 1 + x`, `log(u) * x / (u - 1)` (exact where `log(u)`
/// alone would lose the digits of a tiny `x`: the rounding of `u` cancels),
/// `x` where `u == 1`, `log(u)` where `u == x` (a huge `x`, where `u - 1`
/// would be `x` again but the quotient is not needed).
const LOG1P: &[Step] = &[
    step("ew.add", &[Const(1.0), X(0)]),          // 0: u
    step("ew.log", &[S(0)]),                      // 1: log(u)
    step("ew.sub", &[S(0), Const(1.0)]),          // 2: u - 1
    step("ew.div", &[X(0), S(2)]),                // 3: x / (u - 1)
    cmp("eq", &[S(0), X(0)]),                     // 4: u == x
    step("ew.select", &[S(4), Const(1.0), S(3)]), // 5
    step("ew.mul", &[S(1), S(5)]),                // 6
    cmp("eq", &[S(0), Const(1.0)]),               // 7: u == 1
    step("ew.select", &[S(7), X(0), S(6)]),       // 8: the result
];

/// The expansion of pointwise op `op`, if it has one: steps in order, the
/// last one's result the op's. Every step's op is one of `ew.add`, `ew.sub`,
/// `ew.mul`, `ew.div`, `ew.log`, `ew.exp`, `ew.cmp`, `ew.select`.
pub fn expansion(op: &str) -> Option<&'static [Step]> {
    match op {
        "ew.log1p" => Some(LOG1P),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every expansion agrees with its op's scalar semantics (the `fold`
    /// the interpreter uses) to within f32-like relative error, over
    /// magnitudes from tiny to huge, in f32 arithmetic as the generators
    /// compute it.
    #[test]
    fn expansions_agree_with_the_ops_semantics() {
        for op in crate::OPS {
            let Some(steps) = expansion(op.name) else {
                continue;
            };
            let fold = op.fold.expect("an expanded op has scalar semantics");
            for &x in &[
                -0.999, -0.5, -1e-3, -1e-7, -1e-30, 0.0, 1e-30, 1e-7, 1e-3, 0.5, 1.0, 3.0, 1e4,
                1e30,
            ] {
                let want = fold(&[x], &Default::default()).unwrap();
                // In f32 (each step rounded), as the kernels compute it.
                let got = eval32(steps, &[x as f32]) as f64;
                let err = ((got - want) / want.abs().max(f64::MIN_POSITIVE)).abs();
                assert!(
                    err < 1e-5 || got == want,
                    "{} at {x}: {got} vs {want}",
                    op.name
                );
            }
        }
    }

    fn eval32(steps: &[Step], xs: &[f32]) -> f32 {
        let mut v: Vec<f32> = Vec::new();
        for s in steps {
            let a: Vec<f32> = s
                .args
                .iter()
                .map(|a| match a {
                    Arg::Operand(i) => xs[*i],
                    Arg::Step(i) => v[*i],
                    Arg::Const(c) => *c as f32,
                })
                .collect();
            v.push(match (s.op, s.pred) {
                ("ew.add", _) => a[0] + a[1],
                ("ew.sub", _) => a[0] - a[1],
                ("ew.mul", _) => a[0] * a[1],
                ("ew.div", _) => a[0] / a[1],
                ("ew.log", _) => a[0].ln(),
                ("ew.exp", _) => a[0].exp(),
                ("ew.cmp", Some("eq")) => (a[0] == a[1]) as u8 as f32,
                ("ew.select", _) => {
                    if a[0] != 0.0 {
                        a[1]
                    } else {
                        a[2]
                    }
                }
                other => panic!("{other:?} in an expansion"),
            });
        }
        *v.last().unwrap()
    }

    #[test]
    fn ops_with_a_lowering_of_their_own_have_no_expansion() {
        assert_eq!(expansion("ew.exp"), None);
        assert!(expansion("ew.log1p").is_some());
    }
}
