//! Deadlines: the passes' time limits are instants, shared by every
//! function of a module.

use std::time::{Duration, Instant};

/// The instant `seconds` from now; a time too large to represent is a
/// century (none of the limits is meant to be reached then).
pub fn deadline_in(seconds: f64) -> Instant {
    let now = Instant::now();
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    let d = Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(century);
    now.checked_add(d.min(century)).unwrap_or(now)
}
