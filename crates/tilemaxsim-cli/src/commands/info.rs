//! `tilemaxsim info`: what this machine offers: CPU flavours and features, GPUs.

use anyhow::Result;
use tilemaxsim::Isa;

pub fn run() -> Result<()> {
    println!("tilemaxsim {}", env!("CARGO_PKG_VERSION"));
    println!("cpu");
    println!("  threads    {}", rayon::current_num_threads());
    println!(
        "  kernel     {} (available: {})",
        Isa::detect(),
        Isa::available()
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let feats = tilemaxsim::cpu::cpu_features();
    let has: Vec<_> = feats.iter().filter(|f| f.1).map(|f| f.0).collect();
    let lacks: Vec<_> = feats.iter().filter(|f| !f.1).map(|f| f.0).collect();
    println!("  features   {}", has.join(" "));
    if !lacks.is_empty() {
        println!("  lacks      {}", lacks.join(" "));
    }
    println!("cuda");
    // The reason is the one `--device cuda` reports (the engine's own check), so both agree.
    if let Err(e) = tilemaxsim::cuda::check_available(0) {
        println!("  no usable GPU ({e}); the CPU engine is used");
        return Ok(());
    }
    match tilemaxsim::cuda::nvrtc_version() {
        Ok((a, b)) => println!("  NVRTC {a}.{b}"),
        Err(e) => println!("  NVRTC: {e}"),
    }
    match tilemaxsim::cuda::devices() {
        Ok(gpus) => {
            for g in gpus {
                println!("  cuda:{}  {g}", g.ordinal);
            }
        }
        Err(e) => println!("  error listing GPUs: {e}"),
    }
    Ok(())
}
