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

/// `examples/small/attn_prefill.efir` at another shape: causal attention
/// over Q, K, V of shape [b, h, s, d].
pub fn attn_prefill(b: usize, h: usize, s: usize, d: usize) -> String {
    let t = |dims: &str, dt: &str| format!("tensor<{dims}x{dt}>");
    let full = format!("{b}x{h}x{s}x{d}");
    let sc = format!("{b}x{h}x{s}x{s}");
    let row = format!("{b}x{h}x{s}");
    let row1 = format!("{b}x{h}x{s}x1");
    let scale = 1.0 / (d as f64).sqrt();
    format!(
        "func @attn_prefill(%q: {q}, %k: {q}, %v: {q}) -> {q} {{
  %kt = tensor.transpose<[0, 1, 3, 2]> %k : {kt}
  %s = tensor.matmul %q, %kt : {s16}
  %sf = ew.cast %s : {s32}
  %scale = tensor.full<{scale:?}> : tensor<f32>
  %z = ew.mul %sf, %scale : {s32}
  %row = tensor.iota<0> : tensor<{s}x1xi32>
  %col = tensor.iota<1> : tensor<1x{s}xi32>
  %keep = ew.cmp<ge> %row, %col : tensor<{s}x{s}xi1>
  %ninf = tensor.full<-inf> : tensor<f32>
  %zm = ew.select %keep, %z, %ninf : {s32}
  %mx = tensor.reduce<#red.max, 3> %zm : {r32}
  %mx1 = tensor.reshape %mx : {r1}
  %zc = ew.sub %zm, %mx1 : {s32}
  %e = ew.exp %zc : {s32}
  %l = tensor.reduce<#red.sum, 3> %e : {r32}
  %l1 = tensor.reshape %l : {r1}
  %pf = ew.div %e, %l1 : {s32}
  %p = ew.cast %pf : {s16}
  %o = tensor.matmul %p, %v : {q}
  return %o : {q}
}}
",
        q = t(&full, "f16"),
        kt = t(&format!("{b}x{h}x{d}x{s}"), "f16"),
        s16 = t(&sc, "f16"),
        s32 = t(&sc, "f32"),
        r32 = t(&row, "f32"),
        r1 = t(&row1, "f32"),
    )
}
