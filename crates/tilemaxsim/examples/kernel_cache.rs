//! Fill the kernel cache ahead of a device call:
//! `TILEMAXSIM_CACHE_DIR=.dev/kcache cargo run --release -p tilemaxsim --features cuda --example
//! kernel_cache -- sm_90a`. Compiles the kernels with this machine's NVRTC for each architecture
//! named (any `TILEMAXSIM_KERNEL_DEFINES` variant included) into the cache directory, under the
//! key a device with the same NVRTC major.minor looks up, so the device starts from the cubin
//! instead of spending two minutes of its time in NVRTC.

fn main() {
    let archs: Vec<String> = std::env::args().skip(1).collect();
    if archs.is_empty() {
        eprintln!("usage: kernel_cache ARCH... (e.g. sm_90a)");
        std::process::exit(2);
    }
    let version = match tilemaxsim::cuda::nvrtc_version() {
        Ok((major, minor)) => format!("{major}.{minor}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    for arch in archs {
        // NVRTC's options need a static string; a handful of names a run leaks nothing real.
        let arch: &'static str = Box::leak(arch.into_boxed_str());
        let start = std::time::Instant::now();
        match tilemaxsim::cuda::compile_cached(arch) {
            Ok((_, hit)) => println!(
                "{arch}: NVRTC {version}, {} in {:.1} s",
                if hit { "already cached" } else { "compiled" },
                start.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("{arch}: {e}");
                std::process::exit(1);
            }
        }
    }
}
