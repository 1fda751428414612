//! afm-bench's mock server for the tests: started on a free port in a
//! thread of its own (the runs under test build their own runtimes), with
//! short timings so a level takes milliseconds.

use afm_harness::mock::{self, MockArgs};

/// Fast timing: 5 ms to the first token, 2 ms between tokens, 12 tokens.
pub fn fast() -> MockArgs {
    MockArgs::timed(5.0, 2.0, 12)
}

/// Serves `args` until the process ends; returns the base URL.
pub fn start(args: MockArgs) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            tx.send(mock::spawn(args).await.unwrap()).unwrap();
            std::future::pending::<()>().await
        });
    });
    rx.recv().unwrap()
}

/// afm-bench's settings for a run against `url`, as its command line
/// would give them: no warm-up, 16 requests a level unless `extra` says,
/// then `extra`.
pub fn bench_args(
    url: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> afm_harness::run::bench::args::BenchArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: afm_harness::run::bench::args::BenchArgs,
    }
    let out = out.display().to_string();
    let mut argv = vec!["afm-bench", "--url", url, "--out", &out];
    argv.extend(["--warmup", "0"]);
    if !extra.contains(&"--requests") {
        argv.extend(["--requests", "16"]);
    }
    argv.extend(extra);
    Cli::try_parse_from(argv).unwrap().args
}
