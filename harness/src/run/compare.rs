//! `afm-test diff` as a library function: two report files compared
//! (pre-existing failures attributed by a known-failures file), and the
//! comparison written as HTML and Markdown where asked.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::report::diff::{Diff, Options};
use crate::report::known_failures::KnownFailures;
use crate::report::{html, summary, write_text, Report};

/// What `afm-test diff` compares and where it writes.
pub struct CompareFiles<'a> {
    pub before: &'a Path,
    pub after: &'a Path,
    pub known_failures: Option<&'a Path>,
    pub html: Option<PathBuf>,
    pub summary: Option<PathBuf>,
    pub options: Options,
}

/// The comparison of the two reports, its pages written.
pub fn run(files: &CompareFiles) -> Result<Diff> {
    let known = KnownFailures::read_or_default(files.known_failures)?;
    let d = Diff::compare(
        &Report::read(files.before)?,
        &Report::read(files.after)?,
        &known,
        files.options,
    );
    if let Some(p) = &files.html {
        write_text(p, &html::render_diff(&d)?)?;
    }
    if let Some(p) = &files.summary {
        write_text(p, &summary::of_diff(&d))?;
    }
    Ok(d)
}
