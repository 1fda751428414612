//! `afm-bench`: throughput and latency runs (not yet built).

fn main() {
    eprintln!("afm-bench: benchmarks are not implemented yet");
    std::process::exit(2);
}
