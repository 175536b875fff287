//! Inputs the adversarial campaign (tools/adversarial/campaign.py) found
//! mishandled: `.npy` files in Fortran order, with data after or missing
//! from what the header says, endless devices; integers beyond what an f64
//! holds; i32 arithmetic that overflows; a comparison of zero trials.

use efir_interp::inputs::read_npy;
use efir_interp::value::round_scalar;
use efir_ir::DType;
use std::path::PathBuf;

/// A version-1 `.npy` file: `descr`, `shape`, the order flag, then `data`.
fn npy(descr: &str, shape: &[usize], fortran: bool, data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let fo = if fortran { "True" } else { "False" };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {fo}, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("efir-interp-hardening-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn fortran_order_is_read_as_stored() {
    // [[1, 2, 3], [4, 5, 6]] stored column by column.
    let p = write(
        "f.npy",
        &npy("<f4", &[2, 3], true, &f32s(&[1., 4., 2., 5., 3., 6.])),
    );
    let t = read_npy(&p, DType::F32).unwrap();
    assert_eq!(t.data.shape(), &[2, 3]);
    let got: Vec<f64> = t.data.iter().copied().collect();
    assert_eq!(got, vec![1., 2., 3., 4., 5., 6.]);
    let p = write(
        "c.npy",
        &npy("<f4", &[2, 3], false, &f32s(&[1., 2., 3., 4., 5., 6.])),
    );
    let got: Vec<f64> = read_npy(&p, DType::F32)
        .unwrap()
        .data
        .iter()
        .copied()
        .collect();
    assert_eq!(got, vec![1., 2., 3., 4., 5., 6.]);
}

#[test]
fn data_must_be_what_the_header_says() {
    let mut long = npy("<f4", &[2], false, &f32s(&[1., 2.]));
    long.extend_from_slice(b"junk");
    let e = read_npy(&write("long.npy", &long), DType::F32).unwrap_err();
    assert!(
        e.contains("has 12 bytes of data, but its header says 8"),
        "{e}"
    );
    let short = npy("<f4", &[4], false, &f32s(&[1., 2.]));
    let e = read_npy(&write("short.npy", &short), DType::F32).unwrap_err();
    assert!(
        e.contains("has 8 bytes of data, but its header says 16"),
        "{e}"
    );
    let huge = npy("<f4", &[1 << 40, 1 << 40], false, &[]);
    let e = read_npy(&write("huge.npy", &huge), DType::F32).unwrap_err();
    assert!(e.contains("has more elements than 2^64"), "{e}");
}

#[test]
fn endless_devices_and_directories_stop() {
    let e = read_npy(std::path::Path::new("/dev/zero"), DType::F32).unwrap_err();
    assert!(e.contains("is not a .npy file"), "{e}");
    let e = read_npy(std::path::Path::new("/"), DType::F32).unwrap_err();
    assert!(e.contains("is a directory"), "{e}");
}

#[test]
fn i64_beyond_2_53_is_refused_not_rounded() {
    let v: Vec<u8> = [(1i64 << 53) + 1, 3]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let e = read_npy(&write("big.npy", &npy("<i8", &[2], false, &v)), DType::I64).unwrap_err();
    assert!(e.contains("9007199254740993, at least 2^53"), "{e}");
    let v: Vec<u8> = [(1i64 << 53) - 1, -((1i64 << 53) - 1)]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let t = read_npy(&write("ok.npy", &npy("<i8", &[2], false, &v)), DType::I64).unwrap();
    assert_eq!(
        t.data.iter().copied().collect::<Vec<_>>(),
        vec![9007199254740991.0, -9007199254740991.0]
    );
}

#[test]
fn i32_wraps_around_like_the_kernels() {
    assert_eq!(round_scalar(2147483648.0, DType::I32), -2147483648.0);
    assert_eq!(round_scalar(-2147483649.0, DType::I32), 2147483647.0);
    assert_eq!(round_scalar(4294967296.0 * 3.0 + 5.7, DType::I32), 5.0);
    assert_eq!(round_scalar(-2.7, DType::I32), -2.0);
    assert_eq!(round_scalar(f64::NAN, DType::I32), 0.0);
    assert_eq!(round_scalar(1e300, DType::I32), 0.0);
}
