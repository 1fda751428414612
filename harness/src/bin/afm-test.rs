//! `afm-test`: runs assertion suites against an engine or server (not yet built).

fn main() {
    eprintln!("afm-test: the assertion suites are not implemented yet");
    std::process::exit(2);
}
