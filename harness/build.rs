//! Embeds the suites (the repository's top-level `suites/*.toml`) in the
//! binaries, so an installed afm-test runs them without a checkout beside
//! it.

use std::fmt::Write;
use std::path::Path;

fn main() {
    // Read when the script runs: a build script binary reused from another
    // checkout must not embed that checkout's suites.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("../suites");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the repository's suites folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("/// The suites as built in: (file name, text).\npub const EMBEDDED: &[(&str, &str)] = &[\n");
    for f in files {
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a UTF-8 name");
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            f.display().to_string()
        )
        .expect("write");
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("embedded_suites.rs");
    std::fs::write(dest, out).expect("writing the embedded suites");
}
