//! Golden renderings of diagnostics (insta snapshots; re-bless with
//! `INSTA_UPDATE=always cargo test -p efir-driver --test diagnostics` and
//! read the diff).

use efir_diagnostics::render;
use efir_ir::parse_and_verify;

fn rendered(src: &str) -> String {
    let reg = efir_registry::registry();
    let (_, diags) = parse_and_verify(src, &reg);
    render("input.efir", src, &diags, false)
}

#[test]
fn verifier_errors_are_all_reported_in_order() {
    insta::assert_snapshot!(rendered(
        "func @mismatch(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x8xf32> {
  %0 = ew.add %a, %b : tensor<4x8xf32>
  %1 = ew.exp %zz : tensor<4x8xf32>
  %2 = par.combine<0, @m> %a : tensor<4x8xf32>
  %3 = tile.matmul %a, %b : tensor<4x4xf16>
  return %0 : tensor<4x8xf32>
}
"
    ));
}

#[test]
fn syntax_errors_name_the_line() {
    insta::assert_snapshot!(rendered(
        "func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ew.add %a %a : tensor<4xf32>
  %1 = ew.neg %a : tensor<4xq8>
  return %a : tensor<4xf32>
}
"
    ));
}
