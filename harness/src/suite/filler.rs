//! Deterministic filler text for long prompts: the suites' `{{filler:N}}`
//! placeholder and the benchmark's long and shared-prefix prompts.

/// `n` sentences of about ten tokens each, varied but the same every run.
pub fn sentences(n: usize) -> String {
    const SUBJECTS: [&str; 6] = [
        "The archive",
        "A river",
        "The council",
        "Each lamp",
        "Our garden",
        "The old clock",
    ];
    const VERBS: [&str; 5] = ["records", "follows", "remembers", "guards", "measures"];
    const OBJECTS: [&str; 7] = [
        "the northern road",
        "every quiet evening",
        "a list of names",
        "the color of rain",
        "seven stone bridges",
        "the harvest ledger",
        "a forgotten song",
    ];
    (0..n)
        .map(|i| {
            format!(
                "Rule {i}: {} {} {}.",
                SUBJECTS[i % SUBJECTS.len()],
                VERBS[(i / 2) % VERBS.len()],
                OBJECTS[(i * 3) % OBJECTS.len()]
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}
