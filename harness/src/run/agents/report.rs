//! `afm-test agents`' report: report.json and report.md in the output
//! folder, and the JUnit file and Markdown summary when asked.

use std::fmt::Write as _;

use anyhow::{Context, Result};

use super::{AgentsArgs, AgentsReport};

pub fn write(report: &AgentsReport, args: &AgentsArgs) -> Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(args.out.join("report.json"), json)
        .with_context(|| format!("writing {}", args.out.join("report.json").display()))?;
    let md = markdown(report);
    std::fs::write(args.out.join("report.md"), &md)?;
    if let Some(path) = &args.summary {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, junit(report))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A table of the agents, then each broken one's first error.
pub fn markdown(report: &AgentsReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Coding agents against `{}` (model `{}`)\n",
        report.target, report.model
    );
    let _ = writeln!(
        out,
        "| agent | protocol | grade | text | shell | cached | first turn, cold / warm |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for a in &report.agents {
        let cell = |name: &str| {
            a.tasks
                .iter()
                .find(|t| t.task.name() == name)
                .map_or("-".to_string(), |t| match t.passed {
                    true => format!("pass ({:.0} s)", t.seconds),
                    false => "fail".to_string(),
                })
        };
        // The text task's first turn is cold; the shell task's, sent
        // after it with the same instructions and tools, may be cached.
        let turn = |name: &str| {
            a.tasks
                .iter()
                .find(|t| t.task.name() == name)
                .and_then(|t| t.first_turn_seconds)
                .map_or("-".to_string(), |s| format!("{s:.1} s"))
        };
        let _ = writeln!(
            out,
            "| {} (`{}`) | {} | **{}** | {} | {} | {} | {} / {} |",
            a.agent,
            a.package,
            a.protocol,
            a.grade,
            cell("text"),
            cell("shell"),
            cell("cached"),
            turn("text"),
            turn("shell")
        );
    }
    for a in report.agents.iter().filter(|a| a.first_error.is_some()) {
        let _ = writeln!(
            out,
            "\n**{}** is {}: {}",
            a.agent,
            a.grade,
            a.first_error
                .as_deref()
                .unwrap_or_default()
                .replace('|', "\\|")
        );
    }
    out
}

fn junit(report: &AgentsReport) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let cases: usize = report.agents.iter().map(|a| a.tasks.len()).sum();
    let failures: usize = report
        .agents
        .iter()
        .flat_map(|a| &a.tasks)
        .filter(|t| !t.passed)
        .count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"agents\" tests=\"{cases}\" failures=\"{failures}\">\n"
    );
    for a in &report.agents {
        for t in &a.tasks {
            let _ = write!(
                out,
                "<testcase classname=\"agents.{}\" name=\"{}\" time=\"{:.3}\">",
                esc(&a.agent),
                t.task.name(),
                t.seconds
            );
            if let Some(f) = &t.failure {
                let _ = write!(
                    out,
                    "<failure message=\"{}\">{}</failure>",
                    esc(f),
                    esc(&t.output_tail)
                );
            }
            out.push_str("</testcase>\n");
        }
    }
    out.push_str("</testsuite>\n</testsuites>\n");
    out
}
