//! `--dim n=8,s=64`: sizes of symbolic extents, as `efir-run` (the sizes of
//! random inputs) and `efir-translate` (the representative sizes the static
//! estimate and default blocks assume) read them.

use std::collections::BTreeMap;

/// `specs` (each `NAME=N[,NAME=N...]`; the option may repeat) as sizes by
/// symbol name (without `@` or `|`). A name given twice with two sizes, a
/// part without `=`, or a size that is not a positive integer is an error
/// naming it (a usage error: the tools exit 2).
pub fn parse_dims(specs: &[String]) -> Result<BTreeMap<String, u64>, String> {
    let mut dims = BTreeMap::new();
    for p in specs
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|p| !p.trim().is_empty())
    {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("--dim `{p}` is not NAME=N"))?;
        let k = k
            .trim()
            .trim_start_matches('@')
            .trim_matches('|')
            .trim_start_matches('@');
        let n: u64 = v
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("--dim `{p}`: `{}` is not a positive integer", v.trim()))?;
        if let Some(old) = dims.insert(k.to_string(), n) {
            if old != n {
                return Err(format!("--dim {k} is given twice ({old} and {n})"));
            }
        }
    }
    Ok(dims)
}

#[cfg(test)]
mod tests {
    use super::parse_dims;

    #[test]
    fn names_sizes_and_errors() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let d = parse_dims(&s(&["n=8,|@s|=64", "@m=2", "n=8"])).unwrap();
        assert_eq!(
            d.into_iter().collect::<Vec<_>>(),
            [("m".into(), 2), ("n".into(), 8), ("s".into(), 64)]
        );
        assert!(parse_dims(&s(&["n"]))
            .unwrap_err()
            .contains("is not NAME=N"));
        assert!(parse_dims(&s(&["n=0"]))
            .unwrap_err()
            .contains("positive integer"));
        assert!(parse_dims(&s(&["n=8", "n=9"]))
            .unwrap_err()
            .contains("given twice"));
    }
}
