//! limiter-async's integration tests in one test binary: each module below
//! was a binary of its own, and each of those compiled and linked tokio and
//! the limiter again. The modules share nothing but the process: every test
//! runs on its own tokio runtime (most in paused time) with its own
//! limiters. Run one module with
//! `cargo test -p limiter-async --test integration <module>::`.

mod any_limiter;
mod cancel;
mod deadlines;
mod fairness;
mod pacing;
mod runtime;
mod slot_wait;
mod throttle;
mod wake_up;
