//! The feature summary at the top of a matrix page, caniuse-style: one
//! row per section (a feature: tools, reasoning, Messages...), each server
//! `supported` (every case it ran passes, or deviates only in ways that
//! are not failures), `partial`, `broken` (every case it ran fails) or
//! `untested` (it ran them and skipped them all) or `not run` (none of
//! them was run on it), with a one-line note naming what fails.

use serde::Serialize;

use crate::report::matrix::Matrix;
use crate::report::Status;

/// One section's support on each server.
#[derive(Debug, Clone, Serialize)]
pub struct Feature {
    pub section: String,
    pub cells: Vec<Support>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Support {
    /// supported, partial, broken, untested or not run.
    pub level: &'static str,
    /// Cases that hold (pass, or graded apart from failures: spec,
    /// lenient; degraded counts against full support), of those run.
    pub held: usize,
    pub ran: usize,
    /// e.g. "fails required, parallel (+2)" (cases of the section).
    pub note: String,
}

/// At most this many failing cases are named in a note.
const NAMED: usize = 2;

pub fn of(m: &Matrix) -> Vec<Feature> {
    let mut sections: Vec<&str> = Vec::new();
    for r in &m.rows {
        if sections.last() != Some(&r.section.as_str()) {
            sections.push(&r.section);
        }
    }
    sections
        .into_iter()
        .map(|section| Feature {
            section: section.to_string(),
            cells: (0..m.columns.len())
                .map(|k| support(m, section, k))
                .collect(),
        })
        .collect()
}

fn support(m: &Matrix, section: &str, k: usize) -> Support {
    let (mut held, mut ran, mut degraded, mut skipped) = (0, 0, 0, 0);
    let mut failing: Vec<&str> = Vec::new();
    for r in m.rows.iter().filter(|r| r.section == section) {
        let Some(Some(cell)) = r.cells.get(k) else {
            continue;
        };
        match cell.status {
            Status::Skip => {
                skipped += 1;
                continue;
            }
            Status::Pass | Status::Spec | Status::Lenient => held += 1,
            Status::Degraded => degraded += 1,
            // The row is the section: the case's own name says it.
            Status::Fail | Status::Error | Status::Flaky => failing.push(
                r.id.strip_prefix(section)
                    .map_or(&r.id, |s| s.trim_start_matches('.')),
            ),
        }
        ran += 1;
    }
    let level = match (ran, failing.len(), degraded) {
        (0, _, _) if skipped == 0 => "not run",
        (0, _, _) => "untested",
        (_, 0, 0) => "supported",
        (n, f, 0) if f == n => "broken",
        _ => "partial",
    };
    let mut note = match (ran, skipped) {
        (0, 0) => "no case of it ran here".to_string(),
        (0, _) => "every case skipped".to_string(),
        _ => format!("{held} of {ran} hold"),
    };
    if degraded > 0 {
        note.push_str(&format!("; {degraded} degraded"));
    }
    if !failing.is_empty() {
        let named: Vec<&str> = failing.iter().take(NAMED).copied().collect();
        note.push_str(&format!("; fails {}", named.join(", ")));
        if failing.len() > NAMED {
            note.push_str(&format!(" (+{})", failing.len() - NAMED));
        }
    }
    Support {
        level,
        held,
        ran,
        note,
    }
}
