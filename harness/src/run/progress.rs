//! afm-test's progress on the console: a bar on a terminal; in a log (no
//! terminal) one `PASS id (ms)` line per case as it ends.

use std::io::IsTerminal;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};

use super::Observer;
use crate::report::CaseResult;

/// How a run shows its progress: a bar on a terminal; in a log (no
/// terminal) one `PASS id (ms)` line per case as it ends.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new() -> Arc<Progress> {
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}");
            ProgressBar::new(0).with_style(style.unwrap_or_else(|_| ProgressStyle::default_bar()))
        });
        Arc::new(Progress { bar })
    }
}

impl Observer for Progress {
    fn note(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("afm-test: {line}")),
            None => eprintln!("afm-test: {line}"),
        }
    }

    fn cases_planned(&self, cases: usize) {
        if let Some(bar) = &self.bar {
            bar.reset();
            bar.set_length(cases as u64);
        }
    }

    fn case_done(&self, r: &CaseResult) {
        let status = r.status.as_str();
        match &self.bar {
            Some(bar) => {
                bar.set_message(format!("{status} {}", r.id));
                bar.inc(1);
                if bar.position() == bar.length().unwrap_or(0) {
                    bar.finish_and_clear();
                }
            }
            None => println!("{:<5} {} ({:.0} ms)", status.to_uppercase(), r.id, r.millis),
        }
    }
}
