//! What the value check costs: `cargo run --release -p tilemaxsim --example finite_check -- FILE`.
//! Times opening FILE with and without the check (each a fresh map, so page faults count), and
//! the scan alone on one core over memory already mapped: the branch-free `all_finite` the
//! check uses against the early-exit `first_non_finite` loop it replaced.

use std::time::Instant;

use tilemaxsim::Corpus;
use tilemaxsim::corpus::OpenOptions;

fn best_of(n: usize, mut f: impl FnMut()) -> f64 {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: finite_check FILE")?;
    let unchecked = || OpenOptions::new().check_finite(false).open(&path);
    let c = unchecked()?;
    let gb = c.size_bytes() as f64 / 1e9;
    println!(
        "{path}: {} documents, {} tokens, d = {}, {}, {gb:.2} GB; {} threads",
        c.len(),
        c.num_tokens(),
        c.dim(),
        c.dtype(),
        rayon::current_num_threads()
    );
    let open = best_of(5, || drop(unchecked().expect("opens")));
    let scan = best_of(5, || {
        let c = unchecked().expect("opens");
        c.check_finite().expect("finite");
    });
    let default = best_of(5, || drop(Corpus::open(&path).expect("opens")));
    println!("open, check off:          {:7.1} ms", open * 1e3);
    println!(
        "open, then check_finite: {:7.1} ms ({:.1} GB/s, page faults included)",
        scan * 1e3,
        gb / (scan - open)
    );
    println!("Corpus::open (default):  {:7.1} ms", default * 1e3);
    // One core, memory already faulted in: the scan loop alone.
    let e = c.tokens().elements();
    assert!(e.all_finite());
    let new = best_of(5, || assert!(e.all_finite()));
    let old = best_of(5, || assert!(e.first_non_finite().is_none()));
    println!(
        "one core, mapped: all_finite {:.1} ms ({:.1} GB/s), first_non_finite {:.1} ms ({:.1} GB/s)",
        new * 1e3,
        gb / new,
        old * 1e3,
        gb / old
    );
    Ok(())
}
