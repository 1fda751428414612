//! The official `openai` and `anthropic` Python packages (installed by
//! scripts/setup.sh) talk to a started afm-serve: chat, streaming,
//! json_schema, logprobs, seed, completions (`tests/python/openai_client.py`),
//! and Responses and Messages (`tests/python/protocol_clients.py`).

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::Server;

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
/// streamed, tools and structured output (`tests/python/protocol_clients.py`).
#[test]
fn the_responses_and_anthropic_python_clients_work_against_afm_serve() {
    run_script("protocol_clients.py");
}

fn run_script(name: &str) {
    let server = Server::start(&["--enable-grammar-constraints"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name);
    let out = Command::new(python())
        .arg(&script)
        .arg(&server.base)
        .output()
        .expect("run scripts/setup.sh first (it installs the openai package)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
