//! Every fuzz target's seeds (`fuzz/seeds/<target>/`), then a fixed run of
//! mutations of them: what CI checks of the targets on every commit, with
//! no sanitizer build (`cargo xtask fuzz` runs libFuzzer with it).

use std::path::PathBuf;

use graceful_fuzz_checks::{
    mutate::{mutate, Rng},
    TARGETS,
};

/// Mutations per target: about half a second each in a debug build.
const MUTATIONS: usize = 10_000;

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../seeds")
        .join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (p.display().to_string(), std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(out.len() >= 3, "{}: too few seeds ({})", dir.display(), out.len());
    out
}

fn replay(target: &str, check: fn(&[u8])) {
    let seeds = seeds(target);
    for (name, data) in &seeds {
        let r = std::panic::catch_unwind(|| check(data));
        assert!(r.is_ok(), "{target}: the seed {name} fails");
    }
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    for i in 0..MUTATIONS {
        let (_, a) = &seeds[rng.below(seeds.len())];
        let (_, b) = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, a, b);
        if std::panic::catch_unwind(|| check(&input)).is_err() {
            panic!("{target}: mutation {i} fails; its bytes: {input:?}");
        }
    }
}

#[test]
fn every_target_takes_its_seeds_and_their_mutations() {
    for (target, check) in TARGETS {
        replay(target, check);
    }
}

#[test]
fn every_target_has_a_cargo_fuzz_binary() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")).unwrap();
    for (target, _) in TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{target}\"")),
            "fuzz/Cargo.toml has no binary {target}"
        );
    }
}
