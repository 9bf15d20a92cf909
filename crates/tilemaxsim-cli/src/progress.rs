//! Progress bars (stderr, hidden when it is not a terminal or output is machine-readable)
//! and number formatting.

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
