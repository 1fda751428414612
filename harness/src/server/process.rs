//! A server that afm-test starts itself (`--server "COMMAND"`): a free
//! port, the command run by `sh` with `{port}` and `{model}` filled in, a
//! wait until it answers, and a stop (the whole process group) when the
//! run is over, also on an error.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::protocol::endpoint::{HEALTH_PATH, MODELS_PATH};
use crate::server::Target;

pub struct ServerProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The command as run (placeholders filled in): the report's flags.
    pub command: String,
}

impl ServerProcess {
    /// The started command's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `template` on a free port; its output goes to `log`.
    pub fn start(template: &str, model: Option<&str>, log: &Path) -> Result<ServerProcess> {
        if template.contains("{model}") && model.is_none() {
            bail!("--server: the command names {{model}}; pass --model");
        }
        let port = free_port()?;
        let command = template
            .replace("{port}", &port.to_string())
            .replace("{model}", model.unwrap_or_default());
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            // Its own group, so stopping it stops what it started.
            .process_group(0)
            .spawn()
            .with_context(|| format!("--server: cannot start `{command}`"))?;
        Ok(ServerProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
            command,
        })
    }

    /// Waits until `GET /v1/models` or `/health` answers 200 (a loading
    /// model may answer 503 first). Fails if the process exits or
    /// `timeout` passes; the log says why.
    pub async fn wait_ready(&mut self, target: &Target, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "--server: `{}` exited ({status}) before it answered",
                    self.command
                );
            }
            for path in [MODELS_PATH, HEALTH_PATH] {
                if target.get(path).await.status == 200 {
                    return Ok(());
                }
            }
            if start.elapsed() > timeout {
                bail!(
                    "--server: `{}` did not answer within {} s",
                    self.command,
                    timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Exited on its own (and reaped): there is no group left to stop.
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now (the OS picks it).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}
