//! `--verify-alone`: temperature-0 replies served under load, replayed
//! one at a time after the level and compared. A difference is a figure,
//! or a failed `alone` check when the server claims batch invariance.

use super::load::LevelRun;
use super::results::AloneFigures;
use super::sample::{FailedCheck, Sample};
use crate::server::Target;

/// Replays up to `n` served temperature-0 replies of `run` one at a time
/// to `path` and marks each that differs (a failure when `enforce`).
pub async fn replay(
    target: &Target,
    path: &str,
    run: &mut LevelRun,
    n: usize,
    temperature: f64,
    enforce: bool,
) {
    if temperature != 0.0 {
        return;
    }
    let picks: Vec<usize> = (0..run.samples.len())
        .filter(|&k| run.samples[k].correct() && run.bodies[k].is_object())
        .take(n)
        .collect();
    for k in picks {
        let ex = target.post(path, &run.bodies[k]).await;
        let alone = Sample::of(&ex);
        let s = &mut run.samples[k];
        s.alone_differs = Some(alone.served() && alone.content != s.content);
        if enforce && s.alone_differs == Some(true) {
            s.failed_checks.push(FailedCheck {
                check: "alone".into(),
                detail: format!(
                    "under load {:?}; alone {:?}",
                    clip(&s.content),
                    clip(&alone.content)
                ),
            });
        }
    }
}

fn clip(s: &str) -> String {
    s.chars().take(120).collect()
}

/// How many replies of `run` were compared and how many differed.
pub fn figures(run: &LevelRun, enforced: bool) -> AloneFigures {
    let compared: Vec<bool> = run.samples.iter().filter_map(|s| s.alone_differs).collect();
    AloneFigures {
        compared: compared.len(),
        differing: compared.iter().filter(|d| **d).count(),
        enforced,
    }
}
