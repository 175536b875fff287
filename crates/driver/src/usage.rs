//! Command-line usage errors of efir's tools: an unknown flag gets a "did
//! you mean" for the nearest flag the tool knows (clap's own flags, and for
//! `efir-opt` the registered passes, which clap does not know), never
//! clap's `-- --flag` tip (that would pass the flag as the input file).
//! Usage errors exit 2, `--help` and `--version` 0.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::process::ExitCode;

/// Levenshtein distance between `a` and `b` (in chars).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate nearest to `word`, if near enough to be a typo: at most
/// one edit per three chars of `word` (at least one, at most three), or
/// `word` a prefix of it of at least three chars. Ties go to the first.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let n = word.chars().count();
    let limit = (n / 3).clamp(1, 3);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = if n >= 3 && c.starts_with(word) {
            1
        } else {
            edit_distance(word, c)
        };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// `err` for `cmd` with a better hint where it is an unknown flag: the
/// nearest of `cmd`'s long flags and `extra` (flag names without `--`, such
/// as pass names) as "a similar argument exists"; else the tip to see
/// `--help`. Other errors are returned as they
/// are.
pub fn improve(err: clap::Error, cmd: &clap::Command, extra: &[&str]) -> clap::Error {
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg).cloned() else {
        return err;
    };
    let mut new = clap::Error::new(ErrorKind::UnknownArgument).with_cmd(cmd);
    new.insert(ContextKind::InvalidArg, ContextValue::String(arg.clone()));
    let known: Vec<&str> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long())
        .chain(["help", "version"])
        .chain(extra.iter().copied())
        .collect();
    // clap names the flag without its `=value`.
    let suggestion = arg
        .strip_prefix("--")
        .and_then(|name| closest(name, known.iter().copied()))
        .map(|c| format!("--{c}"));
    match suggestion {
        Some(s) => {
            new.insert(ContextKind::SuggestedArg, ContextValue::String(s));
        }
        None => {
            let tip = format!(
                "`{} --help` lists the {}",
                cmd.get_name(),
                if extra.is_empty() {
                    "flags"
                } else {
                    "flags and passes"
                }
            );
            new.insert(
                ContextKind::Suggested,
                ContextValue::StyledStrs(vec![tip.into()]),
            );
        }
    }
    if let Some(usage) = err.get(ContextKind::Usage).cloned() {
        new.insert(ContextKind::Usage, usage);
    }
    new
}

/// Parse a tool's arguments with clap (`P`), or print the usage error
/// ([`improve`]d; `extra` as there) or the help and return the exit code:
/// 2 for a usage error, 0 for `--help` and `--version`.
pub fn parse<P: clap::Parser>(
    args: impl IntoIterator<Item = String>,
    extra: &[&str],
) -> Result<P, ExitCode> {
    P::try_parse_from(args).map_err(|e| {
        let e = improve(e, &P::command(), extra);
        let _ = e.print();
        if e.use_stderr() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_flag() {
        assert_eq!(edit_distance("saturat", "saturate"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let c = ["saturate", "compact", "canonicalize", "print-generic"];
        assert_eq!(closest("saturat", c), Some("saturate"));
        assert_eq!(closest("satruate", c), Some("saturate"));
        assert_eq!(closest("canonicalise", c), Some("canonicalize"));
        assert_eq!(closest("compat", c), Some("compact"));
        assert_eq!(closest("print", c), Some("print-generic"));
        assert_eq!(closest("bogus", c), None);
        assert_eq!(closest("x", c), None);
    }

    #[derive(clap::Parser, Debug)]
    #[command(name = "tool")]
    struct Cli {
        #[arg(default_value = "-")]
        input: String,
        #[arg(long)]
        print_generic: bool,
    }

    fn message(args: &[&str], extra: &[&str]) -> String {
        use clap::{CommandFactory, Parser};
        let e = Cli::try_parse_from(args.iter().copied()).unwrap_err();
        improve(e, &Cli::command(), extra).to_string()
    }

    #[test]
    fn unknown_flags_get_a_suggestion_and_never_the_trailing_tip() {
        let m = message(&["tool", "--saturat"], &["saturate"]);
        assert!(m.contains("unexpected argument '--saturat' found"), "{m}");
        assert!(
            m.contains("tip: a similar argument exists: '--saturate'"),
            "{m}"
        );
        assert!(!m.contains("-- --saturat"), "{m}");
        let m = message(&["tool", "--compat=max-candidates=8"], &["compact"]);
        assert!(m.contains("a similar argument exists: '--compact'"), "{m}");
        let m = message(&["tool", "--print-generc"], &[]);
        assert!(
            m.contains("a similar argument exists: '--print-generic'"),
            "{m}"
        );
        let m = message(&["tool", "--bogus"], &["saturate"]);
        assert!(
            m.contains("tip: `tool --help` lists the flags and passes"),
            "{m}"
        );
        assert!(!m.contains("-- --bogus") && !m.contains("similar"), "{m}");
        assert!(m.contains("Usage: tool"), "{m}");
    }
}
