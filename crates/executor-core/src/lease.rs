//! Run leases, decided: whether this runner may carry a run that may be held by another.
//!
//! A lease names its holder as `host:pid:start_time` (the start time tells a reused pid
//! from the process that took the lease). A run is free when it has no lease, its lease has
//! expired, or this runner already holds it; a lease held by a dead process on this host is
//! taken over at once (recovery after a crash need not wait for the expiry). A lease of a
//! live process, or of another host before it expires, is respected.
//!
//! Pure: the caller says what time it is and whether a process is alive.

use chrono::{DateTime, Utc};

use crate::record::Lease;

/// A lease holder: one runner process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    /// The process's start time (clock ticks since boot), when it could be read.
    pub start: Option<u64>,
}

impl Holder {
    /// `host:pid:start`, as stored (`-` for an unknown start time).
    pub fn id(&self) -> String {
        match self.start {
            Some(start) => format!("{}:{}:{start}", self.host, self.pid),
            None => format!("{}:{}:-", self.host, self.pid),
        }
    }

    /// Reads an id written by [`Holder::id`]; a host name may itself hold `:`.
    pub fn parse(id: &str) -> Option<Holder> {
        let (rest, start) = id.rsplit_once(':')?;
        let (host, pid) = rest.rsplit_once(':')?;
        Some(Holder {
            host: host.to_string(),
            pid: pid.parse().ok()?,
            start: if start == "-" {
                None
            } else {
                Some(start.parse().ok()?)
            },
        })
    }
}

/// What this runner may do with a run's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Take it: no lease, an expired one, or ours already.
    Take,
    /// Take it over from a dead holder on this host.
    TakeOver { from: String },
    /// Leave the run alone: a live runner carries it.
    Held {
        holder: String,
        until: DateTime<Utc>,
    },
}

/// Whether `me` may carry the run whose lease is `lease`. `alive` says whether a holder
/// on this host still runs (same pid and start time).
pub fn claim(
    lease: Option<&Lease>,
    me: &Holder,
    now: DateTime<Utc>,
    alive: impl Fn(&Holder) -> bool,
) -> Claim {
    let Some(lease) = lease else {
        return Claim::Take;
    };
    if lease.holder == me.id() || lease.expires_at < now {
        return Claim::Take;
    }
    match Holder::parse(&lease.holder) {
        Some(holder) if holder.host == me.host && !alive(&holder) => Claim::TakeOver {
            from: lease.holder.clone(),
        },
        _ => Claim::Held {
            holder: lease.holder.clone(),
            until: lease.expires_at,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0)
            .single()
            .expect("a time")
    }

    fn me() -> Holder {
        Holder {
            host: "build-1".into(),
            pid: 100,
            start: Some(5),
        }
    }

    fn lease(holder: &str, until: i64) -> Lease {
        Lease {
            run_id: 1,
            holder: holder.into(),
            expires_at: at(until),
        }
    }

    #[test]
    fn ids_round_trip_even_with_colons_in_the_host() {
        for holder in [
            me(),
            Holder {
                host: "fe80::1".into(),
                pid: 7,
                start: None,
            },
        ] {
            assert_eq!(Holder::parse(&holder.id()), Some(holder));
        }
        assert_eq!(Holder::parse("nonsense"), None);
        assert_eq!(Holder::parse("h:notapid:1"), None);
    }

    #[test]
    fn a_run_is_taken_when_free_expired_or_ours() {
        let alive = |_: &Holder| true;
        assert_eq!(claim(None, &me(), at(0), alive), Claim::Take);
        assert_eq!(
            claim(Some(&lease("build-2:9:9", -1)), &me(), at(0), alive),
            Claim::Take
        );
        assert_eq!(
            claim(Some(&lease(&me().id(), 60)), &me(), at(0), alive),
            Claim::Take
        );
    }

    #[test]
    fn a_live_holder_or_another_hosts_unexpired_lease_is_respected() {
        let held = claim(Some(&lease("build-1:200:7", 60)), &me(), at(0), |_| true);
        assert!(matches!(held, Claim::Held { .. }), "{held:?}");
        // Another host's process cannot be checked from here: its lease must expire.
        let other = claim(Some(&lease("build-2:200:7", 60)), &me(), at(0), |_| false);
        assert!(matches!(other, Claim::Held { .. }), "{other:?}");
        // An unreadable holder is respected too, until it expires.
        let odd = claim(Some(&lease("???", 60)), &me(), at(0), |_| false);
        assert!(matches!(odd, Claim::Held { .. }), "{odd:?}");
    }

    #[test]
    fn a_dead_holder_on_this_host_is_taken_over_at_once() {
        assert_eq!(
            claim(Some(&lease("build-1:200:7", 60)), &me(), at(0), |h| h.pid
                != 200),
            Claim::TakeOver {
                from: "build-1:200:7".into()
            }
        );
    }
}
