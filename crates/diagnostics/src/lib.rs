//! Diagnostics for efir: errors with byte spans, stable error codes and
//! labels, collected in a [`DiagSink`] by library code and rendered with
//! `codespan-reporting` only by the tools.
//!
//! Every error code is listed in [`codes`] with a one-line explanation; the
//! long explanations live in `docs/errors.md`.

pub mod codes;

use codespan_reporting::diagnostic::{Diagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor};
use std::ops::Range;

/// A byte range into one source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from byte offsets.
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end.max(start) as u32,
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// Shift by `offset` bytes (used when a file is split into cases).
    pub fn shifted(self, offset: usize) -> Span {
        Span {
            start: self.start + offset as u32,
            end: self.end + offset as u32,
        }
    }

    /// As a `usize` range.
    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The input is invalid; the tool exits with 1.
    Error,
    /// Suspicious but valid input.
    Warning,
    /// Extra information attached to a location.
    Note,
}

/// A secondary label: a span with a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondaryLabel {
    /// Where.
    pub span: Span,
    /// What to say there.
    pub message: String,
}

/// One diagnostic: a code, a message, a primary span and optional labels
/// and notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    /// Error, warning or note.
    pub severity: Severity,
    /// Stable error code such as `E0201` (see [`codes`]).
    pub code: &'static str,
    /// The headline.
    pub message: String,
    /// The primary location.
    pub span: Span,
    /// The text under the primary location.
    pub label: String,
    /// Other locations.
    pub secondary: Vec<SecondaryLabel>,
    /// Notes printed after the snippet.
    pub notes: Vec<String>,
}

impl Diag {
    /// A new error with code, message and primary span.
    pub fn error(code: &'static str, message: impl Into<String>, span: Span) -> Diag {
        Diag {
            severity: Severity::Error,
            code,
            message: message.into(),
            span,
            label: String::new(),
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A new warning.
    pub fn warning(code: &'static str, message: impl Into<String>, span: Span) -> Diag {
        Diag {
            severity: Severity::Warning,
            ..Diag::error(code, message, span)
        }
    }

    /// Set the primary label's text.
    pub fn with_label(mut self, label: impl Into<String>) -> Diag {
        self.label = label.into();
        self
    }

    /// Add a secondary label.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diag {
        self.secondary.push(SecondaryLabel {
            span,
            message: message.into(),
        });
        self
    }

    /// Add a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Diag {
        self.notes.push(note.into());
        self
    }

    /// Shift every span by `offset` bytes.
    pub fn shifted(mut self, offset: usize) -> Diag {
        self.span = self.span.shifted(offset);
        for s in &mut self.secondary {
            s.span = s.span.shifted(offset);
        }
        self
    }

    /// `E0201: message`, the text that `--verify-diagnostics` matches.
    pub fn coded_message(&self) -> String {
        format!("{}: {}", self.code, self.message)
    }
}

/// Collects diagnostics; library code pushes here instead of printing.
#[derive(Debug, Default)]
pub struct DiagSink {
    diags: Vec<Diag>,
}

impl DiagSink {
    /// An empty sink.
    pub fn new() -> DiagSink {
        DiagSink::default()
    }

    /// Record one diagnostic.
    pub fn push(&mut self, d: Diag) {
        self.diags.push(d);
    }

    /// Record several.
    pub fn extend(&mut self, ds: impl IntoIterator<Item = Diag>) {
        self.diags.extend(ds);
    }

    /// Whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        self.diags.iter().any(|d| d.severity == Severity::Error)
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// All diagnostics in the order recorded.
    pub fn diags(&self) -> &[Diag] {
        &self.diags
    }

    /// Take all diagnostics out.
    pub fn take(&mut self) -> Vec<Diag> {
        std::mem::take(&mut self.diags)
    }
}

/// Render diagnostics against a source file as text (`color` adds ANSI
/// escapes).
pub fn render(file_name: &str, source: &str, diags: &[Diag], color: bool) -> String {
    let file = SimpleFile::new(file_name, source);
    let mut buf = if color {
        termcolor::Buffer::ansi()
    } else {
        termcolor::Buffer::no_color()
    };
    let config = term::Config::default();
    for d in diags {
        let len = source.len();
        let clamp = |s: Span| -> Range<usize> {
            let start = (s.start as usize).min(len);
            let end = (s.end as usize).clamp(start, len);
            // Keep the range on char boundaries so that rendering never fails.
            let start = floor_boundary(source, start);
            let end = floor_boundary(source, end).max(start);
            start..end
        };
        let mut labels = vec![Label::primary((), clamp(d.span)).with_message(d.label.clone())];
        for s in &d.secondary {
            labels.push(Label::secondary((), clamp(s.span)).with_message(s.message.clone()));
        }
        let severity = match d.severity {
            Severity::Error => CsSeverity::Error,
            Severity::Warning => CsSeverity::Warning,
            Severity::Note => CsSeverity::Note,
        };
        let cd = Diagnostic::new(severity)
            .with_code(d.code)
            .with_message(d.message.clone())
            .with_labels(labels)
            .with_notes(d.notes.clone());
        if term::emit(&mut buf, &config, &file, &cd).is_err() {
            // Rendering only fails on bad spans, which `clamp` rules out;
            // fall back to a plain line rather than losing the error.
            let line = format!("error[{}]: {}\n", d.code, d.message);
            use std::io::Write;
            let _ = buf.write_all(line.as_bytes());
        }
    }
    String::from_utf8_lossy(buf.as_slice()).into_owned()
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// 1-based line number of a byte offset.
pub fn line_of(source: &str, offset: usize) -> usize {
    let offset = floor_boundary(source, offset.min(source.len()));
    source[..offset].bytes().filter(|&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_code_line_and_label() {
        let src = "func @f() {\n  %0 = ew.bogus\n}\n";
        let d = Diag::error("E0202", "unknown op `ew.bogus`", Span::new(19, 27))
            .with_label("not registered");
        let out = render("a.efir", src, &[d], false);
        assert!(out.contains("error[E0202]: unknown op `ew.bogus`"), "{out}");
        assert!(out.contains("a.efir:2:8"), "{out}");
        assert!(out.contains("not registered"), "{out}");
    }

    #[test]
    fn out_of_range_spans_do_not_panic() {
        let src = "héllo";
        let d = Diag::error("E0100", "x", Span::new(2, 999));
        let out = render("a.efir", src, &[d], false);
        assert!(out.contains("E0100"));
    }

    #[test]
    fn line_numbers() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 4), 3);
    }
}
