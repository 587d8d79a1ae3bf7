//! Request guards that run before any route: the Host/Origin check (DNS rebinding and
//! browser CSRF) and the read/write rate limits.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::http::HeaderMap;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use crate::config::Config;
use crate::error::{Error, Reason};

/// Which `Host` and `Origin` values may reach the daemon.
#[derive(Debug, Clone)]
pub struct HostGuard {
    extra_hosts: Vec<String>,
    origins: Vec<String>,
}

fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `host[:port]` without the port; IPv6 literals keep their brackets.
fn strip_port(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .split_once(']')
            .map_or(authority, |(h, _)| &h[1..]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            authority
        }
    })
}

impl HostGuard {
    pub fn new(config: &Config) -> Self {
        let mut extra_hosts: Vec<String> = config
            .allowed_hosts
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect();
        if !config.listen.ip().is_unspecified() && !config.listen.ip().is_loopback() {
            extra_hosts.push(config.listen.ip().to_string());
        }
        Self {
            extra_hosts,
            origins: config
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = strip_port(host).to_ascii_lowercase();
        is_loopback_name(&host) || self.extra_hosts.contains(&host)
    }

    /// Refuse a foreign `Host` or a present, foreign `Origin`. `target_authority` is the
    /// authority of an absolute-form request target (`GET http://host/path`), which names
    /// the host the request is for (RFC 9112, section 3.2.2): it is checked like `Host`,
    /// and a `Host` header that names another authority is refused. Two `Host` headers are
    /// refused too: a proxy and this guard could each read a different one.
    pub fn check(&self, headers: &HeaderMap, target_authority: Option<&str>) -> Result<(), Error> {
        let forbidden = |message: String| Error::new(Reason::ORIGIN_FORBIDDEN, message);
        let mut host_headers = headers.get_all("host").iter();
        let host_header = host_headers.next();
        if host_headers.next().is_some() {
            return Err(forbidden(
                "the request has more than one Host header".to_string(),
            ));
        }
        let host_header = match host_header.map(|h| h.to_str()) {
            Some(Ok(h)) => Some(h),
            Some(Err(_)) => {
                return Err(forbidden(
                    "the Host header is not a printable ASCII name".to_string(),
                ))
            }
            None => None,
        };
        // `user@host`: the user part names no host.
        let target = target_authority.map(|a| a.rsplit_once('@').map_or(a, |(_, host)| host));
        if let (Some(target), Some(header)) = (target, host_header) {
            if !target.eq_ignore_ascii_case(header) {
                return Err(forbidden(format!(
                    "the request target names host {target:?} but the Host header says {header:?}"
                ))
                .with_meta("host", target));
            }
        }
        match target.or(host_header) {
            Some(h) if self.host_allowed(h) => {}
            Some(h) => {
                return Err(forbidden(format!(
                    "host {h:?} is not a loopback name nor an allowed host"
                ))
                .with_meta("host", h))
            }
            None => return Err(forbidden("the request has no Host header".to_string())),
        }
        if let Some(origin) = headers.get("origin") {
            let origin = origin
                .to_str()
                .unwrap_or("")
                .trim_end_matches('/')
                .to_ascii_lowercase();
            let allowed = self.origins.contains(&origin)
                || origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"))
                    .is_some_and(|rest| !rest.contains('/') && is_loopback_name(strip_port(rest)));
            if !allowed {
                return Err(Error::new(
                    Reason::ORIGIN_FORBIDDEN,
                    format!("origin {origin:?} may not call this daemon"),
                )
                .with_meta("origin", origin));
            }
        }
        Ok(())
    }
}

/// Reads or writes: which rate limit a request counts against. Each row of the route
/// table (`routes::routes`) names its class; `routes::class` finds a request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Read,
    Write,
}

/// The `RateLimit-*` values of an admitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    pub limit: u32,
    pub remaining: u32,
    pub reset: u64,
}

struct Limit {
    per_minute: u32,
    limiter: RateLimiter<
        String,
        DefaultKeyedStateStore<String>,
        DefaultClock,
        StateInformationMiddleware,
    >,
}

/// Per-client rate limits for reads and writes (keyed by credential, else client address).
pub struct RateLimits {
    read: Option<Limit>,
    write: Option<Limit>,
}

/// A refused request: the limit's state for its headers, and the `RATE_LIMITED` error.
pub type Refused = Box<(Admitted, Error)>;

impl RateLimits {
    pub fn new(config: &Config) -> Self {
        let make = |per_minute: u32| {
            NonZeroU32::new(per_minute).map(|n| Limit {
                per_minute,
                limiter: RateLimiter::keyed(Quota::per_minute(n))
                    .with_middleware::<StateInformationMiddleware>(),
            })
        };
        Self {
            read: make(config.rate_limit_read_per_minute),
            write: make(config.rate_limit_write_per_minute),
        }
    }

    /// Admit one request of `class` from `key`; `Ok(None)` when that class is unlimited.
    pub fn admit(&self, class: Class, key: &str) -> Result<Option<Admitted>, Refused> {
        let Some(limit) = (match class {
            Class::Read => &self.read,
            Class::Write => &self.write,
        }) else {
            return Ok(None);
        };
        let seconds_per_token = 60.0 / f64::from(limit.per_minute);
        match limit.limiter.check_key(&key.to_string()) {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                let used = limit.per_minute.saturating_sub(remaining);
                Ok(Some(Admitted {
                    limit: limit.per_minute,
                    remaining,
                    reset: (f64::from(used) * seconds_per_token).ceil() as u64,
                }))
            }
            Err(not_until) => {
                // The limiter's own clock: a new `DefaultClock` calibrates itself (CPUID,
                // a timing loop): 17% of the CPU of a daemon refusing most of a load.
                let wait = not_until
                    .wait_time_from(limit.limiter.clock().now())
                    .as_secs_f64()
                    .ceil()
                    .max(1.0) as u64;
                // `RateLimit-Reset` says when a request would be admitted again, as
                // `Retry-After` does.
                let admitted = Admitted {
                    limit: limit.per_minute,
                    remaining: 0,
                    reset: wait,
                };
                let what = match class {
                    Class::Read => "read",
                    Class::Write => "write",
                };
                let err = Error::new(
                    Reason::RATE_LIMITED,
                    format!(
                        "{what} rate limit of {} per minute reached",
                        limit.per_minute
                    ),
                )
                .with_retry_after(wait)
                .with_meta("limit", limit.per_minute.to_string());
                Err(Box::new((admitted, err)))
            }
        }
    }
}

/// Shared guard state.
pub struct Guards {
    pub hosts: HostGuard,
    pub limits: Arc<RateLimits>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn loopback_hosts_pass_and_others_do_not() {
        let g = HostGuard::new(&Config::default());
        for ok in [
            "127.0.0.1:4000",
            "localhost",
            "[::1]:4000",
            "LOCALHOST:1",
            "app.localhost",
        ] {
            assert!(g.check(&headers(&[("host", ok)]), None).is_ok(), "{ok}");
        }
        for bad in ["evil.example", "127.0.0.1.nip.io:4000", "192.168.1.2"] {
            assert!(g.check(&headers(&[("host", bad)]), None).is_err(), "{bad}");
        }
        assert!(g
            .check(
                &headers(&[("host", "localhost"), ("origin", "http://evil.example")]),
                None
            )
            .is_err());
        assert!(g
            .check(&headers(&[("host", "localhost"), ("origin", "null")]), None)
            .is_err());
        assert!(g
            .check(
                &headers(&[("host", "localhost"), ("origin", "http://localhost:3000")]),
                None
            )
            .is_ok());
    }

    #[test]
    fn configured_hosts_and_origins() {
        let config = Config {
            allowed_hosts: vec!["notes.lan".into()],
            allowed_origins: vec!["https://app.example".into()],
            ..Config::default()
        };
        let g = HostGuard::new(&config);
        assert!(g
            .check(&headers(&[("host", "notes.lan:4000")]), None)
            .is_ok());
        assert!(g
            .check(
                &headers(&[("host", "notes.lan"), ("origin", "https://app.example")]),
                None
            )
            .is_ok());
    }

    #[test]
    fn limits_count_down_and_refuse() {
        let config = Config {
            rate_limit_read_per_minute: 2,
            rate_limit_write_per_minute: 0,
            ..Config::default()
        };
        let limits = RateLimits::new(&config);
        assert_eq!(
            limits.admit(Class::Read, "a").unwrap().unwrap().remaining,
            1
        );
        assert_eq!(
            limits.admit(Class::Read, "a").unwrap().unwrap().remaining,
            0
        );
        let (_, err) = *limits.admit(Class::Read, "a").unwrap_err();
        assert_eq!(err.reason, Reason::RATE_LIMITED);
        assert!(err.retry_after.unwrap() >= 1);
        assert!(limits.admit(Class::Read, "b").is_ok());
        assert_eq!(limits.admit(Class::Write, "a").unwrap(), None);
    }
}
