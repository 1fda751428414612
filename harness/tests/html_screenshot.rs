//! The HTML report renders in a real browser: headless Chromium takes a
//! screenshot of a report, and the picture shows the summary (the five
//! coloured cards side by side near the top, each with text drawn on it);
//! the DOM after scripts ran carries the run's counts.
//!
//! Needs Chromium (`scripts/setup.sh` installs Debian's `chromium`);
//! `AFM_CHROMIUM` names another binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use afm_harness::report::html;
use afm_harness::report::{CaseResult, Report, RunInfo, Status};
use afm_harness::suite::checks::Failure;
use afm_harness::suite::Tier;

/// Card backgrounds of the report's summary, left to right.
const CARDS: [(&str, [u8; 3]); 5] = [
    ("passed", [0xe3, 0xf6, 0xe8]),
    ("failed", [0xfd, 0xe4, 0xe1]),
    ("errors", [0xff, 0xf1, 0xd6]),
    ("skipped", [0xee, 0xf0, 0xf3]),
    ("known failures", [0xef, 0xe6, 0xfb]),
];

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("AFM_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(name))
            .find(|p| p.is_file());
        if let Some(p) = found {
            return p;
        }
    }
    panic!("no Chromium found: run scripts/setup.sh or set AFM_CHROMIUM");
}

fn case(n: usize, section: &str, status: Status, known: bool) -> CaseResult {
    CaseResult {
        id: format!("{section}.case_{n}"),
        name: format!("Case {n} of {section}"),
        section: section.into(),
        tier: Tier::Smoke,
        seeds: Vec::new(),
        status,
        reason: (status == Status::Skip).then(|| "capability missing".into()),
        failures: if status == Status::Fail {
            vec![Failure::new(
                "content_regex",
                "matches ^Paris".into(),
                "\"Lyon\"".into(),
            )]
        } else {
            Vec::new()
        },
        steps: Vec::new(),
        millis: 10.0 * n as f64,
        known_issue: known.then(|| "https://example.org/issues/1".into()),
        known_cause: known.then(|| "https://example.org/issues/1".into()),
        attempts: vec![],
    }
}

fn sample_report() -> Report {
    let mut cases = Vec::new();
    let plan = [
        (Status::Pass, 7),
        (Status::Fail, 3),
        (Status::Error, 1),
        (Status::Skip, 2),
    ];
    let mut n = 0;
    for (status, count) in plan {
        for _ in 0..count {
            n += 1;
            let section = if n % 2 == 0 { "tools" } else { "grammar" };
            // One of the failures is attributed to a known issue.
            cases.push(case(n, section, status, status == Status::Fail && n == 8));
        }
    }
    let run = RunInfo {
        target: "in-process".into(),
        model: "smollm2".into(),
        engine_version: "afm-engine test".into(),
        host: "test host".into(),
        started: "2026-01-01T00:00:00Z".into(),
        ..Default::default()
    };
    Report::new(run, cases)
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("afm-html-shot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_chromium(dir: &Path, extra: &[String], page: &Path) -> std::process::Output {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("starting Chromium");
    assert!(
        out.status.success(),
        "Chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An RGB picture, row-major.
struct Picture {
    width: usize,
    height: usize,
    rgb: Vec<[u8; 3]>,
}

fn decode(path: &Path) -> Picture {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    Picture {
        width: info.width as usize,
        height: info.height as usize,
        rgb,
    }
}

impl Picture {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.width + x]
    }

    /// Horizontal runs of exactly `color` in row `y`, at least `min` long.
    fn runs(&self, y: usize, color: [u8; 3], min: usize) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        let mut start = None;
        for x in 0..=self.width {
            let inside = x < self.width && self.at(x, y) == color;
            match (inside, start) {
                (true, None) => start = Some(x),
                (false, Some(s)) => {
                    if x - s >= min {
                        runs.push((s, x));
                    }
                    start = None;
                }
                _ => {}
            }
        }
        runs
    }
}

#[test]
fn the_html_report_shows_its_summary_in_headless_chromium() {
    let report = sample_report();
    assert_eq!(
        (
            report.summary.pass,
            report.summary.fail,
            report.summary.error
        ),
        (7, 3, 1)
    );
    assert_eq!((report.summary.skip, report.summary.known), (2, 1));

    let dir = scratch_dir();
    let page = dir.join("report.html");
    std::fs::write(&page, html::render_report(&report).unwrap()).unwrap();

    // The picture: five card-coloured blocks in one row near the top, in
    // order, each wide enough to be a card and with text drawn on it.
    let shot = dir.join("report.png");
    run_chromium(&dir, &[format!("--screenshot={}", shot.display())], &page);
    let pic = decode(&shot);
    assert!(
        pic.width >= 1000 && pic.height >= 600,
        "{}x{}",
        pic.width,
        pic.height
    );
    let top = pic.height.min(400);
    let row = (0..top)
        .find(|&y| CARDS.iter().all(|(_, c)| !pic.runs(y, *c, 80).is_empty()))
        .expect("no row of the screenshot crosses all five summary cards");
    let mut left = 0;
    for (label, color) in CARDS {
        let (x0, x1) = pic.runs(row, color, 80)[0];
        assert!(x0 > left, "the {label} card is out of order");
        left = x1;
        // Text on the card: dark pixels within its span, below its top edge.
        let ink = (row..(row + 70).min(pic.height))
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .filter(|&(x, y)| pic.at(x, y).iter().all(|&v| v < 110))
            .count();
        assert!(
            ink > 30,
            "the {label} card shows no text ({ink} dark pixels)"
        );
    }

    // The DOM after scripts ran: the counts, each on its card.
    let dom = run_chromium(&dir, &["--dump-dom".to_string()], &page);
    let dom = String::from_utf8_lossy(&dom.stdout);
    for (count, label) in [(7, "passed"), (3, "failed"), (1, "errors"), (2, "skipped")] {
        assert!(
            dom.contains(&format!("<b>{count}</b>{label}")),
            "the summary lacks {count} {label}"
        );
    }
    assert!(dom.contains("<b>1</b>known failures"));
    std::fs::remove_dir_all(&dir).ok();
}
