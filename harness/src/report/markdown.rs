//! GitHub-flavoured Markdown pieces that server text passes through: a
//! table cell that cannot end its row or inject markup, inline code that
//! survives any backticks, and folded `<details>` blocks. Used by the run
//! and diff summaries and the compatibility page.

use std::fmt::Write as _;

/// A `<details>` block whose body is Markdown (the blank line after the
/// summary makes GitHub read it so).
pub fn open_details(out: &mut String, summary: &str) {
    let _ = writeln!(out, "<details><summary>{summary}</summary>\n");
}

pub fn close_details(out: &mut String) {
    out.push_str("</details>\n\n");
}

/// Server text as a table cell: on one line (a newline shows as ↵),
/// clipped to `max` characters, and with every character Markdown or HTML
/// would read escaped, so it shows as sent and cannot end the row or
/// inject markup. `@` is followed by a word joiner so a reply cannot
/// mention anyone in a pull-request comment.
pub fn cell(text: &str, max: usize) -> String {
    if text.is_empty() {
        return "*(empty)*".to_string();
    }
    let total = text.chars().count();
    let mut out = String::with_capacity(text.len().min(max * 2) + 24);
    let mut prev = '\0';
    for c in text.chars().take(max) {
        match c {
            '\n' if prev == '\r' => {}
            '\n' | '\r' => out.push('↵'),
            '\t' => out.push(' '),
            c if c.is_control() => out.push('\u{FFFD}'),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '@' => out.push_str("@\u{2060}"),
            c => out.push(c),
        }
        prev = c;
    }
    if total > max {
        let _ = write!(out, "… (+{} chars)", total - max);
    }
    out
}

/// A name (case id, model, target, commit) as inline code, clipped to one
/// line: the fence is longer than any backtick run inside, and `|` is
/// escaped as GitHub asks even inside code in a table.
pub fn code(text: &str) -> String {
    const MAX: usize = 120;
    let mut body: String = text
        .chars()
        .take(MAX)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > MAX {
        body.push('…');
    }
    if body.trim().is_empty() {
        return "—".to_string();
    }
    let body = body.replace('|', "\\|");
    let longest = body
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}
