//! `afm-bench attack`: hostile clients against any server, and what an
//! honest client saw meanwhile.
//!
//! Each [`attacks::Attack`] runs alone while a [`probe`] sends a short
//! chat request again and again; the report sets the server's answer to
//! the attack (statuses, closes, time) beside the probe's latency during
//! it and alone, and the server's resident memory and descriptors
//! ([`watch`]) when its pid is given. A server holds when every attack got
//! a 2xx, 4xx or 503 or was closed on a time limit, and every probe was
//! served.

pub mod attacks;
pub mod probe;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use attacks::{Aim, Answer, Attack, Sizes};

use crate::server::flags::{Remote, TargetArgs};
use crate::server::watch::{self, ProcessSample};
use probe::{Probe, ProbeFigures};

/// `afm-bench attack`'s flags.
#[derive(clap::Args, Debug, Clone)]
pub struct AttackArgs {
    /// The server attacked: `--url`, or `--server COMMAND` started and
    /// watched (its memory and descriptors) by the run.
    #[command(flatten)]
    pub server: TargetArgs,
    /// Attacks to run, comma-separated (default: all, in this order).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<Attack>,
    /// Connections of the slowloris attack.
    #[arg(long, default_value_t = 500)]
    pub slow_connections: usize,
    /// Connections of the idle attack.
    #[arg(long, default_value_t = 2000)]
    pub idle_connections: usize,
    /// Seconds the slow and idle attacks hold their connections at most
    /// (longer than the server's read timeout, to see it act).
    #[arg(long, default_value_t = 40.0)]
    pub hold: f64,
    /// Requests sent at once by the burst.
    #[arg(long, default_value_t = 1000)]
    pub burst: usize,
    /// The server's process id, to report its peak resident memory and
    /// open descriptors during each attack (Linux); a `--server` the run
    /// started is watched without it.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Where attack.json goes.
    #[arg(long, default_value = "afm-bench-attack")]
    pub out: std::path::PathBuf,
}

/// One attack's line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct AttackResult {
    pub attack: Attack,
    pub answer: Answer,
    /// The honest probe while the attack ran.
    pub probe: ProbeFigures,
    /// The server at its largest during the attack (with --server-pid).
    pub server_peak: Option<ProcessSample>,
}

impl AttackResult {
    pub fn held(&self) -> bool {
        self.answer.clean && self.probe.all_served()
    }
}

/// What `afm-bench attack` found.
#[derive(Debug, Clone, Serialize)]
pub struct AttackReport {
    pub url: String,
    pub model: String,
    pub sizes: Sizes,
    /// The probe alone, before any attack.
    pub probe_alone: ProbeFigures,
    pub attacks: Vec<AttackResult>,
    /// The probe alone again, after the last attack.
    pub probe_after: ProbeFigures,
    pub server_before: Option<ProcessSample>,
    pub server_after: Option<ProcessSample>,
}

impl AttackReport {
    /// Every attack answered cleanly and every probe was served.
    pub fn held(&self) -> bool {
        self.attacks.iter().all(AttackResult::held) && self.probe_after.all_served()
    }

    /// The report as a Markdown table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "honest probe alone: {}\n\n| attack | the server's answer | held | probe during | server peak |\n|---|---|---|---|---|\n",
            self.probe_alone.summary()
        );
        for r in &self.attacks {
            let answer: Vec<String> = r
                .answer
                .outcomes
                .iter()
                .map(|(k, n)| format!("{k} x{n}"))
                .collect();
            let peak = r.server_peak.map_or("-".into(), |p| {
                format!("{:.0} MiB, {} fds", p.rss_mib, p.fds)
            });
            s.push_str(&format!(
                "| {} | {} ({:.1} s) | {} | {} | {} |\n",
                r.attack.name(),
                answer.join(", "),
                r.answer.seconds,
                if r.held() { "yes" } else { "NO" },
                r.probe.summary(),
                peak
            ));
        }
        s.push_str(&format!(
            "\nhonest probe after: {}\n",
            self.probe_after.summary()
        ));
        if let (Some(a), Some(b)) = (self.server_before, self.server_after) {
            s.push_str(&format!(
                "server: {:.0} MiB, {} fds before; {:.0} MiB, {} fds after\n",
                a.rss_mib, a.fds, b.rss_mib, b.fds
            ));
        }
        s
    }
}

/// Runs the attacks one after another against `args.server`.
pub async fn run(args: &AttackArgs, note: impl Fn(&str)) -> Result<AttackReport> {
    watch::raise_fd_limit();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let Remote {
        target,
        base,
        model,
        pid: started_pid,
        server: _server,
    } = args
        .server
        .open_remote("afm-bench attack", 60, &args.out)
        .await?;
    let pid = args.server_pid.or(started_pid);
    let api_key = args.server.api_key.clone();
    let parsed = reqwest::Url::parse(&base).with_context(|| format!("--url {base}"))?;
    let addr = format!(
        "{}:{}",
        parsed.host_str().context("--url has no host")?,
        parsed.port_or_known_default().unwrap_or(80)
    );
    let aim = Arc::new(Aim {
        client: client.clone(),
        base: base.clone(),
        addr,
        model: model.clone(),
        api_key: api_key.clone(),
    });
    let probe = Probe {
        target,
        model: model.clone(),
    };
    let sizes = Sizes {
        slow_connections: args.slow_connections,
        idle_connections: args.idle_connections,
        hold: Duration::from_secs_f64(args.hold),
        burst: args.burst,
    };
    let server_before = pid.and_then(watch::sample);
    let probe_alone = probe.alone(5).await;
    note(&format!("probe alone: {}", probe_alone.summary()));
    let chosen = if args.only.is_empty() {
        Attack::ALL.to_vec()
    } else {
        args.only.clone()
    };
    let mut results = Vec::new();
    for attack in chosen {
        note(&format!("{} ...", attack.name()));
        let stop = Arc::new(AtomicBool::new(false));
        let probing = {
            let (probe, stop) = (probe.clone(), stop.clone());
            tokio::spawn(async move { probe.until(stop, Duration::from_millis(250)).await })
        };
        let watching = {
            let stop = stop.clone();
            tokio::spawn(async move { peak_of(pid, stop).await })
        };
        // Let the first probe start before the attack does.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = attacks::run(attack, &aim, &sizes).await;
        stop.store(true, Ordering::Relaxed);
        let probe_figures = probing.await?;
        let server_peak = watching.await?;
        let result = AttackResult {
            attack,
            answer,
            probe: probe_figures,
            server_peak,
        };
        note(&format!(
            "{}: {:?}; probe {}",
            attack.name(),
            result.answer.outcomes,
            result.probe.summary()
        ));
        results.push(result);
        // Closed sockets leave TIME_WAIT and the server its cleanup.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let probe_after = probe.alone(5).await;
    let report = AttackReport {
        url: base,
        model,
        sizes,
        probe_alone,
        attacks: results,
        probe_after,
        server_before,
        server_after: pid.and_then(watch::sample),
    };
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        args.out.join("attack.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

/// The largest RSS and descriptor count seen until `stop`.
async fn peak_of(pid: Option<u32>, stop: Arc<AtomicBool>) -> Option<ProcessSample> {
    let pid = pid?;
    let mut peak: Option<ProcessSample> = None;
    while !stop.load(Ordering::Relaxed) {
        if let Some(s) = watch::sample(pid) {
            peak = Some(match peak {
                None => s,
                Some(p) => ProcessSample {
                    rss_mib: p.rss_mib.max(s.rss_mib),
                    fds: p.fds.max(s.fds),
                },
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    peak
}
