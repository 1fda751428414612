//! `afm-serve generate` end to end: it answers with the bundled model, and
//! bad `--model` input ends it with one line naming the problem, a non-zero
//! exit, and no panic or backtrace.

use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("afm-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `generate` with `model`; returns (exit success, stderr).
fn generate_with(model: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_afm-serve"))
        .args([
            "generate",
            "--model",
            model,
            "--prompt",
            "hi",
            "--max-tokens",
            "4",
        ])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line_error(model: &str, expected: &str) {
    let (ok, stderr) = generate_with(model);
    assert!(!ok, "{model}: expected failure, stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{model}: expected one line, got:\n{stderr}");
    assert!(lines[0].starts_with("afm-serve: error: "), "{stderr}");
    assert!(lines[0].contains(expected), "{model}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
}

#[test]
fn generate_answers_with_the_bundled_model() {
    let out = Command::new(env!("CARGO_BIN_EXE_afm-serve"))
        .args([
            "generate",
            "--model",
            "smollm2",
            "--prompt",
            "What is the capital of France?",
        ])
        .args(["--max-tokens", "32", "--temperature", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Paris"), "{stdout}");
    assert!(
        !stdout.contains("<|im_end|>"),
        "the end token must not be printed: {stdout}"
    );
}

/// `generate` answers through the server's engine: a thinking model's
/// reasoning is parsed out of the answer, as the APIs return it, and the
/// request's checks apply (a loop of its own printed the think block).
#[test]
fn generate_takes_the_servers_path_reasoning_apart_from_the_answer() {
    let out = Command::new(env!("CARGO_BIN_EXE_afm-serve"))
        .args([
            "generate",
            "--model",
            "conformance",
            "--prompt",
            "What is 2+2?",
        ])
        .args(["--max-tokens", "80", "--temperature", "0", "--verbose"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stdout.contains("think>"),
        "reasoning markup in the answer: {stdout}"
    );
    assert!(stdout.contains('4'), "{stdout}");
    let reasoning: usize = stderr
        .split(" reasoning)")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        reasoning > 0,
        "the model's reasoning is counted apart: {stderr}"
    );
    // A request the engine refuses is refused here too.
    let out = Command::new(env!("CARGO_BIN_EXE_afm-serve"))
        .args(["generate", "--model", "smollm2", "--prompt", "hi"])
        .args(["--max-tokens", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "max_tokens 0 must be refused");
}

#[test]
fn missing_model_path() {
    assert_one_line_error("/no/such/dir/model.gguf", "model path does not exist");
}

#[test]
fn unknown_alias() {
    assert_one_line_error("smollm9", "unknown model alias 'smollm9'");
}

#[test]
fn truncated_gguf() {
    let bundled =
        afm_engine::loading::ModelSource::resolve("smollm2").expect("run scripts/setup.sh first");
    let bytes = std::fs::read(bundled.path()).unwrap();
    let dir = scratch("truncated");
    for cut in [bytes.len() / 2, 1000] {
        let path = dir.join(format!("cut-{cut}.gguf"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert_one_line_error(path.to_str().unwrap(), "truncated GGUF");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn not_a_gguf_file() {
    let dir = scratch("notgguf");
    let path = dir.join("model.gguf");
    std::fs::write(&path, b"this is not a model at all").unwrap();
    assert_one_line_error(path.to_str().unwrap(), "not a GGUF file");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn unsupported_architecture() {
    let dir = scratch("arch");
    write(
        &dir.join("config.json"),
        r#"{"model_type": "rwkv", "hidden_size": 8}"#,
    );
    assert_one_line_error(
        dir.to_str().unwrap(),
        "unsupported model architecture 'rwkv'",
    );
    std::fs::remove_dir_all(dir).unwrap();
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Server flags that cannot be honoured end start-up with one line naming
/// the flag and the problem.
#[test]
fn bad_serve_flags_name_the_problem() {
    let broken = scratch("template").join("broken.jinja");
    std::fs::write(&broken, "{% for m in messages %}{{ m.content }").unwrap();
    let broken = broken.to_string_lossy().into_owned();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--tool-call-parser", "xml"],
            "--tool-call-parser: unknown parser 'xml'",
        ),
        (
            &["--chat-template", "/nonexistent/template.jinja"],
            "--chat-template: cannot read",
        ),
        (&["--chat-template", &broken, "--port", "0"], "template"),
    ];
    for (args, expected) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_afm-serve"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("afm-serve: error: ") && last.contains(expected),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
