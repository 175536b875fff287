//! Attribute values: literals, symbols, words, arrays, types and attribute
//! terms such as reducers (`#red.prod<#red.max, #red.sum>`).

use efir_syntax::literal::{format_float, quote};
use std::fmt;
use std::hash::{Hash, Hasher};

pub use crate::types::Attr;

impl Attr {
    /// A term without arguments, `#name`.
    pub fn term(name: &str) -> Attr {
        Attr::Term(name.to_string(), Vec::new())
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Attr::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The number (ints widen to floats).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Attr::Int(i) => Some(*i as f64),
            Attr::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The symbol name, if this is one.
    pub fn as_symbol(&self) -> Option<&str> {
        match self {
            Attr::Symbol(s) => Some(s),
            _ => None,
        }
    }

    /// The word, if this is one.
    pub fn as_word(&self) -> Option<&str> {
        match self {
            Attr::Word(s) => Some(s),
            _ => None,
        }
    }

    /// The integers of an array of integers.
    pub fn as_int_array(&self) -> Option<Vec<i64>> {
        match self {
            Attr::Array(v) => v.iter().map(Attr::as_int).collect(),
            _ => None,
        }
    }

    fn key(&self) -> AttrKey<'_> {
        AttrKey(self)
    }
}

struct AttrKey<'a>(&'a Attr);

impl PartialEq for AttrKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self.0, other.0) {
            (Attr::Int(a), Attr::Int(b)) => a == b,
            (Attr::Float(a), Attr::Float(b)) => a.to_bits() == b.to_bits(),
            (Attr::Str(a), Attr::Str(b)) => a == b,
            (Attr::Bool(a), Attr::Bool(b)) => a == b,
            (Attr::Symbol(a), Attr::Symbol(b)) => a == b,
            (Attr::Word(a), Attr::Word(b)) => a == b,
            (Attr::Array(a), Attr::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.key() == y.key())
            }
            (Attr::Term(n, a), Attr::Term(m, b)) => {
                n == m
                    && a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((k1, x), (k2, y))| k1 == k2 && x.key() == y.key())
            }
            (Attr::Type(a), Attr::Type(b)) => a == b,
            _ => false,
        }
    }
}

impl PartialEq for Attr {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Attr {}

impl Hash for Attr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Attr::Int(i) => i.hash(state),
            Attr::Float(f) => f.to_bits().hash(state),
            Attr::Str(s) | Attr::Symbol(s) | Attr::Word(s) => s.hash(state),
            Attr::Bool(b) => b.hash(state),
            Attr::Array(v) => v.hash(state),
            Attr::Term(n, args) => {
                n.hash(state);
                args.hash(state);
            }
            Attr::Type(t) => t.hash(state),
        }
    }
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attr::Int(i) => write!(f, "{i}"),
            Attr::Float(v) => f.write_str(&format_float(*v)),
            Attr::Str(s) => f.write_str(&quote(s)),
            Attr::Bool(b) => write!(f, "{b}"),
            Attr::Symbol(s) => write!(f, "@{s}"),
            Attr::Word(w) => f.write_str(w),
            Attr::Array(v) => {
                f.write_str("[")?;
                for (i, a) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str("]")
            }
            Attr::Term(n, args) => {
                write!(f, "#{n}")?;
                if !args.is_empty() {
                    f.write_str("<")?;
                    for (i, (k, a)) in args.iter().enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        if let Some(k) = k {
                            write!(f, "{k} = ")?;
                        }
                        write!(f, "{a}")?;
                    }
                    f.write_str(">")?;
                }
                Ok(())
            }
            Attr::Type(t) => write!(f, "{t}"),
        }
    }
}
