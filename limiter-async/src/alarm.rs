//! The timer thread's alarm clock: how it sleeps until its next deadline,
//! and how a registration with an earlier deadline moves that wake-up
//! forward.
//!
//! * **Linux: a `timerfd`** (`CLOCK_MONOTONIC`, the clock of
//!   `std::time::Instant`). The thread blocks in `read` on it; whoever holds
//!   the queue's mutex re-arms it with `timerfd_settime`, the thread for its
//!   next deadline, a registering task for an earlier one. An earlier
//!   deadline therefore costs one system call in the registering thread and
//!   no wake-up of the timer thread, and the kernel's timerfd timers have no
//!   timer slack (they expire at their instant, not up to 50 µs later).
//! * **Elsewhere, or if no timerfd can be made: park/unpark.** The thread
//!   parks with `park_timeout` until its next deadline; a registration with
//!   an earlier one unparks it, and it re-plans.
//!
//! Invariant: [`Alarm::set`] is only called with the queue's mutex held, so
//! the armed deadline is always the one the queue records
//! (`sleeping_until`): a registration's earlier deadline cannot be
//! overwritten by the thread arming a later one it computed before.
//!
//! The three `unsafe` blocks are the `timerfd` system calls (through
//! `libc`, which std does not wrap) and taking ownership of the new
//! descriptor; each says why it is sound.

use std::io;
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The registering side: moves the thread's wake-up to an earlier instant.
#[derive(Debug)]
pub(crate) enum Alarm {
    /// Re-arm the shared timerfd.
    #[cfg(target_os = "linux")]
    TimerFd(Arc<timerfd::TimerFd>),
    /// Unpark the timer thread, which then re-plans.
    Unpark(Thread),
}

/// The timer thread's side: sleeps until the alarm rings.
#[derive(Debug)]
pub(crate) enum Sleeper {
    /// Blocks reading the shared timerfd.
    #[cfg(target_os = "linux")]
    TimerFd(Arc<timerfd::TimerFd>),
    /// Parks until the deadline or an unpark.
    Park,
}

/// The two sides of one shared timerfd, if the platform has timerfds and
/// one can be made; `None`: park and unpark.
pub(crate) fn timerfd_pair() -> Option<(Alarm, Sleeper)> {
    #[cfg(target_os = "linux")]
    {
        let fd = Arc::new(timerfd::TimerFd::new().ok()?);
        Some((Alarm::TimerFd(Arc::clone(&fd)), Sleeper::TimerFd(fd)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

impl Alarm {
    /// Makes the timer thread wake by `at`. Call with the queue's mutex
    /// held (module invariant).
    pub(crate) fn set(&self, at: Instant) {
        match self {
            #[cfg(target_os = "linux")]
            Alarm::TimerFd(fd) => fd.arm(at),
            Alarm::Unpark(thread) => thread.unpark(),
        }
    }
}

impl Sleeper {
    /// Arms the alarm for the thread's own next deadline. Call with the
    /// queue's mutex held (module invariant).
    pub(crate) fn plan(&self, next: Option<Instant>) {
        match (self, next) {
            #[cfg(target_os = "linux")]
            (Sleeper::TimerFd(fd), Some(at)) => fd.arm(at),
            // Nothing due: a registration arms the timerfd. Parking plans
            // in `sleep`.
            _ => {}
        }
    }

    /// Sleeps until the alarm rings or, when parking, until `next`.
    pub(crate) fn sleep(&self, next: Option<Instant>) {
        match (self, next) {
            #[cfg(target_os = "linux")]
            (Sleeper::TimerFd(fd), _) => fd.wait(),
            (Sleeper::Park, None) => std::thread::park(),
            (Sleeper::Park, Some(at)) => {
                std::thread::park_timeout(at.saturating_duration_since(Instant::now()));
            }
        }
    }
}

/// The time from now until `at`, at least 1 ns (a zero `it_value` would
/// disarm a timerfd instead of firing it).
fn until(at: Instant) -> Duration {
    at.saturating_duration_since(Instant::now())
        .max(Duration::from_nanos(1))
}

#[cfg(target_os = "linux")]
mod timerfd {
    use std::fs::File;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd};

    use super::{Instant, io, until};

    /// A one-shot `CLOCK_MONOTONIC` timerfd, read blocking.
    #[derive(Debug)]
    pub(crate) struct TimerFd(File);

    impl TimerFd {
        pub(super) fn new() -> io::Result<TimerFd> {
            // Safety: `timerfd_create` takes no pointers; it returns a new
            // descriptor or -1.
            let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // Safety: `fd` was just created and is owned by nothing else; the
            // `File` takes sole ownership and closes it on drop.
            Ok(TimerFd(unsafe { File::from_raw_fd(fd) }))
        }

        /// Arms the timer to expire at `at` (relative to now: `Instant` is
        /// `CLOCK_MONOTONIC` but does not expose its reading). A failure
        /// (impossible for a valid descriptor and in-range value) leaves the
        /// previous arming; the thread still wakes at its own deadline.
        pub(super) fn arm(&self, at: Instant) {
            let after = until(at);
            let value = libc::timespec {
                tv_sec: libc::time_t::try_from(after.as_secs()).unwrap_or(libc::time_t::MAX),
                // Below 10^9: fits every `c_long`.
                tv_nsec: after.subsec_nanos() as libc::c_long,
            };
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: value,
            };
            // Safety: the descriptor is a live timerfd owned by `self.0`;
            // `spec` is a valid `itimerspec` that outlives the call, and the
            // old value is not asked for (null is allowed).
            let _kept_previous_on_error = unsafe {
                libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
        }

        /// Blocks until the timer has expired (at least once since the last
        /// read). An error (a signal) returns early: the thread re-plans.
        pub(super) fn wait(&self) {
            let mut expirations = [0u8; 8];
            let _early_on_error = (&self.0).read(&mut expirations);
        }
    }
}
