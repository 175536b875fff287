//! Fuzzing early compaction: on random sub-e-graphs of saturated e-graphs
//! (random e-nodes deleted), `--compact=mode=early` must find exactly the
//! classes `mode=after` finds whenever both finish. A review that deleted
//! random e-nodes from the saturated gated_mlp found sub-e-graphs on which
//! `early` lost classes (`lit-tests/Pass/compact-holes.efir`); this test
//! guards against such regressions (on the code before those fixes it finds
//! disagreements in gated_mlp and rmsnorm_swiglu). It is deterministic (a
//! fixed seed, a small xorshift generator, limits on expanded partial
//! programs; the time limit is only a safety net); a disagreement names the
//! workload, the seed, the case and the class counts, and writes the
//! sub-e-graph to the temporary directory: `efir-opt FILE
//! --compact=mode=early,max-candidates=1000 --stats=json` (and `mode=after`)
//! shows it, and with RUN lines it becomes a lit test like
//! `lit-tests/Pass/compact-holes.efir`.

use efir_egraph::compact::{Enumerator, Limits, Mode, Space};
use efir_egraph::convert::to_egraph_text;
use efir_egraph::rules::FAMILIES;
use efir_egraph::saturate::{graph_of, library_refs, library_used, run_rules};
use efir_ir::parse_and_verify;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The seed of the first case; case `i` of a workload uses `SEED + i`
/// (mixed with a hash of the workload's name). `FUZZ_SEED` (hex) overrides
/// it, and `FUZZ_MULT` multiplies the number of cases, for longer fuzzing
/// by hand (`FUZZ_SEED=1234 FUZZ_MULT=4 cargo test --release -p
/// efir-registry --test compact_fuzz`).
const SEED: u64 = 0x5eed_c0ac;

fn seed() -> u64 {
    std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(SEED)
}

fn multiplier() -> usize {
    std::env::var("FUZZ_MULT")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|m| *m > 0)
        .unwrap_or(1)
}
/// Expanded partial programs per run; cases that hit it are skipped.
const MAX_STATES: usize = 100_000;
/// Seconds per run (a safety net; `MAX_STATES` should stop runs first).
const TIME_LIMIT: f64 = 2.0;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// xorshift64*: enough randomness for choosing e-nodes, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so that neighbouring seeds differ.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One `egraph.node` line of the printed e-graph.
struct Node {
    class: i64,
    kids: Vec<i64>,
    line: usize,
}

/// A saturated e-graph as text: its lines, which of them are e-nodes, and
/// the root classes.
struct Saturated {
    lines: Vec<String>,
    nodes: Vec<Node>,
    roots: Vec<i64>,
}

/// The saturated e-graph of `examples/small/<name>.efir`, printed as an
/// `egraph` module (with the repair-library functions it uses).
fn saturated(name: &str) -> Saturated {
    let src = std::fs::read_to_string(root().join(format!("examples/small/{name}.efir"))).unwrap();
    let (m, d) = parse_and_verify(&src, &efir_registry::registry());
    assert!(d.is_empty(), "{name}: {d:?}");
    assert_eq!(
        m.funcs.len(),
        1,
        "{name}: reducer functions are not handled"
    );
    let g = efir_egraph::convert::from_func(&m.funcs[0], &m).unwrap();
    let (g, _, _) = run_rules(g, FAMILIES, 30, 20_000, 60.0);
    let mut text = to_egraph_text(&g);
    text.push_str(&library_used(&library_refs(&g.egraph), &BTreeSet::new()));
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut nodes = Vec::new();
    let mut roots = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(rest) = l.split_once("egraph.node<").map(|p| p.1) {
            // `CLASS, "op", [k, k]> {attrs} : type`
            let class = rest.split(',').next().unwrap().trim().parse().unwrap();
            let open = rest.find('[').unwrap();
            let close = open + rest[open..].find(']').unwrap();
            let kids = rest[open + 1..close]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            nodes.push(Node {
                class,
                kids,
                line: i,
            });
        } else if let Some(rest) = l.split_once("egraph.root<").map(|p| p.1) {
            roots.push(rest.split('>').next().unwrap().trim().parse().unwrap());
        }
    }
    assert!(!nodes.is_empty() && !roots.is_empty(), "{name}");
    Saturated {
        lines,
        nodes,
        roots,
    }
}

/// A random sub-e-graph of `s`: each e-node is deleted with a probability
/// drawn for the case, keeping at least one e-node per e-class; then the
/// e-nodes that can no longer be built (a child class lost all its buildable
/// e-nodes) and the classes the roots no longer reach are dropped. `None`
/// when a root cannot be built. The kept e-nodes and the text.
fn sub_egraph(s: &Saturated, rng: &mut Rng, deleted: (f64, f64)) -> Option<(Vec<usize>, String)> {
    let p = deleted.0 + (deleted.1 - deleted.0) * rng.unit();
    let mut by_class: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, n) in s.nodes.iter().enumerate() {
        by_class.entry(n.class).or_default().push(i);
    }
    let mut keep = vec![false; s.nodes.len()];
    for members in by_class.values() {
        let mut any = false;
        for &i in members {
            keep[i] = rng.unit() >= p;
            any |= keep[i];
        }
        if !any {
            keep[members[rng.below(members.len())]] = true;
        }
    }
    // Buildable classes: a fixpoint from the leaves.
    let mut built: HashSet<i64> = HashSet::new();
    loop {
        let before = built.len();
        for (i, n) in s.nodes.iter().enumerate() {
            if keep[i] && n.kids.iter().all(|k| built.contains(k)) {
                built.insert(n.class);
            }
        }
        if built.len() == before {
            break;
        }
    }
    if !s.roots.iter().all(|r| built.contains(r)) {
        return None;
    }
    for (i, n) in s.nodes.iter().enumerate() {
        keep[i] &= n.kids.iter().all(|k| built.contains(k));
    }
    // Classes the roots reach through kept e-nodes.
    let mut reached: HashSet<i64> = s.roots.iter().copied().collect();
    let mut todo: Vec<i64> = s.roots.clone();
    while let Some(c) = todo.pop() {
        for &i in &by_class[&c] {
            if keep[i] {
                for k in &s.nodes[i].kids {
                    if reached.insert(*k) {
                        todo.push(*k);
                    }
                }
            }
        }
    }
    let kept: Vec<usize> = (0..s.nodes.len())
        .filter(|&i| keep[i] && reached.contains(&s.nodes[i].class))
        .collect();
    let dropped: HashSet<usize> = (0..s.nodes.len())
        .filter(|i| kept.binary_search(i).is_err())
        .map(|i| s.nodes[i].line)
        .collect();
    let mut text = String::new();
    for (i, l) in s.lines.iter().enumerate() {
        if !dropped.contains(&i) {
            text.push_str(l);
            text.push('\n');
        }
    }
    Some((kept, text))
}

#[derive(Default, Debug)]
struct Summary {
    compared: usize,
    several_classes: usize,
    max_classes: usize,
    duplicates: usize,
    unbuildable: usize,
    invalid: usize,
    no_candidates: usize,
    limited: usize,
    /// Cases compared after a sketch, and those where the sketch alone
    /// missed classes (the search after it found them).
    sketched: usize,
    sketch_missed: usize,
    /// Cases in the pass's default space (`Space::VIEWS`) where it left a result
    /// without a program; cases where the whole space was enumerated too,
    /// those where it has classes the default space has not, and of those
    /// the ones where the default space has none (the pass then enumerates
    /// the whole space, warning E0708).
    view_empty: usize,
    view_compared: usize,
    view_lost: usize,
    view_none: usize,
    /// One line per disagreement (its sub-e-graph written to a file).
    disagreements: Vec<String>,
}

/// Compare `early` and `after` on `cases` random sub-e-graphs of the
/// saturated `name`.
fn fuzz(name: &str, cases: usize, deleted: (f64, f64)) -> Summary {
    let start = Instant::now();
    let reg = efir_registry::registry();
    let s = saturated(name);
    let mut seen: HashSet<Vec<usize>> = HashSet::new();
    let mut sum = Summary::default();
    for case in 0..cases {
        let seed = seed().wrapping_add(case as u64);
        let mut rng = Rng::new(
            seed ^ name
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64)),
        );
        let Some((kept, text)) = sub_egraph(&s, &mut rng, deleted) else {
            sum.unbuildable += 1;
            continue;
        };
        if !seen.insert(kept) {
            sum.duplicates += 1;
            continue;
        }
        let (m, d) = parse_and_verify(&text, &reg);
        let Some(g) = d
            .is_empty()
            .then(|| graph_of(&m.funcs[0], &m).ok())
            .flatten()
        else {
            sum.invalid += 1;
            continue;
        };
        // One enumerator for both runs: keys are interned per enumerator.
        // A third of the cases are in the pass's default space
        // (`Space::VIEWS`), the others in the whole space.
        let view = case % 3 == 2;
        let mut en = if view {
            match Enumerator::new_in(&g, Space::VIEWS) {
                Ok(en) => en,
                Err(_) => {
                    sum.view_empty += 1;
                    continue;
                }
            }
        } else {
            Enumerator::new(&g)
        };
        // `after` first: it expands more, and when it stops at a limit the
        // case is skipped without running `early`.
        let after = en.run(
            Mode::After,
            &Limits::time(TIME_LIMIT).with_max_states(MAX_STATES),
        );
        if !after.complete {
            sum.limited += 1;
            continue;
        }
        // The tree of `after`, counted without running it, is the one it
        // expanded.
        let c = en.after_tree(10_000_000, 600.0);
        let counted = c.whole.then_some(c.expanded);
        if counted != Some(after.expanded_states as u128) {
            let path = std::env::temp_dir().join(format!("compact-fuzz-{name}-{seed:x}.efir"));
            let _ = std::fs::write(&path, &text);
            sum.disagreements.push(format!(
                "{name}, seed {seed:#x} (case {case}): after expanded {} partial programs,                  the count of its tree says {counted:?}; the sub-e-graph is in {}",
                after.expanded_states,
                path.display()
            ));
        }
        if view {
            // What the restriction costs on a sub-e-graph: the classes of
            // the whole space that the default space has no program for (it
            // has no class of its own: its programs are programs of the
            // whole space).
            let mut whole = Enumerator::new(&g);
            let all = whole.run(
                Mode::After,
                &Limits::time(TIME_LIMIT).with_max_states(MAX_STATES),
            );
            if all.complete {
                let (tw, tv) = (whole.class_texts(&all), en.class_texts(&after));
                sum.view_compared += 1;
                sum.view_lost += usize::from(tw != tv);
                sum.view_none += usize::from(tv.is_empty() && !tw.is_empty());
                if !tw.is_superset(&tv) {
                    let path =
                        std::env::temp_dir().join(format!("compact-fuzz-{name}-{seed:x}.efir"));
                    let _ = std::fs::write(&path, &text);
                    sum.disagreements.push(format!(
                        "{name}, seed {seed:#x} (case {case}): the default space found a class \
                         the whole space has not; the sub-e-graph is in {}",
                        path.display()
                    ));
                }
            }
        }
        // (Every other case on two threads sharing one record; two cases
        // in four after a sketch, which prunes by canonical form alone.)
        let threads = 1 + case % 2;
        let sketch = if case % 4 >= 2 { TIME_LIMIT / 2.0 } else { 0.0 };
        let early = en.run_sketched(
            Mode::Early,
            &Limits::time(TIME_LIMIT).with_max_states(MAX_STATES),
            threads,
            Duration::from_secs_f64(sketch),
        );
        if !early.complete {
            sum.limited += 1;
            continue;
        }
        if after.candidates.is_empty() && early.candidates.is_empty() {
            sum.no_candidates += 1;
            continue;
        }
        let ke: BTreeSet<u32> = early.keys.iter().copied().collect();
        let ka: BTreeSet<u32> = after.keys.iter().copied().collect();
        if ke != ka {
            let path = std::env::temp_dir().join(format!("compact-fuzz-{name}-{seed:x}.efir"));
            let _ = std::fs::write(&path, &text);
            sum.disagreements.push(format!(
                "{name}, seed {seed:#x} (case {case}): early found {} classes, after {} \
                 ({} only early, {} only after); the sub-e-graph is in {}",
                ke.len(),
                ka.len(),
                ke.difference(&ka).count(),
                ka.difference(&ke).count(),
                path.display()
            ));
        }
        if sketch > 0.0 {
            sum.sketched += 1;
            sum.sketch_missed += usize::from(early.sketch_classes < ka.len());
        }
        sum.compared += 1;
        sum.several_classes += usize::from(ka.len() > 1);
        sum.max_classes = sum.max_classes.max(ka.len());
    }
    report(&format!(
        "compact_fuzz {name}: {cases} cases in {:.1?}: {} compared ({} with several classes, \
         at most {}; {} after a sketch, where the sketch alone missed classes in {}), \
         {} disagree; skipped: {} root unbuildable, {} duplicate, {} invalid, \
         {} without candidates, {} stopped by a limit; in the default space: \
         {} compared with the whole space, which had more classes in {} \
         (in {} of them the default space had none), {} left without a program",
        start.elapsed(),
        sum.compared,
        sum.several_classes,
        sum.max_classes,
        sum.sketched,
        sum.sketch_missed,
        sum.disagreements.len(),
        sum.unbuildable,
        sum.duplicates,
        sum.invalid,
        sum.no_candidates,
        sum.limited,
        sum.view_compared,
        sum.view_lost,
        sum.view_none,
        sum.view_empty
    ));
    sum
}

/// A summary line on stderr (shown with `--nocapture`): how much the
/// fuzzing actually checked.
#[allow(clippy::print_stderr)]
fn report(line: &str) {
    eprintln!("{line}");
}

/// Fuzz `name` (`cases` sub-e-graphs, a fraction of e-nodes in `deleted`
/// deleted from each) and check that `early` and `after` agreed on every
/// case compared, and that at least `compared` cases were compared (both
/// runs finished with candidates), `several` of them with several classes.
fn check(name: &str, cases: usize, deleted: (f64, f64), compared: usize, several: usize) {
    let sum = fuzz(name, cases * multiplier(), deleted);
    assert!(
        sum.disagreements.is_empty(),
        "early and after disagree on {} of {} compared sub-e-graphs:\n{}",
        sum.disagreements.len(),
        sum.compared,
        sum.disagreements.join("\n")
    );
    assert!(
        sum.compared >= compared && sum.several_classes >= several,
        "{name}: too few cases compared: {} ({} with several classes)",
        sum.compared,
        sum.several_classes
    );
}

// The fractions deleted keep most runs under `MAX_STATES`: larger e-graphs
// lose more e-nodes.

#[test]
fn gated_mlp() {
    check("gated_mlp", 400, (0.3, 0.7), 200, 150);
}

#[test]
fn lora() {
    check("lora", 150, (0.5, 0.9), 80, 50);
}

#[test]
fn layernorm_gemm() {
    check("layernorm_gemm", 150, (0.5, 0.9), 80, 50);
}

#[test]
fn ngpt() {
    check("ngpt", 100, (0.3, 0.7), 60, 40);
}

#[test]
fn attn_decode() {
    check("attn_decode", 150, (0.5, 0.9), 60, 40);
}

#[test]
fn attn_prefill() {
    check("attn_prefill", 100, (0.7, 0.95), 50, 30);
}

#[test]
fn rmsnorm_mlp() {
    check("rmsnorm_mlp", 150, (0.5, 0.9), 30, 20);
}

#[test]
fn rmsnorm_swiglu() {
    check("rmsnorm_swiglu", 200, (0.5, 0.9), 30, 20);
}
