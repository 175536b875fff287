//! The tools' one `tracing` setup: progress events (target
//! `efir::progress`) as a spinner line on stderr when it is a terminal, as
//! plain lines when `EFIR_PROGRESS` is set, and not at all otherwise; other
//! events as lines on stderr, warnings and errors only unless `EFIR_LOG`
//! names targets and levels (`efir_egraph=debug,info`, tracing's `Targets`
//! syntax). Quiet on success.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{filter_fn, Targets};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// The target of progress events.
pub const PROGRESS: &str = "efir::progress";

/// Install the tools' subscriber (once per process; later calls, or a
/// subscriber installed already, change nothing).
pub fn init() {
    let progress = if std::io::stderr().is_terminal() {
        Some(Progress::Spinner(Mutex::new(None)))
    } else if std::env::var_os("EFIR_PROGRESS").is_some() {
        Some(Progress::Lines)
    } else {
        None
    };
    install(progress);
}

/// Install the subscriber of an embedding process (the Python module
/// `efir._efir`): as [`init`], but progress lines only when
/// `EFIR_PROGRESS` is set, never a spinner (the host draws its own progress,
/// and a Rust spinner would interleave with it); `EFIR_LOG` as for the
/// tools (warnings and errors only by default). Once per process; a
/// subscriber the host installed already changes nothing.
pub fn init_embedded() {
    install(std::env::var_os("EFIR_PROGRESS").map(|_| Progress::Lines));
}

/// Install the subscriber: `progress` for progress events, lines on stderr
/// for the others that `EFIR_LOG` selects (warnings and errors by default).
fn install(progress: Option<Progress>) {
    let targets: Targets = std::env::var("EFIR_LOG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(Level::WARN));
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .without_time()
        .with_ansi(false)
        .with_filter(filter_fn(|m| m.target() != PROGRESS))
        .with_filter(targets);
    let progress =
        progress.map(|p| ProgressLayer(p).with_filter(filter_fn(|m| m.target() == PROGRESS)));
    let _ = tracing_subscriber::registry()
        .with(lines)
        .with(progress)
        .try_init();
}

/// How progress is shown.
enum Progress {
    /// One spinner line, redrawn (stderr is a terminal), made at the first
    /// event and cleared by an event with `done`.
    Spinner(Mutex<Option<ProgressBar>>),
    /// A line per event (`EFIR_PROGRESS`).
    Lines,
}

struct ProgressLayer(Progress);

/// An event's message and whether it has a `done` field.
#[derive(Default)]
struct Message {
    text: String,
    done: bool,
}

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.text = format!("{value:?}"),
            "done" => self.done = true,
            _ => {}
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "done" {
            self.done = value;
        }
    }
}

impl<S: Subscriber> Layer<S> for ProgressLayer {
    fn on_event(&self, event: &Event<'_>, _cx: Context<'_, S>) {
        let mut m = Message::default();
        event.record(&mut m);
        match &self.0 {
            Progress::Lines => {
                if !m.done {
                    #[allow(clippy::print_stderr)]
                    {
                        eprintln!("{}", m.text);
                    }
                }
            }
            Progress::Spinner(bar) => {
                let mut bar = bar.lock().unwrap_or_else(|e| e.into_inner());
                if m.done {
                    if let Some(b) = bar.take() {
                        b.finish_and_clear();
                    }
                    return;
                }
                let b = bar.get_or_insert_with(|| {
                    let b = ProgressBar::new_spinner();
                    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
                        b.set_style(style);
                    }
                    b
                });
                b.set_message(m.text);
                b.tick();
            }
        }
    }
}
