//! Exit codes: 0 ok, 1 errors in the input, 2 usage.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_efir-opt"))
}

fn example() -> String {
    format!(
        "{}/../../examples/small/ngpt.efir",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["--bogus".to_string()],
        vec![example(), "--compact=threads=0".into()],
        vec![example(), "--compact=time-limit=inf".into()],
        vec![example(), "--no-such-pass".into()],
        // a mistyped pass: a usage error with a suggestion
        vec![example(), "--saturat".into()],
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn mistyped_pass_suggests_the_pass() {
    let out = bin()
        .args([example(), "--saturat".into()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a similar argument exists: '--saturate'") && !err.contains("-- --saturat"),
        "{err}"
    );
    let out = bin().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn input_errors_exit_1_and_success_0() {
    let out = bin().arg("/nonexistent/x.efir").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = bin().arg(example()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}
