//! Every mutation the engine declares (`engine/src/mutation.rs`) is checked by
//! `run-mutations.sh` against a model that exists, and the script names no other: a mutation
//! nobody runs would prove nothing, and a model nobody mutates could stop being able to fail
//! unnoticed.
#![cfg(not(loom))]

use magma_engine::mutation;
use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn run_mutations_covers_every_mutation_with_an_existing_model() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(dir.join("run-mutations.sh")).expect("the script");
    let table = script
        .split("MUTATIONS=(")
        .nth(1)
        .and_then(|t| t.split("\n)").next())
        .expect("the MUTATIONS table");
    let mut listed = BTreeSet::new();
    for row in table.lines().map(str::trim).filter(|l| l.starts_with('"')) {
        let mut cols = row.trim_matches('"').split('|');
        let (name, model) = (cols.next().unwrap(), cols.next().expect("a model column"));
        assert!(cols.next().is_some(), "{name}: no expected failure text");
        assert!(
            dir.join("tests").join(format!("{model}.rs")).is_file(),
            "{name}: model {model} does not exist"
        );
        assert!(listed.insert(name.to_owned()), "{name} listed twice");
    }
    let declared: BTreeSet<String> = mutation::ALL.iter().map(|m| m.to_string()).collect();
    assert_eq!(
        listed, declared,
        "run-mutations.sh vs engine/src/mutation.rs"
    );
}
