//! The official `openai` Python package (installed by scripts/setup.sh)
//! talks to a started afm-serve: chat, streaming, json_schema, logprobs,
//! seed, completions. See `tests/python/openai_client.py`.

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
    let server = Server::start(&["--enable-grammar-constraints"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/openai_client.py");
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
