//! The official `openai` and `anthropic` Python packages (installed by
//! scripts/setup.sh) talk to a started afm-serve: chat, streaming,
//! json_schema, logprobs, seed, completions, files and batches
//! (`openai_client.py`), Responses and Messages (`protocol_clients.py`),
//! and the SDK's tool loop as its users write it, whole and streamed, with
//! content parts and the developer role (`openai_sdk.py`, also run by the
//! real-client matrix): the scripts of scripts/interop/clients/.

use std::path::PathBuf;
use std::process::Command;

use crate::support::Server;

fn python() -> PathBuf {
    std::env::var_os("AFM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/venv/bin/python")
        })
}

#[test]
fn the_openai_python_client_works_against_afm_serve() {
    run_script("openai_client.py");
}

/// `responses.create` of the `openai` package and `messages.create` /
/// `messages.stream` / `count_tokens` of the `anthropic` package: plain,
/// streamed, tools and structured output (`protocol_clients.py`).
#[test]
fn the_responses_and_anthropic_python_clients_work_against_afm_serve() {
    run_script("protocol_clients.py");
}

/// The returned assistant message appended as is (`content: null`), the
/// tool result, the final answer; streamed; content parts; developer.
#[test]
fn the_openai_sdk_tool_loop_works_against_afm_serve() {
    run(&client_script("openai_sdk.py"), "passed, 0 failed");
}

fn run_script(name: &str) {
    run(&client_script(name), "all checks passed");
}

/// A script of scripts/interop/clients/.
fn client_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/interop/clients")
        .join(name)
}

/// Runs a client script against a flagless afm-serve.
fn run(script: &std::path::Path, success: &str) {
    let server = Server::start(&[]);
    let out = Command::new(python())
        .arg(script)
        .arg(&server.base)
        .output()
        .expect("run scripts/setup.sh first (it installs the openai package)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(success), "{stdout}");
}
