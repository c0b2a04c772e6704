//! The progress bar long runs show (hidden when not asked for).

use indicatif::{ProgressBar, ProgressStyle};

pub fn bar(total: u64, show: bool) -> ProgressBar {
    let bar = if show {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} settled  {msg}")
            .expect("valid progress template")
            .progress_chars("=> "),
    );
    bar
}
