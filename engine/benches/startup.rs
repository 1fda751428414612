//! `afm-serve` start-up: process spawn to the first 200 on `/health`
//! (model load included), printed over several runs.
//!
//! `cargo bench -p afm-engine --bench startup [-- --runs N]`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.write_all(b"GET /health HTTP/1.0\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200")
}

fn main() {
    let mut runs = 5;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--runs" {
            runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N");
        }
    }
    let mut times = Vec::new();
    for _ in 0..runs {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let start = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_afm-serve"))
            .args([
                "--model",
                "smollm2",
                "--port",
                &port.to_string(),
                "--log-level",
                "error",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        while !healthy(port) {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "no /health after 120 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        times.push(start.elapsed().as_secs_f64() * 1e3);
        let _ = child.kill();
        let _ = child.wait();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "afm-serve start-up to first 200 on /health (smollm2, {runs} runs): median {:.0} ms, min {:.0} ms, max {:.0} ms",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
}
