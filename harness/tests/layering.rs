//! The dependency rules of `docs/architecture.md`, held against the code:
//! in both crates the top-level folders depend one way, in the order the
//! page gives. A folder's files may name only folders below it
//! (`crate::NAME` paths, `use crate::{..}` groups); a new folder must be
//! placed in the order, here and on the page.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level folders (and root files), top floor first; a folder may
/// import only those on lower floors. `bin` and `lib.rs` stand above all.
const ENGINE: &[&[&str]] = &[
    &["api"],
    &["runtime"],
    &["models"],
    &["loading"],
    &["layers"],
    &["cpu"],
    &["device"],
    &["parsers", "error"],
];
const HARNESS: &[&[&str]] = &[
    &["run", "hostile", "soak", "mock"],
    &["bench"],
    &["report"],
    &["clients"],
    &["suite"],
    &["server"],
    &["protocol"],
    &["outcome", "toml_input", "run_info"],
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate's top-level names each file of `top` refers to.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let mut parts = rel.iter().map(|p| p.to_string_lossy().to_string());
        let first = parts.next().expect("a path");
        let top = match parts.next() {
            Some(_) => first,
            None => first.trim_end_matches(".rs").to_string(),
        };
        if top == "bin" || top == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable");
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let names = edges.entry(top.clone()).or_default();
        let mut rest = code.as_str();
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let group = rest
                .strip_prefix('{')
                .map(|g| g.split('}').next().unwrap_or(""));
            let heads: Vec<&str> = match group {
                Some(g) => g.split(',').map(str::trim).collect(),
                None => vec![rest],
            };
            for head in heads {
                let name: String = head
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != top {
                    names.insert(name);
                }
            }
        }
    }
    edges
}

/// Every import that does not run down the floors, as `a -> b (why)`.
fn upward(src: &Path, floors: &[&[&str]]) -> Vec<String> {
    let floor = |name: &str| floors.iter().position(|f| f.contains(&name));
    let mut wrong = Vec::new();
    for (from, names) in imports(src) {
        let Some(a) = floor(&from) else {
            wrong.push(format!("{from}: a folder the page's order does not place"));
            continue;
        };
        for to in names {
            match floor(&to) {
                Some(b) if b > a => {}
                Some(_) => wrong.push(format!("{from} -> {to}: does not run down")),
                // A name of the crate root (a re-export, a macro).
                None => {}
            }
        }
    }
    wrong
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn the_engines_folders_depend_one_way_as_the_architecture_page_says() {
    let wrong = upward(&crate_src("engine"), ENGINE);
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_harness_folders_depend_one_way_as_the_architecture_page_says() {
    let wrong = upward(&crate_src("harness"), HARNESS);
    assert!(wrong.is_empty(), "{wrong:#?}");
}
