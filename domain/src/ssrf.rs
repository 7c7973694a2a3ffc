//! Server-side request forgery guard for webhook targets.
//!
//! A subscriber chooses the URL we POST to, so a URL must never make us reach our own network:
//! loopback, private ranges, the cloud metadata service, and so on. Two checks together cover it:
//!
//! 1. [`check_url`] when a subscription is saved *and* before every attempt: scheme (HTTPS unless
//!    the policy relaxes it), no user info, a host, and an IP-literal host checked at once.
//! 2. [`check_resolved`] by the shell on **every** address the host name resolves to, right before
//!    connecting (connecting to the checked address), so a name that resolves to a public address
//!    at save time and to `127.0.0.1` later (DNS rebinding) is still refused.
//!
//! Redirects are never followed (see [`crate::classify`]), so a public endpoint cannot
//! bounce us inward.
//!
//! [`TargetPolicy::allow_private`] (set only by the local demo, whose receiver listens on
//! loopback) relaxes the *private network* ranges: loopback, RFC 1918, CGNAT, unique-local and
//! site-local IPv6. It never relaxes link-local (which holds the metadata service
//! 169.254.169.254), AWS's IPv6 metadata address `fd00:ec2::254`, unspecified, multicast,
//! broadcast, documentation, benchmarking or reserved ranges.
//!
//! IPv6 forms that embed an IPv4 address are judged by the embedded address: IPv4-mapped
//! (`::ffff:a.b.c.d`), SIIT IPv4-translated (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`),
//! NAT64 well-known prefix (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`). An ISATAP address
//! (any /64 with the interface id `0:5efe:a.b.c.d` or `200:5efe:a.b.c.d`) is judged by its
//! prefix and then by its embedded address: either refusing refuses it. Teredo (`2001::/32`, whose embedded addresses are obfuscated) and
//! local-use NAT64 (`64:ff9b:1::/48`) are refused outright.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use thiserror::Error;
use url::{Host, Url};

/// Longest webhook URL accepted, in bytes.
pub const MAX_URL_LEN: usize = 2048;

/// A refused address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForbiddenRange {
    /// The range in CIDR notation, e.g. `10.0.0.0/8`.
    pub cidr: &'static str,
    /// What it is, e.g. `private network`.
    pub name: &'static str,
    /// Whether [`TargetPolicy::allow_private`] relaxes it.
    pub private_network: bool,
}

const fn r(cidr: &'static str, name: &'static str, private_network: bool) -> ForbiddenRange {
    ForbiddenRange {
        cidr,
        name,
        private_network,
    }
}

/// (network, prefix length, range). Earlier rows win.
const V4_RANGES: &[(u32, u8, ForbiddenRange)] = &[
    (
        0x0000_0000,
        8,
        r("0.0.0.0/8", "unspecified / \"this network\"", false),
    ),
    (0x0A00_0000, 8, r("10.0.0.0/8", "private network", true)),
    (
        0x6440_0000,
        10,
        r("100.64.0.0/10", "carrier-grade NAT shared space", true),
    ),
    (0x7F00_0000, 8, r("127.0.0.0/8", "loopback", true)),
    (
        0xA9FE_0000,
        16,
        r(
            "169.254.0.0/16",
            "link-local (including the cloud metadata service)",
            false,
        ),
    ),
    (0xAC10_0000, 12, r("172.16.0.0/12", "private network", true)),
    (
        0xC000_0000,
        24,
        r("192.0.0.0/24", "IETF protocol assignments", false),
    ),
    (
        0xC000_0200,
        24,
        r("192.0.2.0/24", "documentation (TEST-NET-1)", false),
    ),
    (
        0xC058_6300,
        24,
        r("192.88.99.0/24", "6to4 relay anycast", false),
    ),
    (
        0xC0A8_0000,
        16,
        r("192.168.0.0/16", "private network", true),
    ),
    (0xC612_0000, 15, r("198.18.0.0/15", "benchmarking", false)),
    (
        0xC633_6400,
        24,
        r("198.51.100.0/24", "documentation (TEST-NET-2)", false),
    ),
    (
        0xCB00_7100,
        24,
        r("203.0.113.0/24", "documentation (TEST-NET-3)", false),
    ),
    (0xE000_0000, 4, r("224.0.0.0/4", "multicast", false)),
    (0xFFFF_FFFF, 32, r("255.255.255.255/32", "broadcast", false)),
    (0xF000_0000, 4, r("240.0.0.0/4", "reserved", false)),
];

/// IPv6 ranges judged as a whole (the embedded-IPv4 forms are handled before this table).
const V6_RANGES: &[(u128, u8, ForbiddenRange)] = &[
    (0, 128, r("::/128", "unspecified", false)),
    (1, 128, r("::1/128", "loopback", true)),
    (
        0x0064_ff9b_0001 << 80,
        48,
        r("64:ff9b:1::/48", "local-use NAT64", false),
    ),
    (0x0100 << 112, 64, r("100::/64", "discard-only", false)),
    (
        0x2001_0000 << 96,
        32,
        r("2001::/32", "Teredo tunnelling", false),
    ),
    (
        0x2001_0002 << 96,
        48,
        r("2001:2::/48", "benchmarking", false),
    ),
    (0x2001_0010 << 96, 28, r("2001:10::/28", "ORCHID", false)),
    (0x2001_0020 << 96, 28, r("2001:20::/28", "ORCHIDv2", false)),
    (
        0x2001_0db8 << 96,
        32,
        r("2001:db8::/32", "documentation", false),
    ),
    (0x3fff << 112, 20, r("3fff::/20", "documentation", false)),
    (
        0xfd00_0ec2_0000_0000_0000_0000_0000_0254,
        128,
        r("fd00:ec2::254/128", "AWS instance metadata service", false),
    ),
    (
        0xfc00 << 112,
        7,
        r("fc00::/7", "unique-local (private network)", true),
    ),
    (0xfe80 << 112, 10, r("fe80::/10", "link-local", false)),
    (
        0xfec0 << 112,
        10,
        r("fec0::/10", "site-local (private network)", true),
    ),
    (0xff00 << 112, 8, r("ff00::/8", "multicast", false)),
];

fn in_v4(addr: u32, net: u32, prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    addr & mask == net & mask
}

fn in_v6(addr: u128, net: u128, prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    addr & mask == net & mask
}

fn v4_range(ip: Ipv4Addr) -> Option<ForbiddenRange> {
    let addr = u32::from(ip);
    V4_RANGES
        .iter()
        .find(|(net, prefix, _)| in_v4(addr, *net, *prefix))
        .map(|(_, _, range)| *range)
}

/// The IPv4 address an IPv6 address embeds, for the forms that carry one verbatim.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let addr = u128::from(ip);
    let low32 = Ipv4Addr::from(addr as u32);
    if in_v6(addr, 0xffff << 32, 96) {
        return Some(low32); // ::ffff:a.b.c.d, IPv4-mapped
    }
    if in_v6(addr, 0xffff << 48, 96) {
        return Some(low32); // ::ffff:0:a.b.c.d, SIIT IPv4-translated
    }
    if in_v6(addr, 0, 96) && addr > 1 {
        return Some(low32); // ::a.b.c.d, IPv4-compatible (deprecated); :: and ::1 are in the table
    }
    if in_v6(addr, 0x0064_ff9b << 96, 96) {
        return Some(low32); // 64:ff9b::a.b.c.d, NAT64 well-known prefix
    }
    if in_v6(addr, 0x2002 << 112, 16) {
        return Some(Ipv4Addr::from((addr >> 80) as u32)); // 2002:AABB:CCDD::, 6to4
    }
    None
}

/// The IPv4 address of an ISATAP interface id (`0:5efe:a.b.c.d`, or `200:5efe:a.b.c.d` with the
/// universal/local bit set) under any /64 prefix.
fn isatap_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let addr = u128::from(ip);
    ((addr >> 32) as u32 & 0xfdff_ffff == 0x0000_5efe).then(|| Ipv4Addr::from(addr as u32))
}

fn v6_range(ip: Ipv6Addr) -> Option<ForbiddenRange> {
    if let Some(v4) = embedded_v4(ip) {
        return v4_range(v4);
    }
    let addr = u128::from(ip);
    V6_RANGES
        .iter()
        .find(|(net, prefix, _)| in_v6(addr, *net, *prefix))
        .map(|(_, _, range)| *range)
        .or_else(|| isatap_v4(ip).and_then(v4_range))
}

/// The refused range `ip` lies in, if any (regardless of policy).
pub fn forbidden_range(ip: IpAddr) -> Option<ForbiddenRange> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

/// Whether `ip` is never a legitimate webhook target under the strict (production) policy.
pub fn is_forbidden_target(ip: IpAddr) -> bool {
    forbidden_range(ip).is_some()
}

/// What webhook targets may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Permit private-network ranges (loopback, RFC 1918, CGNAT, ULA). Only the local demo sets it.
    pub allow_private: bool,
    /// Refuse plain `http`.
    pub require_https: bool,
}

impl TargetPolicy {
    /// HTTPS only, public addresses only.
    pub const PRODUCTION: TargetPolicy = TargetPolicy {
        allow_private: false,
        require_https: true,
    };
    /// The local demo: plain HTTP to a receiver on loopback.
    pub const LOCAL_DEMO: TargetPolicy = TargetPolicy {
        allow_private: true,
        require_https: false,
    };
}

impl Default for TargetPolicy {
    fn default() -> Self {
        TargetPolicy::PRODUCTION
    }
}

/// Why a webhook target is refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TargetError {
    #[error("the webhook URL is not a valid absolute URL: {0}")]
    InvalidUrl(String),
    #[error("the webhook URL is {len} bytes long; at most {MAX_URL_LEN} are accepted")]
    TooLong { len: usize },
    #[error("the webhook URL scheme must be {allowed}, not {scheme:?}")]
    SchemeNotAllowed {
        scheme: String,
        allowed: &'static str,
    },
    #[error(
        "the webhook URL must not contain a user name or password; send credentials another way"
    )]
    Userinfo,
    #[error("the webhook URL has no host")]
    MissingHost,
    #[error("the webhook host {0:?} names this machine")]
    LocalHostName(String),
    #[error("the webhook address {ip} is in a refused range: {name} ({cidr})")]
    ForbiddenAddress {
        ip: IpAddr,
        cidr: &'static str,
        name: &'static str,
    },
}

/// Checks one address the target resolved to (or an IP-literal host).
pub fn check_resolved(ip: IpAddr, policy: &TargetPolicy) -> Result<(), TargetError> {
    match forbidden_range(ip) {
        Some(range) if !(policy.allow_private && range.private_network) => {
            Err(TargetError::ForbiddenAddress {
                ip,
                cidr: range.cidr,
                name: range.name,
            })
        }
        _ => Ok(()),
    }
}

/// Checks a webhook URL and returns it parsed. A host name still has to pass [`check_resolved`]
/// for each address it resolves to at connection time.
pub fn check_url(url: &str, policy: &TargetPolicy) -> Result<Url, TargetError> {
    if url.len() > MAX_URL_LEN {
        return Err(TargetError::TooLong { len: url.len() });
    }
    let parsed = Url::parse(url).map_err(|e| TargetError::InvalidUrl(e.to_string()))?;
    let scheme_ok = match parsed.scheme() {
        "https" => true,
        "http" => !policy.require_https,
        _ => false,
    };
    if !scheme_ok {
        return Err(TargetError::SchemeNotAllowed {
            scheme: parsed.scheme().to_owned(),
            allowed: if policy.require_https {
                "https"
            } else {
                "https or http"
            },
        });
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(TargetError::Userinfo);
    }
    match parsed.host() {
        None => return Err(TargetError::MissingHost),
        Some(Host::Ipv4(ip)) => check_resolved(IpAddr::V4(ip), policy)?,
        Some(Host::Ipv6(ip)) => check_resolved(IpAddr::V6(ip), policy)?,
        Some(Host::Domain(name)) => {
            let name = name.trim_end_matches('.');
            if name.is_empty() {
                return Err(TargetError::MissingHost);
            }
            let bytes = name.as_bytes();
            let suffix = b".localhost";
            let local = name.eq_ignore_ascii_case("localhost")
                || bytes.len() > suffix.len()
                    && bytes[bytes.len() - suffix.len()..].eq_ignore_ascii_case(suffix);
            if local && !policy.allow_private {
                return Err(TargetError::LocalHostName(name.to_owned()));
            }
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const REFUSED_ALWAYS: &[&str] = &[
        "0.0.0.0",
        "0.1.2.3",
        "169.254.169.254",
        "169.254.0.1",
        "169.254.170.2",
        "192.0.0.8",
        "192.0.2.1",
        "192.88.99.1",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "fe80::1",
        "febf::1",
        "ff02::1",
        "ff05::1:3",
        "2001:db8::1",
        "3fff::1",
        "100::1",
        "2001::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "2001:2::1",
        "2001:10::1",
        "2001:20::1",
        "64:ff9b:1::1",
        "fd00:ec2::254",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
        "::ffff:0.0.0.0",
        "::ffff:255.255.255.255",
    ];

    const REFUSED_UNLESS_PRIVATE_ALLOWED: &[&str] = &[
        "10.0.0.1",
        "10.255.255.255",
        "100.64.0.1",
        "100.127.255.254",
        "127.0.0.1",
        "127.255.255.254",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "192.168.255.255",
        "::1",
        "fc00::1",
        "fd12:3456:789a::1",
        "fec0::1",
        "::ffff:127.0.0.1",
        "::ffff:10.1.2.3",
        "::127.0.0.1",
        "::192.168.1.1",
        "64:ff9b::7f00:1",
        "64:ff9b::10.0.0.1",
        "2002:7f00:1::1",
        "2002:c0a8:0101::1",
    ];

    const ALLOWED: &[&str] = &[
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.0",
        "100.63.255.255",
        "100.128.0.0",
        "126.255.255.255",
        "128.0.0.1",
        "169.253.255.255",
        "169.255.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.1.1",
        "192.167.255.255",
        "192.169.0.0",
        "198.17.255.255",
        "198.20.0.0",
        "203.0.114.1",
        "223.255.255.255",
        "52.94.76.10",
        "2606:4700:4700::1111",
        "2a00:1450:4001:82a::200e",
        "2600:1f18::1",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "fbff:ffff::1",
        "fe7f::1",
        "2001:db9::1",
        "2001:4860:4860::8888",
    ];

    #[test]
    fn every_refused_range_is_refused_under_both_policies() {
        for s in REFUSED_ALWAYS {
            assert!(is_forbidden_target(ip(s)), "{s}");
            for policy in [TargetPolicy::PRODUCTION, TargetPolicy::LOCAL_DEMO] {
                assert!(
                    matches!(
                        check_resolved(ip(s), &policy),
                        Err(TargetError::ForbiddenAddress { .. })
                    ),
                    "{s} under {policy:?}"
                );
            }
        }
    }

    #[test]
    fn private_ranges_are_refused_unless_the_policy_allows_them() {
        for s in REFUSED_UNLESS_PRIVATE_ALLOWED {
            assert!(is_forbidden_target(ip(s)), "{s}");
            assert!(
                check_resolved(ip(s), &TargetPolicy::PRODUCTION).is_err(),
                "{s}"
            );
            assert_eq!(
                check_resolved(ip(s), &TargetPolicy::LOCAL_DEMO),
                Ok(()),
                "{s}"
            );
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for s in ALLOWED {
            assert!(
                !is_forbidden_target(ip(s)),
                "{s}: {:?}",
                forbidden_range(ip(s))
            );
            assert_eq!(
                check_resolved(ip(s), &TargetPolicy::PRODUCTION),
                Ok(()),
                "{s}"
            );
        }
    }

    #[test]
    fn siit_and_isatap_forms_that_embed_a_private_ipv4_are_refused() {
        for s in [
            "::ffff:0:169.254.169.254",
            "::ffff:0:a9fe:a9fe",
            "::5efe:169.254.169.254",
            "2001:470:1:2:0:5efe:a9fe:a9fe",
            "2001:470:1:2:200:5efe:169.254.169.254",
            // A link-local ISATAP address with a public IPv4 is still link-local.
            "fe80::5efe:8.8.8.8",
        ] {
            assert!(
                check_resolved(ip(s), &TargetPolicy::LOCAL_DEMO).is_err(),
                "{s} under the local policy too"
            );
        }
        for s in [
            "::ffff:0:127.0.0.1",
            "::ffff:0:10.1.2.3",
            "::5efe:127.0.0.1",
            "::5efe:10.0.0.1",
            "2600:1f18::5efe:192.168.1.1",
            "2600:1f18::200:5efe:172.16.0.1",
            "2600:1f18:1:2:200:5efe:a00:1",
        ] {
            let e = check_resolved(ip(s), &TargetPolicy::PRODUCTION).unwrap_err();
            assert!(matches!(e, TargetError::ForbiddenAddress { .. }), "{s}");
            assert_eq!(
                check_resolved(ip(s), &TargetPolicy::LOCAL_DEMO),
                Ok(()),
                "{s}"
            );
        }
        // The same forms around a public address, and near misses of the interface id, pass.
        for s in [
            "::ffff:0:8.8.8.8",
            "2600:1f18::5efe:8.8.8.8",
            "2600:1f18::200:5efe:8.8.8.8",
            "2600:1f18::100:5efe:a00:1",
            "2600:1f18::5eff:a00:1",
        ] {
            assert_eq!(
                check_resolved(ip(s), &TargetPolicy::PRODUCTION),
                Ok(()),
                "{s}"
            );
        }
        for bad in ["https://[::ffff:0:7f00:1]/", "https://[::5efe:a9fe:a9fe]/"] {
            assert!(
                matches!(
                    check_url(bad, &TargetPolicy::PRODUCTION),
                    Err(TargetError::ForbiddenAddress { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn ranges_are_named_in_errors() {
        let e = check_resolved(ip("169.254.169.254"), &TargetPolicy::PRODUCTION).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the webhook address 169.254.169.254 is in a refused range: \
             link-local (including the cloud metadata service) (169.254.0.0/16)"
        );
        let e = check_resolved(ip("::ffff:127.0.0.1"), &TargetPolicy::PRODUCTION).unwrap_err();
        assert!(e.to_string().contains("loopback (127.0.0.0/8)"), "{e}");
        assert_eq!(
            forbidden_range(ip("255.255.255.255")).unwrap().name,
            "broadcast"
        );
        assert_eq!(
            forbidden_range(ip("172.20.0.1")).unwrap().cidr,
            "172.16.0.0/12"
        );
    }

    #[test]
    fn urls_must_be_https_without_userinfo_and_with_a_host() {
        let p = TargetPolicy::PRODUCTION;
        let u = check_url("https://hooks.example.com/rhythm?x=1", &p).unwrap();
        assert_eq!(u.host_str(), Some("hooks.example.com"));
        assert!(check_url("https://hooks.example.com:8443/", &p).is_ok());
        assert!(check_url("https://[2606:4700:4700::1111]/hook", &p).is_ok());
        assert!(check_url("https://8.8.8.8/hook", &p).is_ok());

        assert_eq!(
            check_url("http://hooks.example.com/", &p),
            Err(TargetError::SchemeNotAllowed {
                scheme: "http".into(),
                allowed: "https"
            })
        );
        for bad in [
            "ftp://x.example/",
            "file:///etc/passwd",
            "gopher://x.example/",
            "javascript:alert(1)",
        ] {
            assert!(
                matches!(
                    check_url(bad, &p),
                    Err(TargetError::SchemeNotAllowed { .. })
                ),
                "{bad}"
            );
        }
        assert_eq!(
            check_url("https://user:pw@hooks.example.com/", &p),
            Err(TargetError::Userinfo)
        );
        assert_eq!(
            check_url("https://user@hooks.example.com/", &p),
            Err(TargetError::Userinfo)
        );
        assert_eq!(
            check_url("https://:pw@hooks.example.com/", &p),
            Err(TargetError::Userinfo)
        );
        assert!(matches!(
            check_url("not a url", &p),
            Err(TargetError::InvalidUrl(_))
        ));
        assert!(matches!(
            check_url("/relative/path", &p),
            Err(TargetError::InvalidUrl(_))
        ));
        assert!(matches!(
            check_url("https://", &p),
            Err(TargetError::InvalidUrl(_))
        ));
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(matches!(
            check_url(&long, &p),
            Err(TargetError::TooLong { .. })
        ));
        assert!(check_url("https://user:pw@hooks.example.com/", &p)
            .unwrap_err()
            .to_string()
            .contains("user name or password"));
    }

    #[test]
    fn ip_literal_hosts_are_checked_in_every_spelling() {
        let p = TargetPolicy::PRODUCTION;
        for bad in [
            "https://127.0.0.1/",
            "https://127.1/",
            "https://2130706433/",
            "https://0x7f.0.0.1/",
            "https://0177.0.0.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://[::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[::ffff:7f00:1]/",
            "https://[fd00:ec2::254]/",
            "https://10.0.0.5:8443/",
            "https://0.0.0.0/",
        ] {
            assert!(
                matches!(
                    check_url(bad, &p),
                    Err(TargetError::ForbiddenAddress { .. })
                ),
                "{bad}: {:?}",
                check_url(bad, &p)
            );
        }
        for bad in [
            "https://localhost/",
            "https://LOCALHOST./",
            "https://api.localhost/",
        ] {
            assert!(
                matches!(check_url(bad, &p), Err(TargetError::LocalHostName(_))),
                "{bad}"
            );
        }
        assert!(check_url("https://notlocalhost.example/", &p).is_ok());
        assert!(check_url("https://localhost.example.com/", &p).is_ok());
    }

    #[test]
    fn the_local_demo_reaches_loopback_over_http_but_never_metadata() {
        let p = TargetPolicy::LOCAL_DEMO;
        assert!(check_url("http://127.0.0.1:9000/hook", &p).is_ok());
        assert!(check_url("http://localhost:9000/hook", &p).is_ok());
        assert!(check_url("http://[::1]:9000/hook", &p).is_ok());
        assert!(check_url("https://192.168.1.10/hook", &p).is_ok());
        assert!(matches!(
            check_url("http://169.254.169.254/latest/meta-data/", &p),
            Err(TargetError::ForbiddenAddress { .. })
        ));
        assert!(matches!(
            check_url("http://[fd00:ec2::254]/", &p),
            Err(TargetError::ForbiddenAddress { .. })
        ));
        assert!(matches!(
            check_url("ftp://127.0.0.1/", &p),
            Err(TargetError::SchemeNotAllowed {
                allowed: "https or http",
                ..
            })
        ));
        assert_eq!(TargetPolicy::default(), TargetPolicy::PRODUCTION);
    }
}
