//! When a worker must be stopped: the no-output watchdog and the hard timeout, as one pure
//! decision over how long the worker has run and how long it has been quiet. "Quiet" means
//! no meaningful event (an assistant message, a tool call or result, a protocol line); what
//! counts as meaningful is the agent adapter's call, not this module's.

use std::time::Duration;

/// The limits one worker runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// No meaningful event for this long: stop (the worker is stuck).
    pub no_output: Duration,
    /// Wall-clock cap.
    pub hard: Duration,
}

/// Why a worker is being stopped by the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The no-output watchdog fired.
    NoOutput,
    /// The hard timeout fired.
    HardTimeout,
    /// Someone asked (shutdown, the owner, a superseded run).
    Requested,
    /// It tried to start more processes than its cap (`[sandbox] max_processes`) allows.
    ProcessCap,
    /// It wrote more than its disk budget (`[sandbox] max_disk`) allows.
    DiskBudget,
}

/// The stop the limits call for, if any. The hard timeout wins when both are due.
pub fn check(limits: Limits, running_for: Duration, quiet_for: Duration) -> Option<StopReason> {
    if running_for >= limits.hard {
        Some(StopReason::HardTimeout)
    } else if quiet_for >= limits.no_output {
        Some(StopReason::NoOutput)
    } else {
        None
    }
}

/// How long until [`check`] can next say stop, given nothing meaningful happens meanwhile.
pub fn next_check_in(limits: Limits, running_for: Duration, quiet_for: Duration) -> Duration {
    let to_hard = limits.hard.saturating_sub(running_for);
    let to_quiet = limits.no_output.saturating_sub(quiet_for);
    to_hard.min(to_quiet)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        no_output: Duration::from_secs(30 * 60),
        hard: Duration::from_secs(3 * 60 * 60),
    };

    fn mins(n: u64) -> Duration {
        Duration::from_secs(n * 60)
    }

    #[test]
    fn a_busy_worker_within_its_time_runs_on() {
        assert_eq!(check(LIMITS, mins(60), mins(1)), None);
        assert_eq!(next_check_in(LIMITS, mins(60), mins(1)), mins(29));
    }

    #[test]
    fn thirty_quiet_minutes_stop_it_as_stuck() {
        assert_eq!(
            check(LIMITS, mins(45), mins(30)),
            Some(StopReason::NoOutput)
        );
        assert_eq!(check(LIMITS, mins(45), mins(29)), None);
    }

    #[test]
    fn three_hours_stop_it_however_busy() {
        assert_eq!(
            check(LIMITS, mins(180), mins(0)),
            Some(StopReason::HardTimeout)
        );
        assert_eq!(next_check_in(LIMITS, mins(170), mins(0)), mins(10));
    }

    #[test]
    fn the_hard_timeout_wins_when_both_are_due() {
        assert_eq!(
            check(LIMITS, mins(200), mins(40)),
            Some(StopReason::HardTimeout)
        );
    }

    #[test]
    fn an_overdue_check_is_due_now() {
        assert_eq!(next_check_in(LIMITS, mins(200), mins(40)), Duration::ZERO);
    }
}
