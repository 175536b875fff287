//! `efir-run` on bad input: each a clear error and exit 1; non-finite
//! outputs are reported; `.npy` inputs and outputs round-trip.

use efir_interp::inputs::write_npy;
use efir_interp::Tensor;
use efir_ir::DType;
use ndarray::{ArrayD, IxDyn};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_efir-run"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("efir-run-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn write(name: &str, text: &str) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, text).unwrap();
    p
}

const PROG: &str = "func @f(%x: tensor<2x3xf16>, %y: tensor<3xf16>) -> tensor<2x3xf16> {
  %z = ew.mul %x, %y : tensor<2x3xf16>
  return %z : tensor<2x3xf16>
}
";

fn npy(name: &str, dtype: DType, shape: &[usize]) -> PathBuf {
    let n = shape.iter().product();
    let p = tmp(name);
    let t = Tensor {
        dtype,
        data: ArrayD::from_shape_vec(IxDyn(shape), (1..=n).map(|v| v as f64).collect()).unwrap(),
    };
    write_npy(&p, &t).unwrap();
    p
}

fn fails_with(out: Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
}

fn arg(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn wrong_shape_wrong_dtype_missing_file_unknown_func() {
    let prog = write("prog.efir", PROG);
    let bad_shape = npy("bad_shape.npy", DType::F16, &[3, 2]);
    let out = bin()
        .args([
            arg(&prog),
            "--input".into(),
            format!("x={}", arg(&bad_shape)),
        ])
        .output()
        .unwrap();
    fails_with(out, "input `%x` must be [2, 3] of f16");
    let bad_dtype = npy("bad_dtype.npy", DType::F32, &[2, 3]);
    let out = bin()
        .args([
            arg(&prog),
            "--input".into(),
            format!("x={}", arg(&bad_dtype)),
        ])
        .output()
        .unwrap();
    fails_with(out, "holds `<f4` elements, but the parameter is f16");
    let out = bin()
        .args([arg(&prog), "--input".into(), "x=/nonexistent/x.npy".into()])
        .output()
        .unwrap();
    fails_with(out, "cannot read `/nonexistent/x.npy`");
    let out = bin()
        .args([
            arg(&prog),
            "--input".into(),
            format!("nope={}", arg(&bad_shape)),
        ])
        .output()
        .unwrap();
    fails_with(out, "has no parameter `%nope`");
    let out = bin()
        .args([arg(&prog), "--func".into(), "g".into()])
        .output()
        .unwrap();
    fails_with(out, "no function `@g`");
    let out = bin().arg("/nonexistent.efir").output().unwrap();
    fails_with(out, "cannot read");
    let broken = write("broken.efir", "func @f( {\n");
    let out = bin().arg(arg(&broken)).output().unwrap();
    fails_with(out, "error[E0101]");
}

#[test]
fn non_finite_outputs_are_reported() {
    let prog = write(
        "nan.efir",
        "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %z = tensor.full<0.0> : tensor<f32>\n  %y = ew.div %z, %z : tensor<f32>\n  %w = ew.add %x, %y : tensor<4xf32>\n  return %w : tensor<4xf32>\n}\n",
    );
    let out = bin().arg(arg(&prog)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("has 4 NaN and 0 infinite values"), "{err}");
}

#[test]
fn npy_inputs_and_outputs_round_trip() {
    let prog = write("rt.efir", PROG);
    let dir = tmp("rt-out");
    let out = bin()
        .args([
            arg(&prog),
            "--seed".into(),
            "3".into(),
            "--output-dir".into(),
            arg(&dir),
            "--dump-inputs".into(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = std::fs::read(dir.join("out0.npy")).unwrap();
    let dir2 = tmp("rt-out2");
    let out = bin()
        .args([
            arg(&prog),
            "--seed".into(),
            "99".into(),
            "--input".into(),
            format!("x={}", arg(&dir.join("in_x.npy"))),
            "--input".into(),
            format!("y={}", arg(&dir.join("in_y.npy"))),
            "--output-dir".into(),
            arg(&dir2),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(first, std::fs::read(dir2.join("out0.npy")).unwrap());
}

#[test]
fn compare_exits_1_when_programs_differ() {
    let a = write("cmp_a.efir", PROG);
    let b = write(
        "cmp_b.efir",
        &PROG.replace("ew.mul %x, %y", "ew.add %x, %y"),
    );
    let out = bin()
        .args(["--compare".into(), arg(&a), arg(&b)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("NOT equivalent"));
    let out = bin()
        .args(["--compare".into(), arg(&a), arg(&a)])
        .output()
        .unwrap();
    assert!(out.status.success());
}
