//! `--split-input-file`: cases separated by lines `// -----`, each with its
//! byte offset in the whole file so that diagnostics point at the right
//! line.

/// The separator line between cases.
pub const SEPARATOR: &str = "// -----";

/// One case of a split file.
#[derive(Clone, Debug, PartialEq)]
pub struct Case<'a> {
    /// Its text.
    pub text: &'a str,
    /// Byte offset of `text` in the whole file.
    pub offset: usize,
}

/// Split `src` at separator lines (the separator lines belong to no case).
pub fn split(src: &str) -> Vec<Case<'_>> {
    let mut cases = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    for line in src.split_inclusive('\n') {
        if line.trim_end().starts_with(SEPARATOR) && line.trim_start().starts_with("//") {
            cases.push(Case {
                text: &src[start..pos],
                offset: start,
            });
            start = pos + line.len();
        }
        pos += line.len();
    }
    cases.push(Case {
        text: &src[start..],
        offset: start,
    });
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_with_offsets() {
        let src = "a\n// -----\nb\nc\n// -----\n";
        let cs = split(src);
        assert_eq!(cs.len(), 3);
        assert_eq!(cs[0].text, "a\n");
        assert_eq!(cs[1].text, "b\nc\n");
        assert_eq!(&src[cs[1].offset..cs[1].offset + 1], "b");
        assert_eq!(cs[2].text, "");
    }
}
