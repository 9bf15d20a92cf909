//! Progress bars (stderr, hidden when it is not a terminal or output is machine-readable)
//! and number formatting.

use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

pub fn bar(len: u64, what: &str, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg} (eta {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// One bar for a job of several stages (k-means iterations, then tokens encoded, ...),
/// re-labelled as each stage starts, and the stages' start times for the summary. `update` is
/// the library's progress callback (`tilemaxsim::codec::Progress`).
#[derive(Default)]
pub struct Stages {
    bar: Mutex<Option<(String, ProgressBar)>>,
    starts: Mutex<Vec<(String, Instant)>>,
}

impl Stages {
    pub fn update(&self, stage: &str, done: usize, total: usize) {
        let Ok(mut b) = self.bar.lock() else { return };
        if b.as_ref().is_none_or(|(s, _)| s != stage) {
            if let Some((_, old)) = b.take() {
                old.finish_and_clear();
            }
            if let Ok(mut st) = self.starts.lock() {
                st.push((stage.to_string(), Instant::now()));
            }
            *b = Some((stage.to_string(), bar(total as u64, stage, false)));
        }
        if let Some((_, pb)) = b.as_ref() {
            pb.set_position(done as u64);
        }
    }

    /// Clear the bar.
    pub fn finish(&self) {
        if let Ok(mut b) = self.bar.lock()
            && let Some((_, pb)) = b.take()
        {
            pb.finish_and_clear();
        }
    }

    /// "setup 0.12 s, k-means iterations 1.30 s, ...": the time before the first stage, then
    /// each stage's until the next (the last's until `end`).
    pub fn times(&self, start: Instant, end: Instant) -> String {
        let stages = self.starts.lock().map(|s| s.clone()).unwrap_or_default();
        let mut parts = Vec::new();
        let mut prev = ("setup".to_string(), start);
        for (name, at) in stages {
            parts.push(format!("{} {:.2} s", prev.0, (at - prev.1).as_secs_f64()));
            prev = (name, at);
        }
        parts.push(format!("{} {:.2} s", prev.0, (end - prev.1).as_secs_f64()));
        parts.join(", ")
    }
}

/// A spinner for work of unknown length (stderr; hidden when it is not a terminal).
pub fn spinner(what: &str) -> ProgressBar {
    let s = ProgressBar::new_spinner();
    s.set_message(what.to_string());
    s.enable_steady_tick(std::time::Duration::from_millis(120));
    s
}

/// 1234567 → "1.23 M".
pub fn si(x: f64) -> String {
    let (v, unit) = if x >= 1e9 {
        (x / 1e9, " G")
    } else if x >= 1e6 {
        (x / 1e6, " M")
    } else if x >= 1e3 {
        (x / 1e3, " K")
    } else {
        (x, "")
    };
    format!("{v:.2}{unit}")
}
