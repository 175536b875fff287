//! The limits of an enumeration: one value instead of loose arguments, with
//! a deadline (an instant, so that the functions of a module share one).

pub use crate::deadline::deadline_in;
use std::time::Instant;

/// When an enumeration stops (pass options `max-candidates`, `max-states`
/// and `time-limit`). Whatever stops it, the candidates found so far are
/// its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Stop once this many candidates are found.
    pub max_candidates: usize,
    /// Stop after expanding this many partial programs.
    pub max_states: usize,
    /// Stop when the time to write out the candidates found would pass
    /// this instant (see `TAIL_SECS_PER_NODE` in `record.rs`).
    pub deadline: Instant,
}

impl Limits {
    /// No limit but `seconds` of time from now.
    pub fn time(seconds: f64) -> Limits {
        Limits {
            max_candidates: usize::MAX,
            max_states: usize::MAX,
            deadline: deadline_in(seconds),
        }
    }

    /// The same, stopping at `max_candidates` candidates.
    pub fn with_max_candidates(self, max_candidates: usize) -> Limits {
        Limits {
            max_candidates,
            ..self
        }
    }

    /// The same, stopping after `max_states` expansions.
    pub fn with_max_states(self, max_states: usize) -> Limits {
        Limits { max_states, ..self }
    }

    /// The same, stopping at `deadline` instead.
    pub fn with_deadline(self, deadline: Instant) -> Limits {
        Limits { deadline, ..self }
    }

    /// Seconds left until the deadline (0 past it).
    pub fn seconds_left(&self) -> f64 {
        self.deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    }
}

/// What an enumeration's progress events (`tracing` events of target
/// `efir::progress`, about once a second) name: the function, and since
/// when and within how many seconds the pass that runs it runs.
#[derive(Clone, Debug)]
pub struct Progress {
    /// The function.
    pub function: String,
    /// When the pass started.
    pub since: Instant,
    /// The pass's time limit in seconds.
    pub limit_s: f64,
    /// No events (the other threads of a search).
    pub quiet: bool,
}

impl Progress {
    /// Events for function `function`, counted from now, without a limit
    /// of their own.
    pub fn new(function: &str) -> Progress {
        Progress {
            function: function.to_string(),
            since: Instant::now(),
            limit_s: f64::INFINITY,
            quiet: false,
        }
    }
}
