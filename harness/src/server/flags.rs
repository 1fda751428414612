//! The one place a run chooses its target: a server at `--url`, a server
//! it starts itself (`--server "COMMAND"`), or the in-process engine.
//! afm-test, afm-bench and its attack and soak take the same flags, so a
//! new way to reach a server is added here once.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::process::ServerProcess;
use super::{ReplyLimits, Target, REPLY_CAP};

/// Where a run's requests go.
#[derive(Args, Clone, Debug)]
pub struct TargetArgs {
    /// The model: for the in-process engine an alias, .gguf, folder or HF
    /// repo id; with --url or --server the name sent as `model` in every
    /// request (default: the first id of GET /v1/models) and `{model}` in
    /// the --server command.
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible server (instead of the engine).
    #[arg(long, conflicts_with = "server")]
    pub url: Option<String>,
    /// Start this server, run, stop it: a shell command with `{port}`
    /// (a free port) and `{model}` (--model) in it.
    #[arg(long)]
    pub server: Option<String>,
    /// Seconds to wait for a --server to answer.
    #[arg(long, default_value_t = 300)]
    pub server_timeout: u64,
    /// Bearer key for --url / --server.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Seconds a request may take, headers to last byte (--url / --server):
    /// a reply still going then is an error, never a hang. Default: what
    /// afm-test's tier states (smoke 20, standard 120, full 300), 600 for
    /// afm-bench.
    #[arg(long)]
    pub request_timeout: Option<u64>,
}

impl Default for TargetArgs {
    /// The in-process engine on the bundled model, as with no flags.
    fn default() -> Self {
        TargetArgs {
            model: None,
            url: None,
            server: None,
            server_timeout: 300,
            api_key: None,
            request_timeout: None,
        }
    }
}

impl TargetArgs {
    /// Seconds one request may take: `--request-timeout`, else
    /// [`DEFAULT_REQUEST_TIMEOUT_S`].
    pub fn request_timeout_s(&self) -> u64 {
        self.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT_S)
    }

    /// The same flags with `seconds` per request unless one was given.
    pub fn with_request_timeout(&self, seconds: u64) -> Self {
        TargetArgs {
            request_timeout: Some(self.request_timeout.unwrap_or(seconds)),
            ..self.clone()
        }
    }

    /// How long one request may take.
    pub fn time_limit(&self) -> Duration {
        Duration::from_secs(self.request_timeout_s())
    }

    /// The limits every reply was read under, for the report.
    pub fn reply_limits(&self) -> ReplyLimits {
        ReplyLimits {
            cap_mib: REPLY_CAP >> 20,
            request_timeout_s: self.request_timeout_s(),
        }
    }
}

/// Seconds a request may take when neither the flag nor the run says:
/// afm-bench's requests, which may be long by design.
pub const DEFAULT_REQUEST_TIMEOUT_S: u64 = 600;

/// The bundled model: the in-process engine's default.
pub const DEFAULT_MODEL: &str = "smollm2";

/// A target ready for requests, and what the report says of it.
pub struct Opened {
    pub target: Target,
    /// How the server runs: the in-process engine's afm-serve flags, the
    /// --server command, or nothing known (--url).
    pub flags: Vec<String>,
    /// Why the in-process engine runs without `--deterministic`, if it does.
    pub refused: Option<String>,
    /// The report's `target`: the URL, "started by afm-test", "in-process".
    pub label: String,
    /// Kept alive for the run; dropping it stops the server.
    pub server: Option<ServerProcess>,
}

impl TargetArgs {
    /// A server over HTTP (given or started), not the in-process engine.
    pub fn remote(&self) -> bool {
        self.url.is_some() || self.server.is_some()
    }

    /// Opens the target: starts the --server (its output to `log`) and
    /// waits until it answers, or starts the engine with `engine_flags`
    /// (afm-serve's) and `engine_key`. A remote target names the model in
    /// every request: --model, else the first of `/v1/models` (`required`:
    /// fail when there is none).
    pub async fn open(
        &self,
        engine_flags: &[String],
        engine_key: Option<String>,
        log: &Path,
        model_required: bool,
    ) -> Result<Opened> {
        if !self.remote() {
            if self.api_key.is_some() {
                bail!("--api-key needs --url or --server");
            }
            let model = self.model.as_deref().unwrap_or(DEFAULT_MODEL);
            let (target, flags, refused) =
                Target::start_in_process(model, engine_flags, engine_key)?;
            return Ok(Opened {
                target,
                flags,
                refused,
                label: "in-process".into(),
                server: None,
            });
        }
        let (target, flags, label, server) = match (&self.url, &self.server) {
            (Some(url), _) => (
                Target::http(url, self.api_key.clone()).time_limit(self.time_limit(), false),
                Vec::new(),
                url.clone(),
                None,
            ),
            (None, Some(command)) => {
                let mut process = ServerProcess::start(command, self.model.as_deref(), log)?;
                let target = Target::http(&process.base, self.api_key.clone())
                    .time_limit(self.time_limit(), false);
                process
                    .wait_ready(&target, Duration::from_secs(self.server_timeout))
                    .await
                    .with_context(|| format!("the server's log: {}", log.display()))?;
                let flags = vec![process.command.clone()];
                (target, flags, "started by afm-test".into(), Some(process))
            }
            (None, None) => unreachable!("remote() holds"),
        };
        let model = match &self.model {
            Some(m) => Some(m.clone()),
            None => target.listed_model().await?,
        };
        if model_required && model.is_none() {
            bail!(
                "{} lists no model at /v1/models; pass --model",
                target.describe()
            );
        }
        Ok(Opened {
            target: target.with_model(model),
            flags,
            refused: None,
            label,
            server,
        })
    }
}

/// A server over HTTP, opened for tools that only speak to one (the
/// attacks, the soak).
pub struct Remote {
    pub target: Target,
    /// Its base URL, without a trailing slash.
    pub base: String,
    /// The model every request names.
    pub model: String,
    /// The process id of a server this run started (`--server`), to
    /// watch its memory and descriptors.
    pub pid: Option<u32>,
    /// Kept alive for the run; dropping it stops the server.
    pub server: Option<ServerProcess>,
}

impl TargetArgs {
    /// Opens a server over HTTP (`--url` or `--server`; `tool` names who
    /// needs it in the error otherwise), each request cut after `seconds`
    /// unless `--request-timeout` says otherwise; its log beside `out`.
    pub async fn open_remote(&self, tool: &str, seconds: u64, out: &Path) -> Result<Remote> {
        if !self.remote() {
            bail!("{tool} sends to a server over HTTP: give --url URL or --server COMMAND");
        }
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let opened = self
            .with_request_timeout(seconds)
            .open(&[], None, &out.join("server.log"), true)
            .await?;
        let Opened { target, server, .. } = opened;
        Ok(Remote {
            base: target.describe().trim_end_matches('/').to_string(),
            model: target.model().context("a listed model")?.to_string(),
            pid: server.as_ref().map(ServerProcess::pid),
            target,
            server,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_url_is_an_error_that_names_it() {
        // A port nothing listens on: bind, read the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let args = TargetArgs {
            url: Some(format!("http://127.0.0.1:{port}")),
            ..Default::default()
        };
        let err = args
            .open(&[], None, Path::new("unused.log"), false)
            .await
            .err()
            .expect("no server answers");
        assert!(err.to_string().contains(&port.to_string()), "{err:#}");
    }

    #[tokio::test]
    async fn a_server_command_that_exits_fails_with_its_log_named() {
        let dir = std::env::temp_dir().join(format!("afm-open-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("server.log");
        let args = TargetArgs {
            server: Some("echo listening on {port}; exit 3".into()),
            server_timeout: 5,
            ..Default::default()
        };
        let err = args
            .open(&[], None, &log, false)
            .await
            .err()
            .expect("the command exits");
        let text = format!("{err:#}");
        assert!(
            text.contains("exited") && text.contains("server.log"),
            "{text}"
        );
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.starts_with("listening on "), "{logged}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_key_without_a_server_is_refused() {
        let args = TargetArgs {
            api_key: Some("k".into()),
            ..Default::default()
        };
        let err = args
            .open(&[], None, Path::new("unused.log"), false)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("--api-key"), "{err}");
    }
}
