//! The coverage map of AFM's own harness (`fixtures/afm-parity/coverage.toml`,
//! `scripts/afm-parity/coverage.py`) names only cases that exist, and every
//! assertion in it is either covered, not applicable with a reason, or
//! openly not covered yet: a case renamed or removed breaks this test.

use std::collections::HashSet;

use afm_harness::suite::load_embedded;

#[test]
fn every_case_the_afm_parity_map_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("fixtures/afm-parity/coverage.toml")).unwrap();
    let map: toml::Table = toml::from_str(&text).unwrap();
    let ids: HashSet<String> = load_embedded()
        .unwrap()
        .iter()
        .flat_map(|s| s.cases.iter().map(|c| c.id.clone()))
        .collect();
    let assertions = map["assertion"].as_array().unwrap();
    assert!(assertions.len() >= 140, "{} assertions", assertions.len());
    let mut covered = 0;
    for a in assertions {
        let name = a["name"].as_str().unwrap();
        if let Some(cases) = a.get("cases").and_then(|c| c.as_array()) {
            assert!(!cases.is_empty(), "{name}: an empty case list");
            for c in cases {
                let c = c.as_str().unwrap();
                assert!(ids.contains(c), "{name}: no case {c}");
            }
            covered += 1;
            assert!(
                a.get("not_applicable").is_none(),
                "{name}: both covered and n/a"
            );
        } else if let Some(why) = a.get("not_applicable") {
            assert!(
                !why.as_str().unwrap().is_empty(),
                "{name}: n/a without a reason"
            );
        }
    }
    assert!(covered > 0);
}
