//! `limiter-rls`: Envoy's rate limit service, configured as
//! envoyproxy/ratelimit is (environment variables and the YAML directory;
//! see docs/rls.md). Prints `limiter-rls listening grpc=… http=… debug=…`
//! once bound; exits 1 with the reason on a bad setting or config, 0 after
//! a graceful SIGTERM. `--help` (the environment variables it reads) and
//! `--version` answer without starting anything; other arguments exit 2.

use std::process::ExitCode;

use limiter_rls::settings::Settings;

/// `limiter-rls --version`: the version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LIMITER_COMMIT"), ")");

/// See the workspace Cargo.toml's `mimalloc` entry.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // The only arguments: everything else is configured by the environment,
    // as envoyproxy/ratelimit is. Both answer before anything is read or bound.
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    match args.first().map(|a| a.to_str()) {
        None => {}
        Some(Some("-h" | "--help")) if args.len() == 1 => {
            print!("{}", limiter_rls::help());
            return ExitCode::SUCCESS;
        }
        Some(Some("-V" | "--version")) if args.len() == 1 => {
            println!("limiter-rls {VERSION}");
            return ExitCode::SUCCESS;
        }
        Some(_) => {
            eprintln!(
                "limiter-rls: unexpected arguments {args:?}; it takes --help or --version \
                 (the settings are environment variables: see --help)"
            );
            return ExitCode::from(2);
        }
    }
    let settings = match Settings::from_env(|k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("limiter-rls: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&settings.log_level))
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("limiter-rls: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(limiter_rls::run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("limiter-rls: {e}");
            ExitCode::FAILURE
        }
    }
}
