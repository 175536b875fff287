//! Shared pieces of efir's benchmarks: synthetic programs of a given size.

use std::fmt::Write;

/// A module with `n` ops in total: functions of 1,000 ops each, mixing
/// pointwise ops with broadcasting, reductions, reshapes, matmuls, parallel
/// views and tile matmuls, as a realistic mix for the parser and verifier.
pub fn synthetic_module(n: usize) -> String {
    let per_func = 1000;
    let mut s = String::with_capacity(n * 80);
    let mut made = 0;
    let mut fi = 0;
    while made < n {
        let count = per_func.min(n - made);
        let _ = writeln!(
            s,
            "func @f{fi}(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>, %g: tensor<64xf32>) -> tensor<16x64xf32> {{"
        );
        let mut cur = "x".to_string();
        let mut i = 0;
        while i < count {
            let k = i % 10;
            let v = format!("v{i}");
            let line = match k {
                0 => format!("%{v} = ew.mul %{cur}, %g : tensor<16x64xf32>"),
                1 => format!("%{v} = ew.exp %{cur} : tensor<16x64xf32>"),
                2 => format!("%{v} = tensor.matmul %{cur}, %w : tensor<16x64xf32>"),
                3 => format!("%{v} = tensor.reduce<#red.sum, 1> %{cur} : tensor<16xf32>"),
                4 => format!("%{v} = tensor.reshape %v{} : tensor<16x1xf32>", i - 1),
                5 => format!("%{v} = ew.div %v{}, %{cur} : tensor<16x64xf32>", i - 3),
                6 => format!("%{v} = par.partition<0, @m> %{cur} : tensor<16x64xf32, @m: part(0)>"),
                7 => format!("%{v} = par.replicate<@m> %w : tensor<64x64xf32, @m: repl>"),
                8 => format!(
                    "%{v} = tile.matmul %v{}, %v{} : tensor<16x64xf32, @m: part(0)>",
                    i - 2,
                    i - 1
                ),
                _ => format!("%{v} = par.combine<0, @m> %v{} : tensor<16x64xf32>", i - 1),
            };
            let _ = writeln!(s, "  {line}");
            if matches!(k, 0 | 1 | 2 | 5 | 9) {
                cur = v;
            }
            i += 1;
        }
        // Keep every function well formed even when `count` ends mid-pattern.
        let _ = writeln!(s, "  return %{cur} : tensor<16x64xf32>\n}}");
        made += count;
        fi += 1;
    }
    s
}
