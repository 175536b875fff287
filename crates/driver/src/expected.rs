//! `--verify-diagnostics`: MLIR-style expectations written in comments,
//! `// expected-error @+1 {{text}}` (also `@-N`, or no `@` for the same
//! line; `expected-warning` likewise). A diagnostic matches when it is on
//! the expected line and `CODE: message` contains the text, so tests can pin
//! error codes: `{{E0301: operand shapes}}`.

use efir_diagnostics::{codes, line_of, Diag, Severity, Span};

/// One expectation.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    /// Error or warning.
    pub severity: Severity,
    /// 1-based line the diagnostic must be on.
    pub line: usize,
    /// Text that `CODE: message` must contain.
    pub text: String,
    /// The comment, for reporting.
    pub span: Span,
}

/// Collect expectations from `src` (spans and lines are relative to it).
pub fn parse_expected(src: &str) -> Result<Vec<Expected>, Diag> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (idx, line) in src.split_inclusive('\n').enumerate() {
        let lineno = idx + 1;
        let here = offset;
        offset += line.len();
        let Some(cpos) = line.find("//") else {
            continue;
        };
        let comment = &line[cpos + 2..];
        for (kw, severity) in [
            ("expected-error", Severity::Error),
            ("expected-warning", Severity::Warning),
        ] {
            let Some(k) = comment.find(kw) else { continue };
            let span = Span::new(here + cpos, here + line.trim_end().len());
            let rest = comment[k + kw.len()..].trim_start();
            let (target, rest) = if let Some(r) = rest.strip_prefix('@') {
                let end = r
                    .find(|c: char| c.is_whitespace() || c == '{')
                    .unwrap_or(r.len());
                let n: i64 = r[..end].parse().map_err(|_| {
                    Diag::error(
                        codes::E0106,
                        format!("bad line offset `@{}`", &r[..end]),
                        span,
                    )
                    .with_label("expected @+N or @-N")
                })?;
                // Checked: `@+9223372036854775807` wrapped around to a
                // line before the first (issue 30).
                ((lineno as i64).checked_add(n), r[end..].trim_start())
            } else {
                (Some(lineno as i64), rest)
            };
            let text = rest
                .strip_prefix("{{")
                .and_then(|r| r.find("}}").map(|e| r[..e].to_string()))
                .ok_or_else(|| {
                    Diag::error(
                        codes::E0106,
                        format!("`{kw}` needs a message in {{{{...}}}}"),
                        span,
                    )
                    .with_label("malformed expectation")
                })?;
            // A diagnostic at the very end of the input is on the line
            // after the last newline.
            let last = src.split_inclusive('\n').count() as i64 + 1;
            let line = match target {
                Some(t) if t < 1 => {
                    return Err(Diag::error(
                        codes::E0106,
                        "expectation points before line 1",
                        span,
                    ))
                }
                Some(t) if t <= last => t as usize,
                _ => {
                    return Err(Diag::error(
                        codes::E0106,
                        "expectation points past the end of the input",
                        span,
                    ))
                }
            };
            out.push(Expected {
                severity,
                line,
                text,
                span,
            });
        }
    }
    Ok(out)
}

/// Match diagnostics against expectations. Returns the problems: expected
/// diagnostics that did not appear (`E0106`), and diagnostics that were not
/// expected. `line_offset` is the number of lines before `src` in the whole
/// file (for messages).
pub fn check(src: &str, line_offset: usize, expected: &[Expected], diags: &[Diag]) -> Vec<Diag> {
    let mut used = vec![false; expected.len()];
    let mut problems = Vec::new();
    for d in diags {
        let line = line_of(src, d.span.start as usize);
        let text = d.coded_message();
        let found = expected.iter().enumerate().position(|(i, e)| {
            !used[i] && e.severity == d.severity && e.line == line && text.contains(&e.text)
        });
        match found {
            Some(i) => used[i] = true,
            None => {
                let mut u = d.clone();
                u.message = format!("unexpected diagnostic: {}", d.message);
                problems.push(u);
            }
        }
    }
    for (e, u) in expected.iter().zip(used) {
        if !u {
            problems.push(
                Diag::error(
                    codes::E0106,
                    format!(
                        "expected diagnostic on line {} was not produced: {}",
                        e.line + line_offset,
                        e.text
                    ),
                    e.span,
                )
                .with_label("no matching diagnostic"),
            );
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_offsets_and_matches() {
        let src =
            "// expected-error @+1 {{E0201: use of undefined}}\nx\ny // expected-error {{boom}}\n";
        let ex = parse_expected(src).unwrap();
        assert_eq!(ex.len(), 2);
        assert_eq!(ex[0].line, 2);
        assert_eq!(ex[1].line, 3);
        let d1 = Diag::error("E0201", "use of undefined value", Span::new(50, 51));
        let d2 = Diag::error("E0100", "boom", Span::new(52, 53));
        assert!(check(src, 0, &ex, &[d1.clone(), d2]).is_empty());
        // A missing diagnostic and a wrong code are both reported.
        let probs = check(
            src,
            0,
            &ex,
            &[Diag::error("E0999", "use of undefined value", d1.span)],
        );
        assert_eq!(probs.len(), 3);
    }

    #[test]
    fn malformed_expectation() {
        assert!(parse_expected("// expected-error @x {{a}}\n").is_err());
        assert!(parse_expected("// expected-error oops\n").is_err());
    }
}
