//! The one spelling of a host the wall compares, routes and dials.
//!
//! A host can be written many ways that name the same machine: `API.example.com.` and
//! `api.example.com`; `127.1`, `0x7f.0.0.1`, `2130706433` and `127.0.0.1` (the forms
//! `inet_aton` reads, which the system's resolver accepts when dialling); `[::1]`,
//! `0:0:0:0:0:0:0:1` and `::ffff:127.0.0.1`. The allowlist is judged on the canonical form
//! and the proxy dials that same form, so no spelling reaches a host its canonical name
//! would not.
//!
//! What it must never do: resolve a name (that is the proxy's, once, when it dials).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `raw` in its one spelling: lowercase, without IPv6 brackets or a trailing dot; an IPv4
/// address as its dotted quad; an IPv6 address in its shortest form, or as the IPv4 it
/// maps.
pub fn canonical(raw: &str) -> String {
    let host = raw.trim();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    match address(&host) {
        Some(ip) => ip.to_string(),
        None => host,
    }
}

/// The address a host of canonical or other spelling is, when it is one.
pub fn address(host: &str) -> Option<IpAddr> {
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        return Some(match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        });
    }
    inet_aton(host).map(IpAddr::V4)
}

/// Whether `host` is a loopback of this machine: `127.0.0.0/8` or `::1` in any spelling,
/// `localhost`, or a name under `.localhost`.
pub fn is_loopback(host: &str) -> bool {
    match address(host) {
        Some(ip) => ip.is_loopback(),
        None => host == "localhost" || host.ends_with(".localhost"),
    }
}

/// Whether `host` is this machine: a loopback (see [`is_loopback`]) or the unspecified
/// address (which a connect reaches this machine by).
pub fn is_local(host: &str) -> bool {
    is_loopback(host) || address(host).is_some_and(|ip| ip.is_unspecified())
}

/// An IPv4 address in any form `inet_aton` takes: one to four parts, each decimal, octal
/// (a leading `0`) or hexadecimal (`0x`), the last filling the bytes left.
fn inet_aton(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = parts.iter().map(|p| number(p)).collect::<Option<_>>()?;
    let (last, leading) = numbers.split_last()?;
    if leading.iter().any(|&n| n > 0xff) {
        return None;
    }
    let left_bits = 8 * (4 - leading.len() as u32);
    if left_bits < 64 && *last >= 1u64 << left_bits {
        return None;
    }
    let value = leading
        .iter()
        .fold(0u64, |acc, &n| (acc << 8) | n)
        .checked_shl(left_bits)?
        | last;
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

fn number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        return if hex.is_empty() {
            Some(0)
        } else {
            u64::from_str_radix(hex, 16).ok()
        };
    }
    if part.len() > 1 && part.starts_with('0') {
        return u64::from_str_radix(&part[1..], 8).ok();
    }
    part.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_host_has_one_form() {
        for (raw, one) in [
            ("API.Anthropic.COM", "api.anthropic.com"),
            ("api.anthropic.com.", "api.anthropic.com"),
            ("127.0.0.1", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("10.1.2", "10.1.0.2"),
            ("[::1]", "::1"),
            ("::1", "::1"),
            ("0:0:0:0:0:0:0:1", "::1"),
            ("[::ffff:127.0.0.1]", "127.0.0.1"),
            ("[2001:DB8::1]", "2001:db8::1"),
            ("1.2.3.4.example.com", "1.2.3.4.example.com"),
        ] {
            assert_eq!(canonical(raw), one, "{raw}");
        }
    }

    #[test]
    fn what_is_not_an_address_stays_a_name() {
        for name in [
            "256.1.1.1",
            "1.2.3.4.5",
            "1..2",
            "08.1.1.1",
            "4294967296",
            "0x1g",
        ] {
            assert_eq!(address(name), None, "{name}");
        }
    }

    #[test]
    fn this_machine_is_local_in_every_spelling() {
        for host in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "0.0.0.0",
            "::",
            "localhost",
            "a.localhost",
        ] {
            assert!(is_local(&canonical(host)), "{host}");
        }
        for host in [
            "10.0.0.1",
            "api.anthropic.com",
            "localhost.example.com",
            "::2",
        ] {
            assert!(!is_local(&canonical(host)), "{host}");
        }
    }
}
