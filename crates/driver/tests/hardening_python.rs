//! The generated-Python property of issue 30 over real programs: every
//! valid case of the repository's `.efir` files, as written and with every
//! value, function and axis name replaced by a hostile one (Python keywords
//! and builtins, names of the emitted module's own globals, names that
//! differ only in `.`, `$` or `_`), is translated to Triton under a file
//! name that would close the module's docstring; for every program that
//! translates, the emitted module compiles, each of its functions takes
//! distinct arguments, it defines each global once, and importing it calls
//! nothing but `triton.jit` (checked by one `python3` run). Generated
//! chains with hostile names are `fuzz.rs`'s
//! `generated_python_parses_with_unique_identifiers`.

mod corpus;

use efir_driver::translate::{to_triton, TritonOptions};
use efir_ir::parse_and_verify;
use std::collections::HashMap;

/// Hostile names, all valid as values and as symbols (`@` needs a letter
/// or `_` first).
const HOSTILE: &[&str] = &[
    "t.0",
    "t_0",
    "t$0",
    "t__0",
    "t._0",
    "t$_0",
    "t0",
    "def",
    "lambda",
    "None",
    "tl",
    "triton",
    "torch",
    "run",
    "cfg",
    "pid",
    "INPUTS",
    "DEFAULT_CONFIG",
    "BLOCK_t",
    "p_t_0",
    "_",
    "__",
    "__import__",
    "self",
    "in",
    "not",
    "t.__0",
    "t$$0",
    "t__30",
    "t_$0",
    "return",
    "import",
];

/// `text` with every `%value` and `@symbol` renamed consistently to a
/// hostile name (the k-th distinct name to `HOSTILE[k % n]`, with `.k/n`
/// appended past the list, so that distinct names stay distinct).
fn hostile(text: &str) -> String {
    let mut map: HashMap<String, String> = HashMap::new();
    let mut out = String::with_capacity(text.len() * 2);
    let chars: Vec<char> = text.chars().collect();
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts = match c {
            '%' => chars.get(i + 1).is_some_and(|&d| name_char(d)),
            '@' => chars
                .get(i + 1)
                .is_some_and(|&d| d.is_ascii_alphabetic() || d == '_'),
            _ => false,
        };
        if !starts {
            out.push(c);
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < chars.len() && name_char(chars[j]) {
            j += 1;
        }
        let name: String = chars[i + 1..j].iter().collect();
        // `@efir.*` names the library's own functions (repairs, reducers).
        if name.starts_with("efir.") {
            out.extend(&chars[i..j]);
            i = j;
            continue;
        }
        let k = map.len();
        let new = map
            .entry(name)
            .or_insert_with(|| {
                let base = HOSTILE[k % HOSTILE.len()];
                if k < HOSTILE.len() {
                    base.to_string()
                } else {
                    format!("{base}.{}", k / HOSTILE.len())
                }
            })
            .clone();
        out.push(c);
        out.push_str(&new);
        i = j;
    }
    out
}

/// The modules `text` translates to (none where it does not verify or
/// nothing can be lowered).
fn translate(text: &str, reg: &efir_ir::Registry) -> Option<Vec<String>> {
    let (_, diags) = parse_and_verify(text, reg);
    if !diags.is_empty() {
        return None;
    }
    let opts = TritonOptions {
        skip_unsupported: true,
        ..TritonOptions::default()
    };
    let name = "x\"\"\"\nraise SystemExit('injected')\n\"\"\"\\.efir";
    match to_triton(text, name, reg, &opts) {
        Ok(out) => Some(out.programs.into_iter().map(|p| p.source).collect()),
        Err(_) => Some(Vec::new()),
    }
}

const CHECK: &str = r#"
import ast, glob, os, sys
d = sys.argv[1]
bad = []
files = sorted(glob.glob(os.path.join(d, "*.py")))
for path in files:
    src = open(path).read()
    try:
        tree = ast.parse(src, path)
        code = compile(src, path, "exec")
    except SyntaxError as e:
        bad.append(path + ": " + str(e))
        continue
    seen = set()
    for node in tree.body:
        names = []
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        for n in names:
            if n in seen:
                bad.append(path + ": `" + n + "` defined twice")
            seen.add(n)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            args = [a.arg for a in node.args.args + node.args.kwonlyargs]
            if len(args) != len(set(args)):
                bad.append(path + ": `" + node.name + "` repeats an argument")
        if isinstance(node, ast.Raise) and "injected" in ast.unparse(node):
            bad.append(path + ": the file name ran as code")
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
        exec(code, {"__name__": "efir_hardening_module"})
    except BaseException as e:
        bad.append(path + ": import raised " + repr(e))
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    others = sorted(set(c for c in calls if c != "triton.jit"))
    if others:
        bad.append(path + ": import calls " + ", ".join(others))
print(len(files), "modules")
if bad:
    print("\n".join(bad[:40]))
    sys.exit(1)
"#;

#[test]
fn real_programs_with_hostile_names_translate_to_valid_python() {
    let reg = efir_registry::registry();
    let dir = std::env::temp_dir().join(format!("efir-hardening-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut verified, mut renamed_verified, mut written) = (0, 0, 0);
    let mut lost = Vec::new();
    let root = corpus::repo_root();
    let tracked = ["examples", "lit-tests", "docs"].map(|d| root.join(d));
    for (file, case) in corpus::valid_cases() {
        // The repository's own files (bench/gpu/gen holds generated
        // candidate files, thousands of programs, where they were built),
        // and not programs whose `schedule` strings name axes (a renaming
        // leaves strings alone).
        if !tracked.iter().any(|d| file.starts_with(d)) || case.contains("schedule") {
            continue;
        }
        let Some(plain) = translate(&case, &reg) else {
            continue;
        };
        verified += 1;
        let renamed = hostile(&case);
        match translate(&renamed, &reg) {
            Some(mods) => {
                renamed_verified += 1;
                // As many programs translate under hostile names as under
                // their own (the names change nothing else).
                if mods.len() != plain.len() {
                    lost.push(format!(
                        "{}: {} programs, {} renamed",
                        file.display(),
                        plain.len(),
                        mods.len()
                    ));
                }
                for src in plain.iter().chain(&mods) {
                    // The case's file first, for the reader of a failure.
                    let text = format!("# {}\n{src}", file.display());
                    std::fs::write(dir.join(format!("m{written}.py")), text).unwrap();
                    written += 1;
                }
            }
            None => lost.push(format!("{}: does not verify renamed", file.display())),
        }
    }
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(CHECK)
        .arg(&dir)
        .output()
        .expect("python3 runs");
    if out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(lost.is_empty(), "{}", lost.join("\n"));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(verified, renamed_verified);
    assert!(
        written > 100,
        "only {written} modules from {verified} cases"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("{written} modules")));
}

#[test]
fn hostile_renaming_is_consistent_and_injective() {
    let text = "func @f(%a: t, %b: t) { %c = x %a, %b @f @g |@f|x %a }";
    let r = hostile(text);
    assert_eq!(
        r,
        "func @t.0(%t_0: t, %t$0: t) { %t__0 = x %t_0, %t$0 @t.0 @t._0 |@t.0|x %t_0 }"
    );
    let many: String = (0..100).map(|i| format!("%v{i} ")).collect();
    let renamed = hostile(&many);
    let names: std::collections::HashSet<&str> = renamed.split_whitespace().collect();
    assert_eq!(names.len(), 100);
}
