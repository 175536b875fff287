//! Bounded fuzzing of the parser, verifier, printer and canonicalizer:
//! random text and mutations of the repository's real files must never
//! panic, and whatever verifies must print, re-parse and canonicalize,
//! translate to Triton (`efir-translate`'s library function) and run in the
//! interpreter (`efir-run`'s, under a small memory budget). Generated
//! programs with deep chains, huge shapes and hostile names go through the
//! same tools, and every Python module they translate to must compile with
//! unique definitions. The number of cases is `PROPTEST_CASES` (default 256
//! per property).

mod corpus;

use efir_driver::translate::{to_triton, TritonOptions};
use efir_driver::PassFlag;
use efir_ir::{parse_and_verify, print_module, PrintOptions};
use proptest::prelude::*;
use std::sync::OnceLock;

fn seeds() -> &'static Vec<String> {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut v: Vec<String> = corpus::all_files()
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .collect();
        v.push(include_str!("seed.efir").to_string());
        v
    })
}

const FRAGMENTS: &[&str] = &[
    "%0",
    "%a",
    "@m",
    "@p",
    "#red.sum",
    "#red.max",
    "#red.prod<#red.sum, #red.max>",
    "tensor<",
    ">",
    "<",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "=",
    "->",
    "func",
    "return",
    "tuple<",
    "part(0)",
    "part(7)",
    "repl",
    "partial(#red.sum)",
    "8x",
    "|@p|x",
    "f16",
    "i1",
    "xf32",
    "ew.add",
    "ew.exp",
    "tensor.matmul",
    "tensor.reduce<#red.sum, 1>",
    "par.partition<0, @m>",
    "tensor.slice<[0, 1], [2, 8], [1, 2]>",
    "tensor.slice<[0], [4], [1]>",
    "tensor.concat<1>",
    "tensor.concat<0> %a, %a",
    "par.collect<@p>",
    "tile.matmul",
    "\"ew.mul\"",
    "-inf",
    "1e-6",
    "99999999999999999999",
    "//",
    "\n",
    " ",
    "// -----\n",
    "%",
    "@",
    "#",
    "\"",
    "\\",
    "é",
    "\0",
];

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, usize),
    Duplicate(usize, usize, usize),
    Byte(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), 0..FRAGMENTS.len()).prop_map(|(a, f)| Mutation::Insert(a, f)),
        (any::<usize>(), 0usize..80, any::<usize>())
            .prop_map(|(a, n, b)| Mutation::Duplicate(a, n, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Byte(a, b)),
    ]
}

fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut s = text.to_string();
    for m in muts {
        let len = s.len().max(1);
        match *m {
            Mutation::Delete(a, n) => {
                let a = floor(&s, a % len);
                let b = floor(&s, a + n);
                s.replace_range(a..b, "");
            }
            Mutation::Insert(a, f) => {
                let a = floor(&s, a % len);
                s.insert_str(a, FRAGMENTS[f]);
            }
            Mutation::Duplicate(a, n, b) => {
                let a = floor(&s, a % len);
                let e = floor(&s, a + n);
                let piece = s[a..e].to_string();
                let b = floor(&s, b % len);
                s.insert_str(b, &piece);
            }
            Mutation::Byte(a, b) => {
                let a = floor(&s, a % len);
                let c = char::from(b.min(0x7e));
                s.insert(a, c);
            }
        }
    }
    s
}

/// Everything a tool does with a file; panics only on a real bug.
fn exercise(text: &str) {
    let reg = efir_registry::registry();
    let (m, diags) = parse_and_verify(text, &reg);
    // Rendering must not panic on any span.
    let _ = efir_diagnostics::render("fuzz.efir", text, &diags, false);
    if !diags.is_empty() {
        return;
    }
    translate_and_run(text, &m, &reg);
    for generic in [false, true] {
        let p = print_module(&m, &reg, PrintOptions { generic });
        let (_, d) = parse_and_verify(&p, &reg);
        assert!(d.is_empty(), "printed module does not verify: {d:?}\n{p}");
    }
    let flags = [PassFlag {
        name: "canonicalize".into(),
        options: String::new(),
    }];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags.is_empty(),
        "canonicalize broke a valid module: {:?}",
        out.diags
    );
    // Saturation takes programs of values: a module that launches kernels
    // (the kernel dialect, after --lower-to-kernels) is refused cleanly.
    if m.funcs
        .iter()
        .any(|f| f.ops.iter().any(|o| o.name == "kernel.launch"))
    {
        return;
    }
    // Saturation (bounded) and extraction must work on every valid module.
    let flags = [
        PassFlag {
            name: "saturate".into(),
            options: "node-limit=300,iter-limit=3".into(),
        },
        PassFlag {
            name: "extract".into(),
            options: String::new(),
        },
    ];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags.is_empty(),
        "saturate/extract failed on a valid module: {:?}\n{text}",
        out.diags
    );
    let flags = [
        PassFlag {
            name: "saturate".into(),
            options: "node-limit=200,iter-limit=2".into(),
        },
        PassFlag {
            name: "compact".into(),
            options: "max-candidates=2,max-states=200".into(),
        },
    ];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags
            .iter()
            .all(|d| d.severity != efir_diagnostics::Severity::Error),
        "saturate/compact failed on a valid module: {:?}\n{text}",
        out.diags
    );
    // Cutting into kernels either works (and the kernel graph verifies) or
    // reports E0801; lowering to Triton never panics.
    let flags = [PassFlag {
        name: "lower-to-kernels".into(),
        options: String::new(),
    }];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags.iter().all(|d| d.code == "E0801"),
        "lower-to-kernels failed on a valid module: {:?}\n{text}",
        out.diags
    );
    if let Some(k) = &out.text {
        let (km, d) = parse_and_verify(k, &reg);
        assert!(d.is_empty(), "kernel graph does not verify: {d:?}\n{k}");
        if let Ok(flat) = efir_triton::outline::flatten(&km) {
            for f in efir_triton::programs(&flat) {
                if let Ok(p) = efir_triton::plan(&flat, f) {
                    let _ = efir_triton::emit_python(&p, "fuzz", "fuzz");
                }
            }
        }
    }
}

/// The memory budget of the interpreter in these tests: programs beyond it
/// are refused with an error (the values of real examples are much larger).
const BUDGET: u128 = 256 << 10;

/// Translate a verified module to Triton (skipping unsupported programs)
/// and run each of its functions in the interpreter on random inputs
/// (where the budget allows): errors are fine, panics are not. Returns the
/// translated sources.
fn translate_and_run(text: &str, m: &efir_ir::Module, reg: &efir_ir::Registry) -> Vec<String> {
    let opts = TritonOptions {
        skip_unsupported: true,
        ..TritonOptions::default()
    };
    let out = match to_triton(text, "fuzz.efir", reg, &opts) {
        Ok(out) => out,
        // A module without a program to translate (empty, or only the
        // functions of reducers) is an error, not an empty success.
        Err(e) if e.contains("has no function to translate") => return Vec::new(),
        Err(e) => panic!("translation fails: {e}"),
    };
    assert!(out.verified, "verified module rejected: {:?}", out.diags);
    let sem = efir_registry::all_semantics();
    let tiles = m
        .funcs
        .iter()
        .flat_map(|f| f.values.iter())
        .flat_map(|v| v.ty.leaves())
        .flat_map(|l| l.state.keys().cloned().collect::<Vec<_>>())
        .map(|a| (a, 2))
        .collect();
    let it = efir_interp::Interp::new(
        m,
        &sem,
        efir_interp::Options {
            tiles,
            ..Default::default()
        },
    );
    for f in &m.funcs {
        if efir_interp::budget::check_memory(m, f, BUDGET).is_err() {
            continue;
        }
        if let Ok(inputs) =
            efir_interp::inputs::random_inputs(f, 1, efir_interp::inputs::Dist::Normal)
        {
            let _ = it.run(&f.name, &inputs);
        }
    }
    out.programs.into_iter().map(|p| p.source).collect()
}

/// Names a hostile user might give: Python keywords and builtins, names of
/// the emitted module's own globals, and names that differ only in `.`,
/// `$` or `_`.
const NAMES: &[&str] = &[
    "x",
    "x.y",
    "x$y",
    "x_y",
    "x__y",
    "x_$y",
    "x._y",
    "xy",
    "def",
    "None",
    "lambda",
    "return",
    "__import__",
    "import",
    "tl",
    "triton",
    "torch",
    "run",
    "INPUTS",
    "cfg",
    "pid",
    "p_x_0",
    "self",
    "_",
    "__",
    "a.b.c",
    "a$b$c",
    "l.weight",
    "l_weight",
    "in",
    "not",
];

/// One generated program: a chain of `depth` pointwise ops over
/// parameters named from [`NAMES`], with dims `dims`, ending in a sum over
/// the last dim.
#[derive(Clone, Debug)]
struct Gen {
    func: usize,
    params: Vec<usize>,
    values: Vec<usize>,
    ops: Vec<(u8, usize)>,
    dims: Vec<u64>,
}

fn gen() -> impl Strategy<Value = Gen> {
    let dim = prop_oneof![
        8 => 1u64..9,
        1 => Just(100_000u64),
        1 => Just(1u64 << 40),
        1 => Just(i64::MAX as u64),
    ];
    let depth = prop_oneof![6 => 1usize..40, 1 => Just(3000usize)];
    (
        0..NAMES.len(),
        prop::collection::vec(0..NAMES.len(), 1..4),
        depth,
        prop::collection::vec(dim, 1..3),
        any::<u64>(),
    )
        .prop_map(|(func, params, depth, dims, seed)| {
            let mut x = seed | 1;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as usize
            };
            let ops = (0..depth).map(|_| ((next() % 4) as u8, next())).collect();
            let values = (0..depth).map(|_| next() % NAMES.len()).collect();
            Gen {
                func,
                params,
                values,
                ops,
                dims,
            }
        })
}

impl Gen {
    fn text(&self) -> String {
        let shape: Vec<String> = self.dims.iter().map(u64::to_string).collect();
        let ty = format!("tensor<{}xf32>", shape.join("x"));
        let mut red = self.dims.clone();
        red.pop();
        let rty = if red.is_empty() {
            "tensor<f32>".to_string()
        } else {
            let r: Vec<String> = red.iter().map(u64::to_string).collect();
            format!("tensor<{}xf32>", r.join("x"))
        };
        // Parameter names made distinct by their position; values by theirs.
        let params: Vec<String> = self
            .params
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if i == 0 {
                    NAMES[*n].to_string()
                } else {
                    format!("{}.{i}", NAMES[*n])
                }
            })
            .collect();
        let mut s = format!(
            "func @{}({}) -> {rty} {{\n",
            NAMES[self.func],
            params
                .iter()
                .map(|p| format!("%{p}: {ty}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut live: Vec<String> = params.clone();
        for (i, ((op, pick), name)) in self.ops.iter().zip(&self.values).enumerate() {
            let v = format!("{}${i}", NAMES[*name]);
            let a = &live[pick % live.len()];
            let b = &live[(pick / 7) % live.len()];
            let rhs = match op {
                0 => format!("ew.neg %{a}"),
                1 => format!("ew.exp %{a}"),
                2 => format!("ew.add %{a}, %{b}"),
                _ => format!("ew.mul %{a}, %{b}"),
            };
            s.push_str(&format!("  %{v} = {rhs} : {ty}\n"));
            live.push(v);
        }
        let last = live.last().expect("a value");
        let d = self.dims.len() - 1;
        s.push_str(&format!(
            "  %r = tensor.reduce<#red.sum, {d}> %{last} : {rty}\n  return %r : {rty}\n}}\n"
        ));
        s
    }

    fn huge(&self) -> bool {
        self.dims
            .iter()
            .try_fold(8u128 * 4, |a, d| {
                a.checked_mul(u128::from(*d)).filter(|x| *x <= BUDGET)
            })
            .is_none()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Generated programs verify, translate (or fail cleanly), run in the
    /// interpreter where the budget allows and are refused where their
    /// shapes are huge.
    #[test]
    fn generated_programs_translate_and_run(g in gen()) {
        let text = g.text();
        let reg = efir_registry::registry();
        let (m, diags) = parse_and_verify(&text, &reg);
        if g.dims.iter().any(|d| *d > 1 << 40) {
            // Beyond what element counts can hold: a clean parse error.
            prop_assert!(!diags.is_empty() && diags.iter().all(|d| d.code == "E0103"), "{diags:?}");
            return Ok(());
        }
        prop_assert!(diags.is_empty(), "{diags:?}\n{text}");
        let f = &m.funcs[0];
        let need = efir_interp::budget::check_memory(&m, f, BUDGET);
        if g.huge() {
            prop_assert!(need.is_err(), "huge shapes not refused: {:?}", g.dims);
        }
        let _ = translate_and_run(&text, &m, &reg);
    }
}

/// Distinct names give distinct Python identifiers, valid once prefixed;
/// every module translated from generated programs compiles, defines each
/// global once and imports without side effects (with stand-ins for torch
/// and triton that record calls; checked by one `python3` run).
#[test]
fn generated_python_parses_with_unique_identifiers() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut idents = std::collections::HashMap::new();
    for n in NAMES {
        let id = efir_triton::py_ident(n);
        if let Some(other) = idents.insert(id.clone(), *n) {
            panic!("`{n}` and `{other}` share the Python identifier `{id}`");
        }
    }
    let reg = efir_registry::registry();
    let mut runner = TestRunner::deterministic();
    let dir = std::env::temp_dir().join(format!("efir-fuzz-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut written = 0;
    for i in 0..24 {
        let mut g = gen().new_tree(&mut runner).unwrap().current();
        g.dims.retain(|d| *d <= 1 << 40);
        if g.dims.is_empty() {
            g.dims.push(4);
        }
        g.ops.truncate(60);
        g.values.truncate(60);
        let text = g.text();
        let opts = TritonOptions {
            skip_unsupported: true,
            ..TritonOptions::default()
        };
        let out = to_triton(&text, "fuzz \"\"\" '.efir", &reg, &opts).unwrap();
        for (j, p) in out.programs.iter().enumerate() {
            std::fs::write(dir.join(format!("m{i}_{j}.py")), &p.source).unwrap();
            written += 1;
        }
    }
    let idents: Vec<&String> = idents.keys().collect();
    std::fs::write(
        dir.join("idents.txt"),
        // Prefixed, as the emitter uses them (`p_x`, `v_x`).
        idents
            .iter()
            .map(|s| format!("p_{s}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let script = r#"
import ast, glob, keyword, os, sys
d = sys.argv[1]
bad = []
for name in open(os.path.join(d, "idents.txt")).read().split():
    if not name.isidentifier() or keyword.iskeyword(name):
        bad.append("identifier " + repr(name))
files = sorted(glob.glob(os.path.join(d, "*.py")))
for path in files:
    src = open(path).read()
    try:
        compile(src, path, "exec")
    except SyntaxError as e:
        bad.append(path + ": " + str(e))
        continue
    seen = set()
    for node in ast.parse(src).body:
        names = []
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        for n in names:
            if n in seen:
                bad.append(path + ": `" + n + "` defined twice")
            seen.add(n)
    # Importing runs nothing but definitions: with stand-ins for torch and
    # triton that record every call, only `triton.jit` is called.
    calls = []
    class Stub:
        def __init__(self, name):
            self._name = name
        def __getattr__(self, attr):
            return Stub(self._name + "." + attr)
        def __call__(self, *args, **kwargs):
            calls.append(self._name)
            if self._name == "triton.jit" and len(args) == 1 and callable(args[0]):
                return args[0]
            return Stub(self._name + "()")
        def __getitem__(self, key):
            return Stub(self._name + "[]")
    saved = {k: sys.modules.get(k) for k in ("torch", "triton", "triton.language")}
    triton = Stub("triton")
    sys.modules.update({"torch": Stub("torch"), "triton": triton, "triton.language": triton.language})
    try:
        exec(compile(src, path, "exec"), {"__name__": "efir_fuzz_module"})
    except Exception as e:
        bad.append(path + ": import raised " + repr(e))
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    others = [c for c in calls if c != "triton.jit"]
    if others:
        bad.append(path + ": import calls " + ", ".join(sorted(set(others))))
print(len(files), "modules")
if bad:
    print("\n".join(bad))
    sys.exit(1)
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&dir)
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(written > 0, "nothing translated");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("{written} modules")));
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_files_never_panic(seed in any::<usize>(), muts in prop::collection::vec(mutation(), 1..6)) {
        let seeds = seeds();
        let text = apply(&seeds[seed % seeds.len()], &muts);
        exercise(&text);
    }

    #[test]
    fn random_fragment_soup_never_panics(parts in prop::collection::vec(0..FRAGMENTS.len(), 0..60)) {
        let text: String = parts.iter().map(|&i| FRAGMENTS[i]).collect::<Vec<_>>().join(" ");
        exercise(&text);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        exercise(&String::from_utf8_lossy(&bytes));
    }
}
