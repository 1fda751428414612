//! Parser throughput (being built).
fn main() {}
