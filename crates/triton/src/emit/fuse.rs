//! Sibling loop fusion over a kernel scope's statements.
//!
//! The emitter makes one loop per parallel reduction, where it is asked for:
//! two reductions over the same axis (the gate and up projections of an MLP,
//! the statistics of a norm) come out as two loops one after the other, each
//! loading the shared operand again. Here two loops with the same header in
//! one scope become one, when the later one reads nothing that the earlier
//! one (or what depends on it) writes: the statements between them that the
//! later loop needs move before the merged loop, the others after it. In the
//! merged body, a load or offset computed twice from the same inputs is
//! computed once.
//!
//! Statements are the emitted lines (Python, four spaces an indent); a name
//! is an identifier token not preceded by `.` and outside quotes. Every
//! value the emitter names is fresh except loop offsets (redefined the same
//! way by each loop over their axis) and accumulators (initialised outside a
//! loop, updated inside), which the dependence test below accounts for.

use std::collections::{HashMap, HashSet};

/// One statement: its first line and the lines under it (a loop's or an
/// `if`'s body, and an `else:` with its body), without indentation change.
#[derive(Clone, Debug)]
struct Stmt {
    lines: Vec<String>,
}

fn indent(l: &str) -> usize {
    l.len() - l.trim_start_matches(' ').len()
}

fn split(lines: &[String]) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::new();
    for l in lines {
        let continues = indent(l) > 0 || l.starts_with("else:") || l.starts_with("elif ");
        match out.last_mut() {
            Some(s) if continues => s.lines.push(l.clone()),
            _ => out.push(Stmt {
                lines: vec![l.clone()],
            }),
        }
    }
    out
}

/// The tokens of a line: `(start, end, name)` spans covering it, where
/// `name` marks an identifier that is a name (not an attribute after `.`,
/// not inside quotes, not part of a number).
fn tokens(l: &str) -> Vec<(usize, usize, bool)> {
    let b = l.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let (s, c) = (i, b[i]);
        let mut name = false;
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            i += 1;
        } else if c == b'\'' || c == b'"' {
            quote = Some(c);
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || b[i] == b'_'
                    || (c.is_ascii_digit() && b[i] == b'.'))
            {
                i += 1;
            }
            let attr = s > 0 && b[s - 1] == b'.';
            name = !c.is_ascii_digit() && !attr;
        } else {
            i += 1;
        }
        out.push((s, i, name));
    }
    out
}

/// The names of a line, in order.
fn names(l: &str) -> Vec<String> {
    tokens(l)
        .into_iter()
        .filter(|t| t.2)
        .map(|(s, e, _)| l[s..e].to_string())
        .collect()
}

/// `NAME = EXPR` at the start of a (trimmed) line.
fn assignment(l: &str) -> Option<(&str, &str)> {
    let t = l.trim_start();
    let (lhs, rhs) = t.split_once(" = ")?;
    let ok = !lhs.is_empty()
        && lhs.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        && !lhs.as_bytes()[0].is_ascii_digit();
    ok.then_some((lhs, rhs))
}

fn for_var(l: &str) -> Option<&str> {
    let t = l.trim_start().strip_prefix("for ")?;
    t.split_once(" in ").map(|(v, _)| v)
}

/// Names a statement assigns, and names it reads before assigning them.
fn effects(s: &Stmt) -> (HashSet<String>, HashSet<String>) {
    let mut defs = HashSet::new();
    let mut free = HashSet::new();
    for l in &s.lines {
        let (target, reads) = if let Some((lhs, rhs)) = assignment(l) {
            (Some(lhs.to_string()), names(rhs))
        } else if let Some(v) = for_var(l) {
            let rest = l.trim_start().split_once(" in ").map_or("", |x| x.1);
            (Some(v.to_string()), names(rest))
        } else {
            (None, names(l))
        };
        for n in reads {
            if !defs.contains(&n) {
                free.insert(n);
            }
        }
        if let Some(t) = target {
            defs.insert(t);
        }
    }
    (defs, free)
}

fn is_loop(s: &Stmt) -> bool {
    s.lines[0].starts_with("for ")
}

/// Replace whole names (not attributes) by their renames.
fn rename(l: &str, map: &HashMap<String, String>) -> String {
    if map.is_empty() {
        return l.to_string();
    }
    tokens(l)
        .into_iter()
        .map(|(s, e, name)| match map.get(&l[s..e]) {
            Some(r) if name => r.as_str(),
            _ => &l[s..e],
        })
        .collect()
}

/// Value numbering over a loop body's statements: a single-line assignment
/// whose right side (over the current versions of its names) was computed
/// before into a name not assigned since is dropped, and its name renamed to
/// the earlier one. `outer` holds names defined outside the body (never
/// renamed).
fn cse(body: Vec<String>, outer: &HashSet<String>) -> Vec<String> {
    let stmts = split(&body);
    // Names read before they are assigned (accumulators) live outside too.
    let (_, free) = effects(&Stmt {
        lines: body.clone(),
    });
    let outer: HashSet<&str> = outer.iter().chain(&free).map(String::as_str).collect();
    let mut assigned: HashMap<String, usize> = HashMap::new();
    for s in &stmts {
        for l in &s.lines {
            if let Some((lhs, _)) = assignment(l) {
                *assigned.entry(lhs.to_string()).or_default() += 1;
            }
        }
    }
    let mut version: HashMap<String, usize> = HashMap::new();
    let mut seen: HashMap<String, (String, usize)> = HashMap::new();
    let mut map: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    for s in stmts {
        let lines: Vec<String> = s.lines.iter().map(|l| rename(l, &map)).collect();
        if lines.len() == 1 {
            if let Some((lhs, rhs)) = assignment(&lines[0]) {
                let key: Vec<String> = names(rhs)
                    .into_iter()
                    .map(|n| format!("{n}#{}", version.get(&n).copied().unwrap_or(0)))
                    .collect();
                let key = format!("{rhs}|{}", key.join(","));
                if let Some((prev, ver)) = seen.get(&key) {
                    let current = version.get(prev).copied().unwrap_or(0) == *ver;
                    if current && prev == lhs {
                        continue;
                    }
                    let once = assigned.get(lhs).copied() == Some(1) && !outer.contains(lhs);
                    if current && once {
                        map.insert(lhs.to_string(), prev.clone());
                        continue;
                    }
                }
                let v = version.entry(lhs.to_string()).or_default();
                *v += 1;
                seen.insert(key, (lhs.to_string(), *v));
                out.push(lines[0].clone());
                continue;
            }
        }
        let (defs, _) = effects(&Stmt {
            lines: lines.clone(),
        });
        for d in defs {
            *version.entry(d).or_default() += 1;
        }
        out.extend(lines);
    }
    out
}

fn body(s: &Stmt) -> Vec<String> {
    s.lines[1..]
        .iter()
        .map(|l| l.strip_prefix("    ").unwrap_or(l).to_string())
        .collect()
}

/// Try to merge loop `j` into the earlier loop `i` of `stmts` (same header).
fn merge(stmts: &[Stmt], i: usize, j: usize) -> Option<Vec<Stmt>> {
    let eff: Vec<(HashSet<String>, HashSet<String>)> = stmts.iter().map(effects).collect();
    let (di, fi) = &eff[i];
    let (dj, fj) = &eff[j];
    // The statements between the loops that the later one needs.
    let mut wanted: HashSet<String> = fj.clone();
    let mut need = vec![false; j];
    for m in (i + 1..j).rev() {
        if eff[m].0.iter().any(|d| wanted.contains(d)) {
            need[m] = true;
            wanted.extend(eff[m].1.iter().cloned());
        }
    }
    // Nothing the later loop needs comes from the earlier loop.
    if di.iter().any(|d| wanted.contains(d)) {
        return None;
    }
    // The later loop writes nothing the earlier one reads.
    if dj.iter().any(|d| fi.contains(d)) {
        return None;
    }
    for m in i + 1..j {
        let (dm, fm) = &eff[m];
        if need[m] {
            // Moved before the earlier loop: it must not touch its names.
            if dm.iter().any(|d| fi.contains(d) || di.contains(d)) {
                return None;
            }
        } else if dj.iter().any(|d| fm.contains(d) || dm.contains(d)) {
            // Moved after the later loop: that loop must not change it.
            return None;
        }
    }
    let mut outer: HashSet<String> = HashSet::new();
    for (k, (d, _)) in eff.iter().enumerate() {
        if k != i && k != j {
            outer.extend(d.iter().cloned());
        }
    }
    outer.extend(fi.iter().cloned());
    outer.extend(fj.iter().cloned());
    let mut merged_body = body(&stmts[i]);
    merged_body.extend(body(&stmts[j]));
    let merged_body = cse(fuse_loops(merged_body), &outer);
    let mut lines = vec![stmts[i].lines[0].clone()];
    lines.extend(merged_body.into_iter().map(|l| format!("    {l}")));
    let mut out: Vec<Stmt> = stmts[..i].to_vec();
    out.extend((i + 1..j).filter(|m| need[*m]).map(|m| stmts[m].clone()));
    out.push(Stmt { lines });
    out.extend((i + 1..j).filter(|m| !need[*m]).map(|m| stmts[m].clone()));
    out.extend(stmts[j + 1..].iter().cloned());
    Some(out)
}

/// One scope's statements (unindented) with sibling loops fused, values
/// computed twice computed once (see [`cse`]) and loads moved past loops to
/// where they are read (see [`sink_loads`]).
pub(super) fn optimize(lines: Vec<String>) -> Vec<String> {
    sink_loads(cse(fuse_loops(lines), &HashSet::new()))
}

/// Whether a statement writes memory or orders it (a load may not move
/// across it).
fn touches_memory(s: &Stmt) -> bool {
    s.lines.iter().any(|l| {
        l.contains("tl.store(") || l.contains("tl.atomic_") || l.contains("tl.debug_barrier(")
    })
}

/// Move each load (`x = tl.load(...)`, one line) that is first read after a
/// loop of its scope down to just before the statement that first reads it,
/// where no statement it crosses assigns a name it reads or writes memory.
/// A residual added after a matmul's K loop is then loaded after the loop,
/// so its tile does not hold registers through the loop (where, with the
/// accumulator, it made the loop spill).
fn sink_loads(lines: Vec<String>) -> Vec<String> {
    let mut stmts = split(&lines);
    for i in (0..stmts.len()).rev() {
        if stmts[i].lines.len() != 1 {
            continue;
        }
        let Some((lhs, rhs)) = assignment(&stmts[i].lines[0]) else {
            continue;
        };
        if !rhs.starts_with("tl.load(") {
            continue;
        }
        let lhs = lhs.to_string();
        let (_, free) = effects(&stmts[i]);
        let mut crossed_loop = false;
        let mut to = None;
        for (r, s) in stmts.iter().enumerate().skip(i + 1) {
            let (defs, reads) = effects(s);
            if reads.contains(&lhs) || defs.contains(&lhs) {
                to = Some(r);
                break;
            }
            if touches_memory(s) || defs.iter().any(|d| free.contains(d)) {
                break;
            }
            crossed_loop |= is_loop(s);
        }
        if let (Some(r), true) = (to, crossed_loop) {
            let s = stmts.remove(i);
            stmts.insert(r - 1, s);
        }
    }
    stmts.into_iter().flat_map(|s| s.lines).collect()
}

/// Fuse sibling loops with the same header among `lines` (one scope's
/// statements, unindented), as often as possible.
fn fuse_loops(lines: Vec<String>) -> Vec<String> {
    let mut stmts = split(&lines);
    'again: loop {
        for j in 0..stmts.len() {
            if !is_loop(&stmts[j]) {
                continue;
            }
            let header = &stmts[j].lines[0];
            if let Some(i) = (0..j).rev().find(|i| stmts[*i].lines[0] == *header) {
                if let Some(s) = merge(&stmts, i, j) {
                    stmts = s;
                    continue 'again;
                }
            }
        }
        break;
    }
    stmts.into_iter().flat_map(|s| s.lines).collect()
}

/// A kernel's lines without the statements whose values nothing reads, to
/// a fixpoint: an assignment `x = ...` where no other statement reads `x`,
/// and an `if` (with its `else`) whose branches only make such
/// assignments (a product's `tl.dot` and its fallback, where the product
/// was absorbed into an accumulator's update; a load that a direct matrix
/// load replaced, see [`direct`](super::direct)). Lines inside an `if` are
/// removed only with their whole statement; a loop whose body empties keeps
/// a `pass`.
pub(super) fn dead_code(mut lines: Vec<String>) -> Vec<String> {
    let branch = |l: &str| {
        let t = l.trim_start();
        t == "else:" || t.starts_with("elif ")
    };
    loop {
        let mut reads: HashSet<String> = HashSet::new();
        for l in &lines {
            let r = match assignment(l) {
                Some((_, rhs)) => names(rhs),
                None => names(l),
            };
            reads.extend(r);
        }
        let dead = |l: &str| assignment(l).is_some_and(|(t, _)| !reads.contains(t));
        let mut out: Vec<String> = Vec::with_capacity(lines.len());
        let mut changed = false;
        let mut i = 0;
        while i < lines.len() {
            let l = &lines[i];
            let ind = indent(l);
            let t = l.trim_start();
            if t.starts_with("if ") && t.ends_with(':') {
                let mut j = i + 1;
                while j < lines.len()
                    && (indent(&lines[j]) > ind || (indent(&lines[j]) == ind && branch(&lines[j])))
                {
                    j += 1;
                }
                let body: Vec<&String> = lines[i + 1..j]
                    .iter()
                    .filter(|x| !(indent(x) == ind && branch(x)))
                    .collect();
                if !body.is_empty() && body.iter().all(|x| dead(x)) {
                    changed = true;
                } else {
                    out.extend(lines[i..j].iter().cloned());
                }
                i = j;
                continue;
            }
            if dead(l) {
                changed = true;
            } else {
                out.push(l.clone());
            }
            i += 1;
        }
        lines = out;
        if !changed {
            break;
        }
    }
    // A loop (or branch) whose body is gone keeps a `pass`.
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    for (i, l) in lines.iter().enumerate() {
        out.push(l.clone());
        if l.trim_end().ends_with(':') {
            let deeper = lines.get(i + 1).is_some_and(|n| indent(n) > indent(l));
            if !deeper {
                out.push(format!("{}    pass", " ".repeat(indent(l))));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn sibling_reductions_share_one_loop_and_their_loads() {
        let src = v("acc1 = tl.zeros([4], dtype=tl.float32)
for i_k in range(0, NT_k):
    offs_k = i_k * BLOCK_k + tl.arange(0, BLOCK_k)
    x2 = tl.load(p_x + offs_k)
    x3 = tl.load(p_a + offs_k)
    acc1 = tl.dot(x2, x3, acc1)
r4 = (acc1).to(tl.float16)
acc5 = tl.zeros([4], dtype=tl.float32)
for i_k in range(0, NT_k):
    offs_k = i_k * BLOCK_k + tl.arange(0, BLOCK_k)
    x6 = tl.load(p_x + offs_k)
    x7 = tl.load(p_b + offs_k)
    acc5 = tl.dot(x6, x7, acc5)
r8 = r4 * (acc5).to(tl.float16)");
        let got = fuse_loops(src).join("\n");
        let want = "acc1 = tl.zeros([4], dtype=tl.float32)
acc5 = tl.zeros([4], dtype=tl.float32)
for i_k in range(0, NT_k):
    offs_k = i_k * BLOCK_k + tl.arange(0, BLOCK_k)
    x2 = tl.load(p_x + offs_k)
    x3 = tl.load(p_a + offs_k)
    acc1 = tl.dot(x2, x3, acc1)
    x7 = tl.load(p_b + offs_k)
    acc5 = tl.dot(x2, x7, acc5)
r4 = (acc1).to(tl.float16)
r8 = r4 * (acc5).to(tl.float16)";
        assert_eq!(got, want);
    }

    #[test]
    fn loads_read_after_a_loop_move_past_it() {
        let src = v("x1 = tl.load(p_r + offs)
c2 = tl.load(p_c + offs)
acc3 = tl.zeros([4], dtype=tl.float32)
for i_k in range(0, NT_k):
    a4 = tl.load(p_a + i_k)
    acc3 = acc3 + a4 * c2
r5 = (acc3).to(tl.float16)
v6 = x1 + r5
tl.store(p_o + offs, v6)");
        let want = "c2 = tl.load(p_c + offs)
acc3 = tl.zeros([4], dtype=tl.float32)
for i_k in range(0, NT_k):
    a4 = tl.load(p_a + i_k)
    acc3 = acc3 + a4 * c2
r5 = (acc3).to(tl.float16)
x1 = tl.load(p_r + offs)
v6 = x1 + r5
tl.store(p_o + offs, v6)";
        assert_eq!(optimize(src).join("\n"), want);
        // Not past a store, nor past a statement that changes what it reads.
        let src = v("x1 = tl.load(p_r + offs)
for i_k in range(0, NT_k):
    tl.store(p_r + offs, y)
z = x1");
        assert_eq!(optimize(src.clone()), src);
        let src = v("x1 = tl.load(p_r + offs)
for i_k in range(0, NT_k):
    offs = i_k
z = x1");
        assert_eq!(optimize(src.clone()), src);
    }

    #[test]
    fn a_loop_that_reads_the_earlier_result_stays_apart() {
        let src = v("acc1 = tl.zeros([4], dtype=tl.float32)
for i_k in range(0, NT_k):
    x2 = tl.load(p_x + i_k)
    acc1 = acc1 + x2
m3 = acc1 * 2.0
acc4 = tl.zeros([4], dtype=tl.float32)
for i_k in range(0, NT_k):
    x5 = tl.load(p_x + i_k)
    acc4 = acc4 + x5 * m3");
        assert_eq!(fuse_loops(src.clone()), src);
    }

    #[test]
    fn accumulators_updated_twice_are_not_merged_away() {
        // Two updates of one accumulator look alike but are not the same value.
        let src = v("for i_k in range(0, NT_k):
    acc1 = acc1 + x
    acc1 = acc1 + x");
        assert_eq!(fuse_loops(src.clone()), src);
    }

    #[test]
    fn names_in_strings_and_attributes_are_not_names() {
        assert_eq!(
            names("m = tl.maximum(a, float('-inf')) + b.x"),
            vec!["m", "tl", "a", "float", "b"]
        );
        let mut map = HashMap::new();
        map.insert("x".to_string(), "y".to_string());
        assert_eq!(rename("z = x + a.x + 'x'", &map), "z = y + a.x + 'x'");
    }

    #[test]
    fn dead_code_removes_unread_values_to_a_fixpoint() {
        let ls = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let out = dead_code(ls(&[
            "a = tl.load(p)",
            "b = a * 2",
            "c = b + 1",
            "if (X >= 16):",
            "    d = tl.dot(a, a)",
            "else:",
            "    d = tl.sum(a)",
            "for i in range(0, 4):",
            "    e = a + 1",
            "    acc = acc + a",
            "tl.store(q, acc)",
        ]));
        assert_eq!(
            out,
            ls(&[
                "a = tl.load(p)",
                "for i in range(0, 4):",
                "    acc = acc + a",
                "tl.store(q, acc)",
            ])
        );
        // A loop whose body empties keeps a `pass`; a branch that something
        // reads stays whole.
        let out = dead_code(ls(&[
            "for i in range(0, 4):",
            "    e = 1",
            "if F:",
            "    x = 1",
            "else:",
            "    x = 2",
            "tl.store(q, x)",
        ]));
        assert_eq!(
            out,
            ls(&[
                "for i in range(0, 4):",
                "    pass",
                "if F:",
                "    x = 1",
                "else:",
                "    x = 2",
                "tl.store(q, x)",
            ])
        );
    }
}
