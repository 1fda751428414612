//! JUnit XML for CI systems: one `testsuite` per section, one `testcase`
//! per case (`failure`, `error` or `skipped` inside when it did not pass).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::report::{Report, Status};

pub fn render(report: &Report) -> String {
    let mut sections: BTreeMap<&str, Vec<_>> = BTreeMap::new();
    for c in &report.cases {
        sections.entry(c.section.as_str()).or_default().push(c);
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let s = &report.summary;
    let _ = writeln!(
        out,
        "<testsuites name=\"afm-test\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
        report.cases.len(),
        s.fail,
        s.error,
        s.skip,
        report.run.wall_seconds
    );
    for (section, cases) in sections {
        let count = |st: Status| cases.iter().filter(|c| c.status == st).count();
        let time: f64 = cases.iter().map(|c| c.millis).sum::<f64>() / 1000.0;
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{time:.3}\">",
            escape(section),
            cases.len(),
            count(Status::Fail),
            count(Status::Error),
            count(Status::Skip)
        );
        for c in cases {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}: {}\" time=\"{:.3}\"",
                escape(section),
                escape(&c.id),
                escape(&c.name),
                c.millis / 1000.0
            );
            let detail = c
                .failures
                .iter()
                .map(|f| format!("{}: expected {}; got {}", f.check, f.expected, f.actual))
                .collect::<Vec<_>>()
                .join("\n");
            let known = c
                .known_issue
                .as_ref()
                .map(|k| format!(" [known: {k}]"))
                .unwrap_or_default();
            match c.status {
                Status::Pass => out.push_str("/>\n"),
                // JUnit has no grade between pass and fail: a pass that
                // says how it deviates.
                Status::Spec | Status::Degraded | Status::Lenient => {
                    let why = match c.status {
                        Status::Spec => "spec (off the published schema's letter only)",
                        Status::Degraded => {
                            "degraded (the official client works, its user loses something)"
                        }
                        _ => "lenient (answers a request the spec forbids)",
                    };
                    let _ = writeln!(
                        out,
                        ">\n      <system-out>{why}: {}</system-out>\n    </testcase>",
                        escape(&detail)
                    );
                }
                Status::Skip => {
                    let _ = writeln!(
                        out,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                        escape(c.reason.as_deref().unwrap_or_default())
                    );
                }
                // A flaky case fails in JUnit too, its rate first.
                Status::Fail | Status::Flaky => {
                    let first = match c.status {
                        Status::Flaky => c.reason.as_deref().unwrap_or("flaky"),
                        _ => c.failures.first().map(|f| f.check.as_str()).unwrap_or(""),
                    };
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}{}\">{}</failure>\n    </testcase>",
                        escape(first),
                        escape(&known),
                        escape(&detail)
                    );
                }
                Status::Error => {
                    let _ = writeln!(
                        out,
                        ">\n      <error message=\"{}{}\">{}</error>\n    </testcase>",
                        escape(c.reason.as_deref().unwrap_or_default()),
                        escape(&known),
                        escape(&detail)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// XML text and attribute escaping; characters XML 1.0 forbids are dropped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'\u{1}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;"
        );
    }
}
