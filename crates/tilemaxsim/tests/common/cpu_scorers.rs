//! The CPU scorers the tests check (each ISA this machine has, and the default scorer on pools of
//! 1 and 3 threads), made once a test binary, and the same with the float64 reference scorer.
use std::sync::OnceLock;

use tilemaxsim::{CpuScorer, Isa, ReferenceScorer, Scorer};

/// The CPU scorers under test, made once (each `threads(n)` starts a pool).
pub fn cpu_scorers() -> &'static [(String, CpuScorer)] {
    static SCORERS: OnceLock<Vec<(String, CpuScorer)>> = OnceLock::new();
    SCORERS.get_or_init(|| {
        let mut v: Vec<(String, CpuScorer)> = Isa::available()
            .into_iter()
            .map(|i| (format!("cpu-{i}"), CpuScorer::with_isa(i).unwrap()))
            .collect();
        assert!(v.iter().any(|(_, s)| s.isa() == Isa::Portable));
        v.push((
            "cpu-default-1-thread".into(),
            CpuScorer::new().threads(1).unwrap(),
        ));
        v.push((
            "cpu-default-3-threads".into(),
            CpuScorer::new().threads(3).unwrap(),
        ));
        v
    })
}

/// The CPU scorers plus the float64 reference scorer.
pub fn every_scorer() -> Vec<(&'static str, &'static dyn Scorer)> {
    static REFERENCE: ReferenceScorer = ReferenceScorer;
    let mut v: Vec<(&'static str, &'static dyn Scorer)> = cpu_scorers()
        .iter()
        .map(|(n, s)| (n.as_str(), s as &dyn Scorer))
        .collect();
    v.push(("reference", &REFERENCE));
    v
}
